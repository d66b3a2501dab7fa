package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Where a host puts its runs: /sealrun on v1 and hybrid hosts, and on cgroup v2 below the
// delegated cgroup it lives under (the tests of make test-cgroup2 run in a unit with
// Delegate=yes, from a leaf of their own); every run and container cgroup is made there with the
// controllers its limits need.
func TestPlacement(t *testing.T) {
	h := testHost(t)
	p := h.Placement()
	if cgroups.Mode() != cgroups.Unified {
		if p.Root != DefaultCgroupRoot || p.Delegated != "" {
			t.Fatalf("placement on %s: %+v", CgroupMode(), p)
		}
		return
	}
	own, _ := ownCgroupV2()
	d := nearestDelegated(own)
	if d == "" {
		if p.Root != DefaultCgroupRoot {
			t.Fatalf("placement with nothing delegated: %+v", p)
		}
		return
	}
	if p.Root != path.Join(d, "runs") || p.Delegated != d || p.Base != d || p.Moved {
		t.Fatalf("placement below the delegated %s (this process in %s): %+v", d, own, p)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "placed")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: localImages(t).controller, Workspace: workspace(t, r), Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	leaf := filepath.Join(unifiedMountpoint, p.Root, "placed", c.ID, runtimeLeaf)
	procs, err := os.ReadFile(filepath.Join(leaf, "cgroup.procs"))
	if err != nil || len(strings.Fields(string(procs))) == 0 {
		t.Fatalf("the container's processes are not in %s: %q %v", leaf, procs, err)
	}
	for _, cg := range []string{p.Root, path.Join(p.Root, "placed"), path.Join(p.Root, "placed", c.ID)} {
		if on := subtreeEnabled(cg); !slices.Contains(on, "memory") || !slices.Contains(on, "pids") || !slices.Contains(on, "cpu") {
			t.Errorf("cgroup %s hands its children only %v", cg, on)
		}
	}
	if _, err := os.Stat(filepath.Join(unifiedMountpoint, DefaultCgroupRoot)); err == nil {
		t.Errorf("%s exists at the top of the hierarchy", DefaultCgroupRoot)
	}
}

// sealrund as its unit's main process, on cgroup v2: a delegated cgroup (marked as systemd marks
// it) with the process in it moves itself into <cgroup>/supervisor and places runs at
// <cgroup>/runs; a second process in the same cgroup makes that impossible, and it says so.
func TestPlacementDelegated(t *testing.T) {
	requireRoot(t)
	if cgroups.Mode() != cgroups.Unified {
		t.Skip("cgroup v2 only: make test-cgroup2 runs it in its guest")
	}
	own, _ := ownCgroupV2()
	base := nearestDelegated(own)
	if base == "" {
		base = "/"
	}
	unit := path.Join(base, fmt.Sprintf("sealrun-unit-test-%d", os.Getpid()))
	dir := filepath.Join(unifiedMountpoint, unit)
	if err := mkdirCgroupV2(base, unit); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cgroupTree{path: unit}.KillAll(0)
		cgroupTree{path: unit}.Remove()
	}()
	if err := unix.Setxattr(dir, delegateXattr, []byte("1"), 0); err != nil {
		t.Fatalf("mark %s delegated: %v", dir, err)
	}
	self, _ := os.Executable()
	// start runs the test binary as the child, moved into the unit's cgroup before it runs.
	start := func() (Placement, string, string) {
		t.Helper()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), placementChildEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true}
		fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr.CgroupFD = fd
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v %s", err, out)
		}
		var res struct {
			Placement Placement `json:"placement"`
			Error     string    `json:"error"`
			Cgroup    string    `json:"cgroup"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("child said %q: %v", out, err)
		}
		return res.Placement, res.Error, res.Cgroup
	}
	p, errText, cg := start()
	if errText != "" || p.Root != path.Join(unit, "runs") || !p.Moved || cg != path.Join(unit, "supervisor") {
		t.Fatalf("the unit's only process: placement %+v, error %q, it ended in %s", p, errText, cg)
	}
	if on := subtreeEnabled(unit); !slices.Contains(on, "memory") || !slices.Contains(on, "pids") {
		t.Errorf("the unit's cgroup enables only %v for its children", on)
	}
	// Another process in the unit's cgroup: sealrund cannot make it an inner node.
	sleeper := exec.Command("sleep", "30")
	fd, _ := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err := sleeper.Start()
	syscall.Close(fd)
	if err != nil {
		// The unit's cgroup now hands controllers to its children: no process may join it. The
		// kernel refuses (EBUSY), which is the rule the refusal below is about.
		if !errors.Is(err, syscall.EBUSY) {
			t.Fatalf("start a second process in %s: %v", unit, err)
		}
		os.WriteFile(filepath.Join(dir, cgroupSubtreeCtl), []byte("-memory -pids -cpu -io -cpuset"), 0)
		fd, _ = syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		sleeper = exec.Command("sleep", "30")
		sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		err = sleeper.Start()
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if _, errText, _ := start(); !strings.Contains(errText, "holds other processes") || !strings.Contains(errText, strconv.Itoa(sleeper.Process.Pid)) {
		t.Errorf("a unit with another process: %q", errText)
	}
}

// The doctor on a systemd host: the daemon's unit not installed, installed without Delegate=yes,
// and delegated but not started, each with what to do. (The started, delegated unit is checked
// for real by make test-cgroup2's sealed run.)
func TestJudgePlacement(t *testing.T) {
	for _, tc := range []struct {
		facts  unitFacts
		status string
		detail string
	}{
		{unitFacts{LoadState: "not-found"}, "warn", "sealrund.service is not installed"},
		{unitFacts{LoadState: "loaded", Delegate: "no", ActiveState: "active", ControlGroup: "/system.slice/sealrund.service"}, "fail", "has Delegate=no"},
		{unitFacts{LoadState: "loaded", Delegate: "yes", ActiveState: "inactive"}, "ok", "once started its runs go to <its cgroup>/runs"},
	} {
		cs := judgePlacement(tc.facts)
		if len(cs) != 1 || cs[0].Status != tc.status || !strings.Contains(cs[0].Detail, tc.detail) || (tc.status != "ok" && cs[0].Fix == "") {
			t.Errorf("%+v: %+v", tc.facts, cs)
		}
	}
	if cs := judgePlacement(unitFacts{LoadState: "loaded", Delegate: "yes", ActiveState: "active", ControlGroup: "/no-such-cgroup-sealrun"}); cs[len(cs)-1].Status != "fail" {
		t.Errorf("an active unit whose cgroup is gone: %+v", cs)
	}
}
