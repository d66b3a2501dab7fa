package sandbox

import (
	"context"
	"os"
	"slices"
	"testing"

	runc "github.com/containerd/go-runc"

	"github.com/sealrun/sealrun/internal/testenv"
)

// A host gives the runner crun and keeps runc for the controller: each role's containers run
// under its own runtime (listed in that runtime's root only), the runner's posture holds under
// crun beside a runc controller, and the host lists and cleans up both.
func TestRoleRuntimes(t *testing.T) {
	requireRoot(t)
	crun := testenv.RequireTool(t, "crun", "crun")
	imgs := localImages(t)
	_, hook := buildBinaries(t)
	runDir := testenv.RunDir(t, ReapRunDir)
	h, err := NewHost(HostConfig{StateDir: t.TempDir(), RunDir: runDir, Hook: hook, Runtime: "runc", RoleRuntimes: map[Role]string{RoleRunner: crun}})
	if err != nil {
		t.Fatal(err)
	}
	trackRecords(h)
	t.Cleanup(func() { assertNoLeaks(t, h); os.RemoveAll(runDir) })
	if got := []string{h.RuntimeFor(RoleController).Kind, h.RuntimeFor(RoleRunner).Kind, h.RuntimeFor(RoleGrader).Kind}; !slices.Equal(got, []string{KindRunc, KindCrun, KindRunc}) {
		t.Fatalf("runtimes by role (controller, runner, grader): %v", got)
	}
	if n := len(h.Runtimes()); n != 2 {
		t.Errorf("the host drives %d runtimes; want 2", n)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "roles")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	ws := workspace(t, r)
	ids := map[Role]string{}
	for _, c := range []struct {
		role   Role
		rootfs string
	}{{RoleController, imgs.controller}, {RoleRunner, imgs.python}} {
		ctr, err := r.Start(ctx, ContainerConfig{Role: c.role, Rootfs: c.rootfs, Workspace: ws, Args: []string{"sleep", "60"}})
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		defer ctr.Destroy(ctx)
		ids[c.role] = ctr.ID
	}
	for role, id := range ids {
		for _, rt := range h.Runtimes() {
			cs, err := rt.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(cs, func(c *runc.Container) bool { return c.ID == id })
			if want := rt == h.RuntimeFor(role); listed != want {
				t.Errorf("the %s's container listed by %s: %v; want %v", role, rt.Kind, listed, want)
			}
		}
	}
	res, err := h.Probe(ctx, ProbeConfig{Role: RoleRunner, Rootfs: imgs.python, Runner: runnerBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.CapEff != "0000000000000000" || res.Seccomp != 2 || !res.NoNewPrivs || !res.ReadonlyRootfs || !res.EgressBlocked || !res.RootfsShifted {
		t.Errorf("the runner's posture under crun: problems %v, %+v", res.Problems, res)
	}
}
