package sandbox

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

func requireRoot(t testing.TB) { t.Helper(); testenv.RequireRoot(t) }

// testImages are the rootfs of the local images make test builds into SEALRUN_TEST_STATE.
type testImages struct{ controller, python string }

func localImages(t testing.TB) testImages {
	t.Helper()
	im := testenv.LocalImages(t)
	return testImages{controller: im.Rootfs(t, "controller"), python: im.Rootfs(t, "python")}
}

var (
	buildOnce          sync.Once
	runnerBin, hookBin string
	buildErr           error
)

// buildBinaries builds the static runner client, the network hook and its relay once, in a
// directory containers can reach.
func buildBinaries(t testing.TB) (runner, hook string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sealrun-sandbox-bin-") // not sealrun-test-bin-N: sandboxtest removes those whose N is no live pid
		if err != nil {
			buildErr = err
			return
		}
		os.Chmod(dir, 0o755)
		runnerBin, hookBin = filepath.Join(dir, "runner"), filepath.Join(dir, "sealrun-netns-hook")
		for out, pkg := range map[string]string{runnerBin: "cmd/runner", hookBin: "cmd/sealrun-netns-hook"} {
			if b, err := testenv.GoBuild(out, pkg); err != nil {
				buildErr = &buildError{string(b)}
				return
			}
		}
		// The hook's relay beside the hook, as make install places it: testHost's hosts use it.
		if b, err := testenv.CBuild(filepath.Join(dir, RelayBinary), "cmd/sealrun-hook-relay"); err != nil {
			buildErr = &buildError{"build cmd/sealrun-hook-relay (C: make deps installs gcc): " + err.Error() + "\n" + string(b)}
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
// testRun is a run of the test host named name, and the local images; the run is destroyed when
// the test ends.
func testRun(t *testing.T, name string) (*Run, testImages) {
	t.Helper()
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Destroy(ctx) })
	return r, imgs
}

func testHost(t *testing.T) *Host {
	t.Helper()
	requireRoot(t)
	_, hook := buildBinaries(t)
	return newTestHost(t, hook)
}

// newTestHost is testHost with a given hook ("" for the fallback: this test binary re-executed).
func newTestHost(t *testing.T, hook string) *Host {
	t.Helper()
	runDir := testenv.RunDir(t, ReapRunDir)
	h, err := NewHost(HostConfig{StateDir: t.TempDir(), RunDir: runDir, Hook: hook, Runtime: testenv.Runtime(), RoleRuntimes: testRoleRuntimes()})
	if err != nil {
		t.Fatal(err)
	}
	trackRecords(h)
	t.Cleanup(func() {
		assertNoLeaks(t, h)
		os.RemoveAll(runDir)
	})
	return h
}

// assertNoLeaks fails the test if anything this host made is left: a container in its runtime
// root, a run record, a netns or cgroup of a run it created, a mount under its run directory or
// on a workspace, a bundle, a UID range of its own — and any sealrun link in the host's
// namespace. It looks only at this host's things, so tests of other packages may run beside it.
func assertNoLeaks(t *testing.T, h *Host) {
	t.Helper()
	if cs, err := h.ListContainers(context.Background()); err != nil {
		t.Errorf("runtime list: %v", err)
	} else {
		for _, c := range cs {
			t.Errorf("leaked runtime container %s (%s)", c.ID, c.Status)
		}
	}
	for _, sub := range []string{"runs", "bundles"} {
		if entries, _ := os.ReadDir(filepath.Join(h.cfg.RunDir, sub)); len(entries) > 0 {
			t.Errorf("leaked %s under %s: %d entries", sub, h.cfg.RunDir, len(entries))
		}
	}
	made := recordsOf(h)
	mountinfo, _ := os.ReadFile("/proc/self/mountinfo")
	for id, rec := range made {
		if p := rec.netnsPath(); p != "" {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("leaked network namespace of run %s: %s", id, p)
			}
			if m := nsfsMountsAt(p); len(m) > 0 {
				t.Errorf("leaked network namespace of run %s: %d mounts on %s (hidden under a later mount: %v)", id, len(m), p, slices.Contains(StrandedNetns(h.cfg.NetnsDir), p))
			}
		}
		if (cgroup.Tree{Path: h.placement.Root + "/" + id}).Exists() {
			t.Errorf("leaked cgroup of run %s", id)
		}
		for _, ws := range rec.Workspaces {
			if strings.Contains(string(mountinfo), " "+ws+" ") {
				t.Errorf("leaked workspace mount %s", ws)
			}
		}
	}
	for _, line := range strings.Split(string(mountinfo), "\n") {
		if strings.Contains(line, h.cfg.RunDir+"/") {
			t.Errorf("leaked mount: %s", line)
		}
	}
	if links, err := netlink.LinkList(); err == nil {
		for _, l := range links {
			if strings.Contains(l.Attrs().Name, "sealrun") || l.Attrs().Name == airgap.GatewayLink {
				t.Errorf("leaked link %s in the host's namespace", l.Attrs().Name)
			}
		}
	}
	if owners, err := h.ranges.Owners(); err != nil || len(owners) > 0 {
		t.Errorf("leaked UID ranges: %v %v", owners, err)
	}
}

var (
	recordsMu sync.Mutex
	records   = map[*Host]map[string]runRecord{}
)

// trackRecords keeps, for the leak checks, the last record of every run h creates.
func trackRecords(h *Host) {
	recordsMu.Lock()
	records[h] = map[string]runRecord{}
	recordsMu.Unlock()
	h.onRecord = func(rec runRecord) {
		recordsMu.Lock()
		records[h][rec.ID] = rec
		recordsMu.Unlock()
	}
}

func recordsOf(h *Host) map[string]runRecord {
	recordsMu.Lock()
	defer recordsMu.Unlock()
	return maps.Clone(records[h])
}

// workspace returns a directory the run's containers can use as /workspace.
func workspace(t *testing.T, r *Run) string {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	ws := filepath.Join(dir, "ws")
	if err := r.PrepareWorkspace(ws, 0); err != nil {
		t.Fatal(err)
	}
	return ws
}

// readFile reads a file the test needs, failing the test when it cannot.
func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testRoleRuntimes are the roles' own runtimes SEALRUN_TEST_ROLE_RUNTIMES gives (for example
// controller=runc beside SEALRUN_TEST_RUNTIME=runsc).
func testRoleRuntimes() map[Role]string {
	roles := map[Role]string{}
	for role, rt := range testenv.RoleRuntimes() {
		roles[Role(role)] = rt
	}
	return roles
}
