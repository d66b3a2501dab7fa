package sandbox_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// The host's failures at a container's start, under every runtime sealrun drives and for each
// role: the runtime's run fails outright; the container's init is killed after the network hook
// ran and before the runtime executed the process (what a loaded host does to runc: "writing
// syncT procResume: broken pipe"); a hook hangs, so readiness never comes (bounded by the
// host's start time-out).
// Each is an InfraError saying the process never ran (sandbox.NeverRan), from Start or from
// Wait — never an exit status its caller would book as the command's own — and the container is
// gone (the host leak-checks at cleanup). The same container without a fault runs and says so.
func TestStartFaultsNeverRan(t *testing.T) {
	testenv.RequireRoot(t)
	onceForEveryRuntime(t)
	imgs := testenv.LocalImages(t)
	rootfs := imgs.Rootfs(t, "controller")
	runtimes := map[string]string{
		"runc":  testenv.RequireTool(t, "runc", "runc"),
		"crun":  testenv.RequireTool(t, "crun", "crun"),
		"runsc": testenv.RequireTool(t, "runsc", "gVisor's runsc (make deps builds it)"),
	}
	for _, rtName := range []string{"runc", "crun", "runsc"} {
		for _, role := range []sandbox.Role{sandbox.RoleController, sandbox.RoleRunner, sandbox.RoleGrader} {
			for _, fault := range []string{"run", "init", "hang"} {
				if rtName == "runsc" && role == sandbox.RoleController {
					continue // the controller never runs under gVisor (the sandbox refuses it)
				}
				t.Run(rtName+"/"+string(role)+"/"+fault, func(t *testing.T) {
					wrapper := sandboxtest.FaultyRuntime(t, runtimes[rtName], sandboxtest.Fault{Verb: fault, Role: role, Nth: 1})
					h := sandboxtest.HostWithConfig(t, sandbox.HostConfig{Runtime: runtimes["runc"], RoleRuntimes: map[sandbox.Role]string{role: wrapper},
						StartTimeout: 3 * time.Second, KillTimeout: 3 * time.Second})
					ctx := context.Background()
					r, err := h.NewRun(ctx, "fault-"+fault)
					if err != nil {
						t.Fatal(err)
					}
					defer r.Destroy(ctx)
					ws := t.TempDir()
					os.Chmod(ws, 0o777)
					cfg := sandbox.ContainerConfig{Role: role, Rootfs: rootfs, Workspace: ws, Args: []string{"/bin/sh", "-c", "echo ran"}}
					if role == sandbox.RoleGrader {
						cfg.Workspace, cfg.Bundle = "", ws // the grader sees the bundle, never the workspace
					}
					var out strings.Builder
					cfg.Stdout = &out
					c, err := r.Start(ctx, cfg)
					if err == nil {
						_, err = c.Wait(ctx)
						if derr := c.Destroy(ctx); derr != nil {
							t.Errorf("destroy: %v", derr)
						}
					}
					if rtName == "crun" && fault == "init" {
						// crun's starts are not marked (Runtime.marksStarts): its init failure
						// after the network hook reads as an exit status — never a clean one.
						if err == nil && strings.Contains(out.String(), "ran") {
							t.Fatalf("an init failure under crun read as a clean run: output %q", out.String())
						}
						t.Logf("crun, init killed after the network hook: %v (an exit status, not told from the process's)", err)
						return
					}
					if !sandbox.IsInfra(err) || !sandbox.NeverRan(err) {
						t.Fatalf("%s fault under %s: %v (output %q); want an InfraError saying the process never ran", fault, rtName, err, out.String())
					}
					if strings.Contains(out.String(), "ran") {
						t.Errorf("the process ran: %q", out.String())
					}
					t.Logf("%s: %v", fault, err)
					// Unfaulted (the fault was the first call's), the same container runs.
					out.Reset()
					c, err = r.Start(ctx, cfg)
					if err != nil {
						t.Fatal(err)
					}
					code, werr := c.Wait(ctx)
					ran := c.Ran()
					c.Destroy(ctx)
					if code != 0 || werr != nil || !ran || strings.TrimSpace(out.String()) != "ran" {
						t.Errorf("without the fault: exit %d, %v, ran %v, output %q", code, werr, ran, out.String())
					}
				})
			}
		}
	}
}

// A command that ran and failed is its own: a non-zero exit with no error, and Ran says it ran;
// one that is not there is a CommandError (the caller's), never an InfraError.
func TestRanAndFailedIsTheCommands(t *testing.T) {
	h := sandboxtest.Host(t)
	imgs := testenv.LocalImages(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "ranfail")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	ws := t.TempDir()
	os.Chmod(ws, 0o777)
	for _, tc := range []struct {
		args []string
		code int
		cmd  bool
	}{
		{[]string{"/bin/sh", "-c", "exit 3"}, 3, false},
		{[]string{"/bin/sh", "-c", "sleep 30 & kill -9 $!; wait $!"}, 137, false},
		{[]string{"/no/such/binary"}, -1, true},
	} {
		c, err := r.Start(ctx, sandbox.ContainerConfig{Role: sandbox.RoleController, Rootfs: imgs.Rootfs(t, "controller"), Workspace: ws, Args: tc.args})
		if err != nil {
			if tc.cmd {
				var ce *sandbox.CommandError
				if errors.As(err, &ce) {
					continue
				}
			}
			t.Fatalf("%v: %v", tc.args, err)
		}
		code, werr := c.Wait(ctx)
		ran := c.Ran()
		c.Destroy(ctx)
		var ce *sandbox.CommandError
		switch {
		case tc.cmd && (!errors.As(werr, &ce) || sandbox.IsInfra(werr)):
			t.Errorf("%v: %v; want a CommandError", tc.args, werr)
		case !tc.cmd && (werr != nil || code != tc.code || !ran):
			t.Errorf("%v: exit %d, %v, ran %v; want exit %d, no error, ran", tc.args, code, werr, ran, tc.code)
		}
	}
}

// onceForEveryRuntime: a test that drives runc, crun and gVisor itself runs in make test's default
// pass only, not again in its passes under crun and gVisor.
func onceForEveryRuntime(t *testing.T) {
	t.Helper()
	if testenv.Runtime() != "" || len(testenv.RoleRuntimes()) > 0 {
		t.Skip("it drives runc, crun and gVisor itself: run in the default pass")
	}
}
