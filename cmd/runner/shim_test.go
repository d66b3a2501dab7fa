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
	"github.com/sealrun/sealrun/runner"
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
		got, codes := runShims(t, c.name, dir, c.env, append([]string{"_exec"}, c.args...), nil, goShim, cShim)
		if got[0] != got[1] || codes[0] != codes[1] {
			t.Errorf("%s: the shims disagree:\nrunner _exec (exit %d):\n%s\nrunner-exec (exit %d):\n%s", c.name, codes[0], got[0], codes[1], got[1])
		} else if codes[0] != c.code {
			t.Errorf("%s: exit %d, want %d:\n%s", c.name, codes[0], c.code, got[0])
		}
		// The same call handed to a waiting shim on stdin (runner.EncodeCall): the same result.
		if len(c.args) < 4 || c.args[0] != "--cwd" || c.args[2] != "--" {
			continue
		}
		call := runner.EncodeCall(c.args[1], nil, c.args[3:])
		agot, acodes := runShims(t, c.name+" (_await)", dir, c.env, []string{"_await"}, call, goShim, cShim)
		if agot != got || acodes != codes {
			t.Errorf("%s: _await differs from _exec:\n_exec (exit %v):\n%s\n_await (exit %v):\n%s", c.name, codes, got, acodes, agot)
		}
	}
	if out, err := exec.Command(cShim, "posture").CombinedOutput(); err == nil || !strings.Contains(string(out), "no runner client") {
		t.Errorf("runner-exec with a verb other than _exec: %v %s", err, out)
	}

	// A waiting shim adds the call's variables in order, a later one replacing an earlier and
	// the container's own, as the runtime sets a spec's.
	env := []string{sysPath, "FOO=from the spec", "KEEP=1"}
	call := runner.EncodeCall(work, []string{"FOO=bar baz", "NEW=1", "FOO=last", "EMPTY="}, []string{"sh", "-c", `echo "$FOO"; env | grep -E '^(EMPTY|FOO|KEEP|NEW|PATH)=' | sort`})
	got, codes := runShims(t, "call environment", dir, env, []string{"_await"}, call, goShim, cShim)
	want := "stdout:\nlast\nEMPTY=\nFOO=last\nKEEP=1\nNEW=1\nPATH=/usr/bin:/bin\nstderr:\n"
	if got[0] != got[1] || codes != [2]int{} {
		t.Errorf("call environment: the shims disagree or fail: %v\n%s\n%s", codes, got[0], got[1])
	} else if got[0] != want {
		t.Errorf("call environment:\n%s\nwant\n%s", got[0], want)
	}

	// Anything but a call in runner.EncodeCall's form is refused before any of it is used.
	many := []byte("C/\x00")
	for range 257 {
		many = append(many, "Atrue\x00"...)
	}
	for _, m := range []struct{ name, call, why string }{
		{"empty", "", "none came"},
		{"no final NUL", "C/\x00Atrue", "its last field has no NUL"},
		{"unknown kind", "X\x00", "a field of unknown kind"},
		{"empty field", "C/\x00\x00Atrue\x00", "a field of unknown kind"},
		{"second directory", "C/\x00C/\x00Atrue\x00", "a second directory"},
		{"relative directory", "Cwork\x00Atrue\x00", "not absolute"},
		{"variable first", "Ea=b\x00C/\x00Atrue\x00", "a variable out of order"},
		{"variable after an argument", "C/\x00Atrue\x00Ea=b\x00", "a variable out of order"},
		{"variable without =", "C/\x00Eab\x00Atrue\x00", "not KEY=VALUE"},
		{"variable without a key", "C/\x00E=b\x00Atrue\x00", "not KEY=VALUE"},
		{"argument first", "Atrue\x00C/\x00", "an argument before the directory"},
		{"no command", "C/\x00", "no command"},
		{"empty command", "C/\x00A\x00", "no command"},
		{"257 arguments", string(many), "over 256 arguments"},
		{"over 1 MiB", "C/\x00A" + strings.Repeat("x", 1<<20) + "\x00", "over 1 MiB"},
	} {
		got, codes := runShims(t, m.name, dir, []string{sysPath}, []string{"_await"}, []byte(m.call), goShim, cShim)
		want := "stdout:\nstderr:\nrunner _await: malformed call from the runner service: "
		if got[0] != got[1] || codes != [2]int{2, 2} || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], m.why) {
			t.Errorf("_await, %s: want exit 2 and %q from both:\nrunner (exit %d):\n%s\nrunner-exec (exit %d):\n%s", m.name, m.why, codes[0], got[0], codes[1], got[1])
		}
	}
}

// runShims runs each shim with args, env (none when nil) and stdin in dir, and returns what
// each wrote and its exit status.
func runShims(t *testing.T, name, dir string, env, args []string, stdin []byte, shims ...string) (got [2]string, codes [2]int) {
	t.Helper()
	for i, shim := range shims {
		cmd := exec.Command(shim, args...)
		cmd.Env, cmd.Dir = env, dir
		if cmd.Env == nil {
			cmd.Env = []string{}
		}
		cmd.Stdin = bytes.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			codes[i] = ee.ExitCode()
		case err != nil:
			t.Fatalf("%s: %s: %v", name, shim, err)
		}
		got[i] = "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String()
	}
	return got, codes
}
