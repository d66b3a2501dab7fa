package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox"
)

func TestSandboxSpec(t *testing.T) {
	for _, role := range []string{"controller", "runner", "grader"} {
		r := sealrun(t, "sandbox", "spec", "--role", role)
		if r.code != 0 {
			t.Fatalf("%s: %+v", role, r)
		}
		var spec struct {
			Root struct{ Readonly bool }
		}
		if err := json.Unmarshal([]byte(r.stdout), &spec); err != nil || !spec.Root.Readonly {
			t.Errorf("%s: %v %s", role, err, r.stdout)
		}
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sandbox", "spec", "--role", "admin"}, 2, `unknown role "admin"`},
		{[]string{"sandbox", "spec"}, 2, "unknown role"},
		{[]string{"sandbox", "probe", "--role", "runner"}, 2, "give the image with --image"},
		{[]string{"sandbox", "run", "--role", "runner", "--image", "sha256:" + strings.Repeat("0", 64)}, 2, "a command after --"},
		{[]string{"sandbox"}, 2, "missing subcommand"},
	} {
		if r := sealrun(t, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want %d %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// Root: doctor, a probe and one-off commands against the local images make test builds.
func TestSandboxVerbsAsRoot(t *testing.T) {
	testenv.RequireRoot(t)
	imgs := testenv.LocalImages(t)
	state := imgs.State
	lock := struct{ Images map[string]string }{imgs.Refs}
	runner := filepath.Join(filepath.Dir(bin), "runner")
	if out, err := buildStatic(runner); err != nil {
		t.Fatalf("build runner: %v %s", err, out)
	}
	runDir := testenv.RunDir(t, sandbox.ReapRunDir)
	if r := sealrun(t, "--state-dir", state, "sandbox", "run", "--role", "runner", "--image", lock.Images["controller"], "--run-dir", t.TempDir(), "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "is not reachable by containers") {
		t.Errorf("run dir under a private parent: %+v", r)
	}
	sr := func(args ...string) result {
		return sealrun(t, append([]string{"--state-dir", state}, args...)...)
	}
	if r := sr("doctor"); r.code != 0 || !strings.Contains(r.stdout, "ok    runtime") {
		t.Errorf("doctor: %+v", r)
	}
	if r := sr("sandbox", "probe", "--role", "runner", "--image", lock.Images["python"], "--run-dir", runDir, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"ok": true`) {
		t.Errorf("probe: %+v", r)
	}
	if r := sr("sandbox", "run", "--role", "runner", "--image", lock.Images["controller"], "--run-dir", runDir, "--", "sh", "-c", "echo hello; exit 5"); r.code != 5 || r.stdout != "hello\n" {
		t.Errorf("run: %+v", r)
	}
	if r := sr("sandbox", "run", "--role", "controller", "--image", lock.Images["controller"], "--run-dir", runDir, "--", "sh", "-c", "command -v python3 python || echo no-python"); r.code != 0 || r.stdout != "no-python\n" {
		t.Errorf("controller has python: %+v", r)
	}
	if r := sr("sandbox", "reap", "--run-dir", runDir); r.code != 0 || !strings.Contains(r.stdout, "nothing to reap") {
		t.Errorf("reap: %+v", r)
	}
}
