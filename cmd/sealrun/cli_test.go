package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// bin is the sealrun binary built once for all CLI tests.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "sealrun-cli-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "sealrun")
	out, err := testenv.GoBuild(bin, "cmd/sealrun")
	if err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// sealrun runs the built binary with no stdin and returns its output and exit code.
func sealrun(t *testing.T, args ...string) result {
	t.Helper()
	return sealrunIn(t, "", args...)
}

// sealrunIn is sealrun with dir as its working directory ("" for the test's own).
func sealrunIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sealrun: %v", err)
	}
	r := result{stdout.String(), stderr.String(), code}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("sealrun %v panicked:\n%s", args, r.stderr)
	}
	return r
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from golden file (go test ./cmd/sealrun -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

const ari = "../../tracks/ari-v1.toml"

func TestTrackVerbs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shipped, err := os.ReadFile(ari)
	if err != nil {
		t.Fatal(err)
	}
	typo := write("typo.toml", strings.Replace(string(shipped), "call_limit", "call_limt", 1))
	garbage := write("garbage.bin", "\x00\x01\x02\xff binary")
	big := write("big.toml", "")
	if err := os.Truncate(big, 100<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring
		stderr     string // substring
		stderrLine bool   // stderr must be exactly one line
	}{
		{"validate ok", []string{"track", "validate", ari, "../../tracks/demo.toml"}, 0, ": ok (track ari-v1 version 1, active, id ", "", false},
		{"validate typo", []string{"track", "validate", typo}, 1, "", "typo.toml:budget.call_limt: unknown key; [budget] takes wall, call_limit, reserve, grading, question_limit, max_tokens, max_cost; did you mean \"call_limit\"?", false},
		{"validate all problems", []string{"track", "validate", typo}, 1, "", "budget.call_limit: missing key", false},
		{"id", []string{"track", "id", ari}, 0, "", "", false},
		{"id invalid", []string{"track", "id", typo}, 1, "", "typo.toml:budget.call_limt", false},
		{"show invalid", []string{"track", "show", typo}, 1, "", "did you mean", false},
		{"missing file", []string{"track", "show", filepath.Join(dir, "nope.toml")}, 1, "", "nope.toml: no such file", true},
		{"directory", []string{"track", "id", dir}, 1, "", ": is a directory", true},
		{"garbage", []string{"track", "validate", garbage}, 1, "", "contains a NUL byte", true},
		{"100 MB", []string{"track", "show", big}, 1, "", "is 104857600 bytes; track files are at most", true},
		{"no args", []string{"track", "id"}, 2, "", "expected one track file, got 0 argument(s)", false},
		{"too many args", []string{"track", "show", ari, ari}, 2, "", "expected one track file, got 2", false},
		{"unknown flag", []string{"track", "validate", "--bogus", ari}, 2, "", "unknown flag: --bogus", false},
		{"unknown verb", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`, false},
		{"bare track", []string{"track"}, 2, "", "missing subcommand", false},
		{"no verb", nil, 2, "Usage:", "", false},
		{"help", []string{"track", "validate", "--help"}, 0, "Check track files", "", false},
		{"version", []string{"version"}, 0, "github.com/sigstore/sigstore            v1.10.", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sealrun(t, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout %q does not contain %q", r.stdout, tc.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr %q does not contain %q", r.stderr, tc.stderr)
			}
			if tc.stderrLine && strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr is not one line: %q", r.stderr)
			}
		})
	}
}

func TestTrackIDRecomputable(t *testing.T) {
	id := sealrun(t, "track", "id", ari)
	canon := sealrun(t, "track", "id", "--canonical", ari)
	if id.code != 0 || canon.code != 0 {
		t.Fatalf("exit codes %d %d: %s %s", id.code, canon.code, id.stderr, canon.stderr)
	}
	sum := exec.Command("sha256sum")
	sum.Stdin = strings.NewReader(canon.stdout)
	out, err := sum.Output()
	if err != nil {
		t.Fatalf("sha256sum: %v", err)
	}
	if got, want := strings.Fields(string(out))[0], strings.TrimSpace(id.stdout); got != want {
		t.Errorf("sha256sum of canonical JSON = %s, track id = %s", got, want)
	}
}

func TestTrackShowGolden(t *testing.T) {
	for _, name := range []string{"ari-v1", "demo", "airs-digits"} {
		r := sealrun(t, "track", "show", "../../tracks/"+name+".toml")
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		golden(t, "track-show-"+name+".golden", r.stdout)
	}
}

// buildStatic builds the static runner client to path.
func buildStatic(path string) ([]byte, error) {
	return testenv.GoBuild(path, "cmd/runner")
}
