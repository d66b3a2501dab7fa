// Package sandboxtest gives other packages' root tests a real sandbox host — its own run
// directory, the dedicated network hook, the local images — and checks after each test that
// nothing the host made is left. Nothing here is a fake: the containers are real.
package sandboxtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/internal/mountinfo"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
	binDir  string
)

// Static builds a command of the module (CGO off, static) once per test binary, into a
// directory containers can reach, and returns its path. With cmd/runner it builds the call shim
// runner-exec beside it, where the runner service looks for it, and with cmd/sealrun-netns-hook
// the hook's relay, where the sandbox looks for it.
func Static(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[pkg]; ok {
		return p
	}
	if binDir == "" {
		// One directory per test process, named by its pid; those of processes that are gone
		// are removed here (a test binary has no hook to remove its own at exit).
		old, _ := filepath.Glob(filepath.Join(os.TempDir(), "sealrun-test-bin-*"))
		for _, o := range old {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(o), "sealrun-test-bin-"))
			if err != nil || syscall.Kill(pid, 0) == syscall.ESRCH {
				os.RemoveAll(o)
			}
		}
		d := filepath.Join(os.TempDir(), fmt.Sprintf("sealrun-test-bin-%d", os.Getpid()))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
		binDir = d
	}
	out := filepath.Join(binDir, filepath.Base(pkg))
	if b, err := testenv.GoBuild(out, pkg); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	if pkg == "cmd/sealrun-netns-hook" {
		// The hook's relay, which the sandbox looks for beside the hook.
		if b, err := testenv.CBuild(filepath.Join(binDir, sandbox.RelayBinary), "cmd/sealrun-hook-relay"); err != nil {
			t.Fatalf("build cmd/sealrun-hook-relay (C: make deps installs gcc): %v\n%s", err, b)
		}
	}
	if pkg == "cmd/runner" {
		// The call shim the runner service looks for beside the runner binary, as make build
		// and make install place it.
		if b, err := testenv.CBuild(filepath.Join(binDir, "runner-exec"), "cmd/runner-exec"); err != nil {
			t.Fatalf("build cmd/runner-exec (the call shim, C: make deps installs gcc): %v\n%s", err, b)
		}
	}
	built[pkg] = out
	return out
}

// Host is a root-only sandbox host with its own run directory; at cleanup it fails the test if
// anything it made is left.
func Host(t testing.TB) *sandbox.Host {
	t.Helper()
	return HostWithRuntime(t, "")
}

// HostWithRuntime is Host with another runtime binary (the fault tests' failing runtime; "" is
// runc).
func HostWithRuntime(t testing.TB, runtime string) *sandbox.Host {
	t.Helper()
	return HostWithConfig(t, sandbox.HostConfig{Runtime: runtime})
}

// HostWithConfig is Host with cfg's runtime ("" is runc), role runtimes (over those the
// environment gives) and time-outs; its state and run directories and hook are the test's.
func HostWithConfig(t testing.TB, cfg sandbox.HostConfig) *sandbox.Host {
	t.Helper()
	testenv.RequireRoot(t)
	runDir := testenv.RunDir(t, sandbox.ReapRunDir)
	if cfg.Runtime == "" {
		cfg.Runtime = testenv.Runtime()
	}
	roles := map[sandbox.Role]string{}
	for role, rt := range testenv.RoleRuntimes() {
		roles[sandbox.Role(role)] = rt
	}
	for role, rt := range cfg.RoleRuntimes {
		roles[role] = rt // the test's own, over the environment's
	}
	cfg.StateDir, cfg.RunDir, cfg.RoleRuntimes, cfg.Hook = t.TempDir(), runDir, roles, Static(t, "cmd/sealrun-netns-hook")
	// The network namespaces mounted before this host existed are not its own: in a private
	// mount namespace (testenv.InPrivateMounts) they are copies of other packages' live runs',
	// and they look hidden once the test mounts the directory afresh.
	before := map[string]bool{}
	for _, m := range mountinfo.Table() {
		if m.Type == "nsfs" {
			before[m.Point] = true
		}
	}
	h, err := sandbox.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cs, err := h.ListContainers(context.Background()); err != nil || len(cs) > 0 {
			t.Errorf("leaked runtime containers: %d (%v)", len(cs), err)
		}
		for _, sub := range []string{"runs", "bundles"} {
			if entries, _ := os.ReadDir(filepath.Join(runDir, sub)); len(entries) > 0 {
				t.Errorf("leaked %s under %s: %d", sub, runDir, len(entries))
			}
		}
		if owners, err := h.Ranges().Owners(); err != nil || len(owners) > 0 {
			t.Errorf("leaked UID ranges: %v %v", owners, err)
		}
		var stranded []string
		for _, p := range sandbox.StrandedNetns(sandbox.DefaultNetnsDir) {
			if !before[p] {
				stranded = append(stranded, p)
			}
		}
		if len(stranded) > 0 {
			t.Errorf("network namespaces hidden under a later mount of their directory, which no teardown removed: %v", stranded)
		}
		os.RemoveAll(runDir)
	})
	return h
}

