package sandbox

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3"
	"github.com/sealrun/sealrun/sandbox/cgroup"
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
			t.Fatalf("placement on %s: %+v", cgroup.Mode(), p)
		}
		return
	}
	own, _ := cgroup.OwnV2()
	d := cgroup.NearestDelegated(own)
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
	leaf := filepath.Join(cgroup.Mountpoint, p.Root, "placed", c.ID, runtimeLeaf)
	procs, err := os.ReadFile(filepath.Join(leaf, "cgroup.procs"))
	if err != nil || len(strings.Fields(string(procs))) == 0 {
		t.Fatalf("the container's processes are not in %s: %q %v", leaf, procs, err)
	}
	for _, cg := range []string{p.Root, path.Join(p.Root, "placed"), path.Join(p.Root, "placed", c.ID)} {
		if on := cgroup.SubtreeEnabled(cg); !slices.Contains(on, "memory") || !slices.Contains(on, "pids") || !slices.Contains(on, "cpu") {
			t.Errorf("cgroup %s hands its children only %v", cg, on)
		}
	}
	if _, err := os.Stat(filepath.Join(cgroup.Mountpoint, DefaultCgroupRoot)); err == nil {
		t.Errorf("%s exists at the top of the hierarchy", DefaultCgroupRoot)
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
