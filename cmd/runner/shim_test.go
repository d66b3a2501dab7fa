//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// TestExecShimsAgree runs the two call shims — this binary's `runner _exec` and the C
// runner-exec the service prefers — on the same cases and requires the same output, the same
// exit status, and the status each case is meant to give: the agent sees one behaviour whichever
// is installed.
func TestExecShimsAgree(t *testing.T) {
	dir := t.TempDir()
	goShim, cShim := filepath.Join(dir, "runner"), filepath.Join(dir, "runner-exec")
	if out, err := testenv.GoBuild(goShim, "cmd/runner"); err != nil {
		t.Fatalf("build cmd/runner: %v %s", err, out)
	}
	if out, err := testenv.CBuild(cShim, "cmd/runner-exec"); err != nil {
		t.Fatalf("build cmd/runner-exec (C: make deps installs gcc): %v %s", err, out)
	}
	work := filepath.Join(dir, "work")
	for p, mode := range map[string]os.FileMode{
		"script":        0o755, // a #! script, run by a path with a slash
		"plain":         0o644, // not executable
		"garbage":       0o755, // executable, but no format the kernel knows
		"bin/tool":      0o755, // found only through a relative PATH entry
		"first/tool2":   0o644, // a PATH entry whose match is not executable is passed over
		"second/tool2":  0o755,
		"third/tool3/x": 0o644, // tool3 is a directory there: passed over
		"fourth/tool3":  0o755,
		"here":          0o755, // in cwd, reachable only through an empty PATH entry
	} {
		p = filepath.Join(work, p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		body := "#!/bin/sh\necho ran " + filepath.Base(p) + " \"$@\"\n"
		if strings.HasSuffix(p, "garbage") {
			body = "\x00\x01\x02 not a program"
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(work, "adir"), 0o755)
	sysPath := "PATH=/usr/bin:/bin"
	abs := func(s string) string { return "PATH=" + filepath.Join(work, s) }
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"PATH lookup", []string{sysPath}, []string{"--cwd", work, "--", "true"}, 0},
		{"cwd", []string{sysPath}, []string{"--cwd", filepath.Join(work, "bin"), "--", "pwd"}, 0},
		{"missing cwd", []string{sysPath}, []string{"--cwd", filepath.Join(work, "nope"), "--", "true"}, exitRefused},
		{"cwd a file", []string{sysPath}, []string{"--cwd", filepath.Join(work, "plain"), "--", "true"}, exitRefused},
		{"not found", []string{sysPath}, []string{"--cwd", work, "--", "no-such-command"}, 127},
		{"no PATH", nil, []string{"--cwd", work, "--", "true"}, 127},
		{"empty PATH", []string{"PATH="}, []string{"--cwd", work, "--", "true"}, 127},
		{"relative path", []string{sysPath}, []string{"--cwd", work, "--", "./script", "a b", "c"}, 0},
		{"relative path up", []string{sysPath}, []string{"--cwd", filepath.Join(work, "bin"), "--", "../script"}, 0},
		{"absolute path", nil, []string{"--cwd", "/", "--", filepath.Join(work, "script")}, 0},
		{"not executable", []string{sysPath}, []string{"--cwd", work, "--", "./plain"}, 126},
		{"missing file", []string{sysPath}, []string{"--cwd", work, "--", "./gone"}, 127},
		{"a directory", []string{sysPath}, []string{"--cwd", work, "--", "./adir"}, 126},
		{"exec format", []string{sysPath}, []string{"--cwd", work, "--", "./garbage"}, 126},
		{"relative PATH entry", []string{"PATH=bin:/usr/bin"}, []string{"--cwd", work, "--", "tool"}, 127},
		{"empty PATH entry", []string{"PATH=:/usr/bin"}, []string{"--cwd", work, "--", "here"}, 127},
		{"trailing empty PATH entry", []string{"PATH=/usr/bin:"}, []string{"--cwd", work, "--", "here"}, 127},
		{"non-executable match passed over", []string{abs("first") + ":" + filepath.Join(work, "second")}, []string{"--cwd", work, "--", "tool2"}, 0},
		{"directory match passed over", []string{abs("third") + ":" + filepath.Join(work, "fourth")}, []string{"--cwd", work, "--", "tool3"}, 0},
		{"one stream, in order", []string{sysPath}, []string{"--cwd", work, "--", "sh", "-c", "echo a; echo b >&2; echo c"}, 0},
		{"environment passed", []string{sysPath, "FOO=bar baz"}, []string{"--cwd", work, "--", "sh", "-c", `echo "$FOO"; env | sort`}, 0},
		{"exit status passed", []string{sysPath}, []string{"--cwd", work, "--", "sh", "-c", "exit 7"}, 7},
		{"no --", []string{sysPath}, []string{"--cwd", work, "echo", "x"}, 0},
		{"no cwd", []string{sysPath}, []string{"--", "echo", "x"}, 0},
		{"no command", []string{sysPath}, []string{"--cwd", work, "--"}, 2},
		{"nothing", []string{sysPath}, nil, 2},
		{"--cwd alone", []string{sysPath}, []string{"--cwd"}, 127},
	} {
		var got [2]string
		var codes [2]int
		for i, shim := range []string{goShim, cShim} {
			cmd := exec.Command(shim, append([]string{"_exec"}, c.args...)...)
			cmd.Env, cmd.Dir = c.env, dir
			if cmd.Env == nil {
				cmd.Env = []string{}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				codes[i] = ee.ExitCode()
			case err != nil:
				t.Fatalf("%s: %s: %v", c.name, shim, err)
			}
			got[i] = "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String()
		}
		if got[0] != got[1] || codes[0] != codes[1] {
			t.Errorf("%s: the shims disagree:\nrunner _exec (exit %d):\n%s\nrunner-exec (exit %d):\n%s", c.name, codes[0], got[0], codes[1], got[1])
		} else if codes[0] != c.code {
			t.Errorf("%s: exit %d, want %d:\n%s", c.name, codes[0], c.code, got[0])
		}
	}
	if out, err := exec.Command(cShim, "posture").CombinedOutput(); err == nil || !strings.Contains(string(out), "no runner client") {
		t.Errorf("runner-exec with a verb other than _exec: %v %s", err, out)
	}
}