// Images are the rootfs of the local test images.
type Images struct{ Controller, Python string }

// LocalImages gates on the local images make test builds.
func LocalImages(t testing.TB) Images {
	t.Helper()
	im := testenv.LocalImages(t)
	return Images{Controller: im.Rootfs(t, "controller"), Python: im.Rootfs(t, "python")}
}

// Workspace makes a directory every container of r can use as /workspace.
func Workspace(t testing.TB, r *sandbox.Run) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	ws := filepath.Join(dir, "workspace")
	if err := r.PrepareWorkspace(ws, 0); err != nil {
		t.Fatal(err)
	}
	return ws
}

// Fault is one failure a FaultyRuntime injects.
type Fault struct {
	// Verb is the runtime verb that fails (run, create, start, exec, kill, delete, state: it
	// exits 1 with a message, doing nothing), or "init": the container's init is killed by a
	// createRuntime hook of its own, after sealrun's network hook and before the runtime executes
	// the container's process (runc's "writing syncT procResume: broken pipe" on a loaded host),
	// or "hang": a createRuntime hook before sealrun's sleeps 8 s (readiness does not come
	// within a start time-out shorter than that).
	Verb string
	// Role is the role whose containers it hits ("": any).
	Role sandbox.Role
	// Nth is which of those calls fails (1: the first); 0: every one.
	Nth int
}

// RoleRuntime is the runtime binary the tests give role (SEALRUN_TEST_ROLE_RUNTIMES, then
// SEALRUN_TEST_RUNTIME, then runc).
func RoleRuntime(t testing.TB, role sandbox.Role) string {
	t.Helper()
	rt := testenv.RoleRuntimes()[string(role)]
	if rt == "" {
		rt = testenv.Runtime()
	}
	if rt == "" {
		rt = "runc"
	}
	p, err := exec.LookPath(rt)
	if err != nil {
		t.Fatalf("the runtime %s: %v", rt, err)
	}
	return p
}

// FaultyRuntime writes a wrapper around the runtime binary real that injects f, and returns
// its path. The wrapper passes everything else through (so `--version` names the real runtime's
// kind), and counts calls across processes in a file beside it.
func FaultyRuntime(t testing.TB, real string, f Fault) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	verb := f.Verb
	if verb == "init" || verb == "hang" {
		verb = "run"
	}
	// The init fault's hook: kill -9 the pid the runtime gives hooks on stdin (its state).
	timeout := 10
	hook, _ := json.Marshal(specs.Hook{Path: "/bin/sh", Args: []string{"sh", "-c", `kill -9 $(grep -o '"pid": *[0-9]*' | grep -o '[0-9]*$')`}, Timeout: &timeout})
	hookFile := filepath.Join(dir, "kill-hook.json")
	if err := os.WriteFile(hookFile, hook, 0o644); err != nil {
		t.Fatal(err)
	}
	hangTimeout := 90
	hang, _ := json.Marshal(specs.Hook{Path: "/bin/sleep", Args: []string{"sleep", "8"}, Timeout: &hangTimeout})
	if err := os.WriteFile(filepath.Join(dir, "hang-hook.json"), hang, 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/sh
real=%q; fault=%q; verb=%q; role=%q; nth=%d; counter=%q; hook=%q
v=""; bundle=""; prev=""; hit=""
for a in "$@"; do
  case "$a" in run|create|start|exec|kill|delete|state) [ -z "$v" ] && v=$a;; esac
  [ "$prev" = "--bundle" ] && bundle=$a
  case "$a" in *-"$role"-[0-9]*) hit=1;; esac
  prev=$a
done
[ -z "$role" ] && hit=1
if [ "$v" = "$verb" ] && [ -n "$hit" ]; then
  n=$(flock "$counter" sh -c 'n=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 )); echo $n > "$1"; echo $n' sh "$counter")
  if [ "$nth" = 0 ] || [ "$n" = "$nth" ]; then
    if [ "$fault" = hang ]; then
      HOOK=${hook%%/*}/hang-hook.json perl -0pi -e 'BEGIN { local $/; open(my $f, "<", $ENV{HOOK}) or die; $h = <$f> } s/("createRuntime": \[)/$1$h, /s' "$bundle/config.json"
    elif [ "$fault" = init ]; then
      HOOK=$hook perl -0pi -e 'BEGIN { local $/; open(my $f, "<", $ENV{HOOK}) or die; $h = <$f> } s/("createRuntime": \[.*?\})(\s*\])/$1, $h$2/s' "$bundle/config.json"
    else
      echo "faulty-runtime: $v failed (fault injected)" >&2
      exit 1
    fi
  fi
fi
exec "$real" "$@"
`, real, f.Verb, verb, string(f.Role), f.Nth, filepath.Join(dir, "count"), hookFile)
	p := filepath.Join(dir, "faulty-"+filepath.Base(real))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
