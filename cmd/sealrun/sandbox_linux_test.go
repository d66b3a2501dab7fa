package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
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
		{[]string{"sandbox", "run", "--role", "runner", "--memory", "12XB", "--", "true"}, 2, `--memory "12XB": not a size`},
		{[]string{"sandbox", "run", "--role", "runner", "--memory", "99999999999TiB", "--", "true"}, 2, "out of range"},
		{[]string{"sandbox", "run", "--role", "runner", "--memory", "8MiB", "--", "true"}, 2, "limits.memory_bytes is 8388608; give at least"},
		{[]string{"sandbox", "run", "--role", "runner", "--cpus", "0", "--", "true"}, 2, "--cpus 0: give the container's CPU bandwidth"},
		{[]string{"sandbox", "run", "--role", "runner", "--cpus", "NaN", "--", "true"}, 2, "--cpus NaN"},
		{[]string{"sandbox", "run", "--role", "runner", "--cpus", "9000", "--", "true"}, 2, "is it in millicores?"},
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
	// --memory reaches the container's cgroup (v2's memory.max, or v1's limit, as it sees them)
	if r := sr("sandbox", "run", "--role", "runner", "--image", lock.Images["controller"], "--run-dir", runDir, "--cpus", "0.5", "--memory", "96MiB", "--", "sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"); r.code != 0 || r.stdout != "100663296\n" {
		t.Errorf("run --memory 96MiB: %+v", r)
	}
	if r := sr("sandbox", "run", "--role", "controller", "--image", lock.Images["controller"], "--run-dir", runDir, "--", "sh", "-c", "command -v python3 python || echo no-python"); r.code != 0 || r.stdout != "no-python\n" {
		t.Errorf("controller has python: %+v", r)
	}
	if r := sr("sandbox", "reap", "--run-dir", runDir); r.code != 0 || !strings.Contains(r.stdout, "nothing to reap") {
		t.Errorf("reap: %+v", r)
	}
}

// Several sealrun processes share one host: while this process's host runs a container, six
// `sealrun sandbox run` at once (each on a run directory of its own, made and removed by itself)
// and a `sealrun sandbox reap` of this process's run directory (refused: it is held) disturb
// nothing of it — its container runs on, its UID ranges stay its own — and leave nothing behind.
func TestProcessesShareTheHost(t *testing.T) {
	testenv.RequireRoot(t)
	imgs := testenv.LocalImages(t)
	h := sandboxtest.Host(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	c, err := r.Start(ctx, sandbox.ContainerConfig{Role: sandbox.RoleController, Rootfs: imgs.Rootfs(t, "controller"), Workspace: ws, Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	before, _ := h.Ranges().Owners()
	var wg sync.WaitGroup
	results := make([]result, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = sealrun(t, "--state-dir", imgs.State, "sandbox", "run", "--role", "runner", "--image", imgs.Refs["controller"], "--", "sh", "-c", fmt.Sprintf("echo beside %d", i))
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res.code != 0 || res.stdout != fmt.Sprintf("beside %d\n", i) {
			t.Errorf("sandbox run %d beside the host: %+v", i, res)
		}
	}
	if res := sealrun(t, "--state-dir", imgs.State, "sandbox", "reap", "--run-dir", h.RunDir()); res.code != 1 || !strings.Contains(res.stderr, fmt.Sprintf("is held by sealrun process %d", os.Getpid())) {
		t.Errorf("reap of a held run directory: %+v", res)
	}
	select {
	case <-c.Done():
		t.Fatal("the host's container ended while the other processes ran")
	default:
	}
	after, _ := h.Ranges().Owners()
	if !maps.Equal(before, after) || len(after) == 0 {
		t.Errorf("the host's UID ranges changed: %v, then %v", before, after)
	}
	left, _ := filepath.Glob(filepath.Join(CLIRunDirs, "*"))
	for _, d := range left {
		if filepath.Base(d) != ".reap.lock" && !sandbox.RunDirHeld(d) {
			t.Errorf("a sandbox run left its run directory %s", d)
		}
	}
}

// sealrun sandbox cdi on a stand-in driver (--root): the spec written where asked, or printed;
// every bad --out and a host whose GPUs another spec already names refused with the fix.
func TestSandboxCDI(t *testing.T) {
	testenv.RequireRoot(t) // the stand-in device nodes
	root := t.TempDir()
	for _, d := range []string{"dev", "usr/lib/x86_64-linux-gnu", "usr/bin", "cdi"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for name, minor := range map[string]int{"nvidia0": 0, "nvidiactl": 255} {
		if err := syscall.Mknod(filepath.Join(root, "dev", name), syscall.S_IFCHR|0o666, 195<<8|minor); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05"), []byte("stand-in\n"), 0o755)
	cdiDir := filepath.Join(root, "cdi")
	r := sealrun(t, "sandbox", "cdi", "--root", root, "--out", "-")
	var spec struct {
		Kind    string
		Devices []struct{ Name string }
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &spec) != nil || spec.Kind != "nvidia.com/gpu" || len(spec.Devices) != 2 {
		t.Fatalf("--out -: %+v", r)
	}
	out := filepath.Join(cdiDir, "sealrun-nvidia.json")
	if r := sealrun(t, "sandbox", "cdi", "--root", root, "--out", out); r.code != 0 || !strings.Contains(r.stdout, "wrote "+out+": NVIDIA driver 580.95.05, 1 libraries, no nvidia-smi found") ||
		!strings.Contains(r.stdout, "GPUs: nvidia.com/gpu=0, nvidia.com/gpu=all") || !strings.Contains(r.stdout, "sealrun reads CDI specs from /etc/cdi and /var/run/cdi only") {
		t.Errorf("written: %+v", r)
	}
	if r := sealrun(t, "sandbox", "cdi", "--root", root, "--out", out); r.code != 0 { // again: its own file is replaced
		t.Errorf("written again: %+v", r)
	}
	os.Rename(out, filepath.Join(cdiDir, "nvidia.json")) // as if nvidia-ctk had written it
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--out", out}, 1, "nvidia.com/gpu=0 is already in " + filepath.Join(cdiDir, "nvidia.json")},
		{[]string{"--out", filepath.Join(cdiDir, "x.yaml")}, 2, "ends in .json"},
		{[]string{"--out", filepath.Join(root, "absent", "x.json")}, 1, "does not exist (mkdir -p it"},
		{[]string{"--out", ""}, 2, "--out is empty"},
		{[]string{"--out", "-", "--root", filepath.Join(root, "absent")}, 1, "is not a directory"},
		{[]string{"--out", "-", "--root", cdiDir}, 1, "no NVIDIA GPU under"},
		{[]string{"extra"}, 2, "no arguments"},
	} {
		args := append([]string{"sandbox", "cdi", "--root", root}, tc.args...)
		if r := sealrun(t, args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want %d %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused spec was written")
	}
}
