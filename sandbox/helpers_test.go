package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/vishvananda/netlink"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// requireRoot skips a test that needs root, saying why; make test runs these as root in CI.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv("SEALRUN_NO_ROOT_TESTS") != "" {
		t.Skip("SEALRUN_NO_ROOT_TESTS is set (make test-unit)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, cgroups, runc); make test runs it as root in CI")
	}
}

// testImages are the rootfs of the local images make test builds into SEALRUN_TEST_STATE.
type testImages struct{ controller, python string }

func localImages(t testing.TB) testImages {
	t.Helper()
	state := os.Getenv("SEALRUN_TEST_STATE")
	if state == "" {
		t.Skip("SEALRUN_TEST_STATE is not set: run through make test, which builds the local images")
	}
	var lock struct{ Images map[string]string }
	if _, err := toml.DecodeFile(filepath.Join(state, "images.lock"), &lock); err != nil {
		t.Fatalf("read the local images' lock: %v", err)
	}
	rootfs := func(key string) string {
		ref, ok := lock.Images[key]
		if !ok {
			t.Fatalf("images.lock has no %s image", key)
		}
		_, digest, _ := strings.Cut(ref, "@sha256:")
		return filepath.Join(state, "images", "sha256", digest, "rootfs")
	}
	return testImages{controller: rootfs("controller"), python: rootfs("python")}
}

var (
	buildOnce          sync.Once
	runnerBin, hookBin string
	buildErr           error
)

// buildBinaries builds the static runner client and the network hook once, in a directory
// containers can reach.
func buildBinaries(t testing.TB) (runner, hook string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sealrun-test-bin-")
		if err != nil {
			buildErr = err
			return
		}
		os.Chmod(dir, 0o755)
		runnerBin, hookBin = filepath.Join(dir, "runner"), filepath.Join(dir, "sealrun-netns-hook")
		for out, pkg := range map[string]string{runnerBin: "../cmd/runner", hookBin: "../cmd/sealrun-netns-hook"} {
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{string(b)}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatalf("build the runner client and the hook: %v", buildErr)
	}
	return runnerBin, hookBin
}

// runnerBinary is the static runner client.
func runnerBinary(t testing.TB) string {
	r, _ := buildBinaries(t)
	return r
}

type buildError struct{ out string }

func (e *buildError) Error() string { return e.out }

// testHost makes a Host with its own state and run directories, using the dedicated hook binary,
// and checks after the test that nothing sealrun made is left on the host.
func testHost(t *testing.T) *Host {
	t.Helper()
	requireRoot(t)
	_, hook := buildBinaries(t)
	return newTestHost(t, hook)
}

// newTestHost is testHost with a given hook ("" for the fallback: this test binary re-executed).
func newTestHost(t *testing.T, hook string) *Host {
	t.Helper()
	runDir, err := os.MkdirTemp("/run", "sealrun-test-")
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(HostConfig{StateDir: t.TempDir(), RunDir: runDir, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		assertNoLeaks(t, h)
		os.RemoveAll(runDir)
	})
	return h
}

// assertNoLeaks fails the test if any container, netns, cgroup, link, mount or UID range that
// sealrun makes is left (the same things ../shared/tools/leakcheck lists).
func assertNoLeaks(t *testing.T, h *Host) {
	t.Helper()
	if cs, err := h.Runtime.List(context.Background()); err == nil && len(cs) > 0 {
		for _, c := range cs {
			t.Errorf("leaked runtime container %s (%s)", c.ID, c.Status)
		}
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), Prefix) {
				t.Errorf("leaked network namespace %s", e.Name())
			}
		}
	}
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, CgroupRoot)); err == nil {
			t.Errorf("leaked cgroup %s%s", m, CgroupRoot)
		}
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			if strings.Contains(l.Attrs().Name, "sealrun") || l.Attrs().Name == netnshook.GatewayLink {
				t.Errorf("leaked link %s in the host's namespace", l.Attrs().Name)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), Prefix) {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, Prefix) && !strings.Contains(line, "/run/sealrun-test-") {
				t.Errorf("leaked mount: %s", line)
			}
		}
	}
	if owners, err := h.ranges.Owners(); err == nil && len(owners) > 0 {
		t.Errorf("leaked UID ranges: %v", owners)
	}
}

// workspace returns a directory the run's containers can use as /workspace.
func workspace(t *testing.T, r *Run) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	ws := filepath.Join(dir, "ws")
	if err := r.PrepareWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	return ws
}
