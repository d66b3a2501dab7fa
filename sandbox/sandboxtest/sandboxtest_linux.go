// Package sandboxtest gives other packages' root tests a real sandbox host — its own run
// directory, the dedicated network hook, the local images — and checks after each test that
// nothing the host made is left. Nothing here is a fake: the containers are real.
package sandboxtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

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
	testenv.RequireRoot(t)
	runDir := testenv.RunDir(t, sandbox.ReapRunDir)
	if runtime == "" {
		runtime = testenv.Runtime()
	}
	roles := map[sandbox.Role]string{}
	for role, rt := range testenv.RoleRuntimes() {
		roles[sandbox.Role(role)] = rt
	}
	h, err := sandbox.NewHost(sandbox.HostConfig{StateDir: t.TempDir(), RunDir: runDir, Runtime: runtime, RoleRuntimes: roles, Hook: Static(t, "cmd/sealrun-netns-hook")})
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
