package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// stress starts Debian's stress-ng beside the test — CPU, memory, fork and disk stressors, each
// at 2x the cores — until the test ends.
func stress(t testing.TB) {
	t.Helper()
	bin := testenv.RequireTool(t, "stress-ng", "stress-ng")
	n := strconv.Itoa(2 * runtime.NumCPU())
	cmd := exec.Command(bin, "--cpu", n, "--vm", n, "--vm-bytes", "64M", "--fork", n, "--hdd", n, "--hdd-bytes", "32M",
		"--temp-path", t.TempDir(), "--timeout", "1h", "--quiet")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	time.Sleep(time.Second) // the load is on before the first start
}

// startsUnderLoad starts n containers of each role under each runtime beside the load, one at a
// time, each running a command that says it ran, and returns the start latencies (launch to
// readiness) and every failure.
func startsUnderLoad(t testing.TB, n int) (lat []time.Duration, failures []string) {
	imgs := testenv.LocalImages(t)
	rootfs := imgs.Rootfs(t, "controller")
	runtimes := map[string]string{
		"runc":  testenv.RequireTool(t, "runc", "runc"),
		"crun":  testenv.RequireTool(t, "crun", "crun"),
		"runsc": testenv.RequireTool(t, "runsc", "gVisor's runsc (make deps builds it)"),
	}
	ctx := context.Background()
	names := []string{"runc", "crun", "runsc"}
	if v := os.Getenv("SEALRUN_LOAD_RUNTIMES"); v != "" {
		names = strings.Split(v, ",") // one or some of them, to look into one
	}
	for _, rtName := range names {
		// gVisor runs the runner and grader only (the sandbox refuses it the controller).
		roles := map[sandbox.Role]string{sandbox.RoleController: runtimes[rtName], sandbox.RoleRunner: runtimes[rtName], sandbox.RoleGrader: runtimes[rtName]}
		if rtName == "runsc" {
			roles[sandbox.RoleController] = runtimes["runc"]
		}
		h := sandboxtest.HostWithConfig(t, sandbox.HostConfig{Runtime: runtimes["runc"], RoleRuntimes: roles})
		r, err := h.NewRun(ctx, "load-"+rtName)
		if err != nil {
			t.Fatal(err)
		}
		ws := t.TempDir()
		os.Chmod(ws, 0o777)
		for _, role := range []sandbox.Role{sandbox.RoleController, sandbox.RoleRunner, sandbox.RoleGrader} {
			if rtName == "runsc" && role == sandbox.RoleController {
				continue
			}
			for i := range n {
				var out, errb strings.Builder
				cfg := sandbox.ContainerConfig{Role: role, Rootfs: rootfs, Workspace: ws, Args: []string{"/bin/sh", "-c", "echo ran"}, Stdout: &out, Stderr: &errb}
				if role == sandbox.RoleGrader {
					cfg.Workspace, cfg.Bundle = "", ws
				}
				t0 := time.Now()
				c, err := r.Start(ctx, cfg)
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s %s #%d start: %v", rtName, role, i+1, err))
					continue
				}
				lat = append(lat, time.Since(t0))
				if n >= 100 && (i+1)%100 == 0 { // make soak's size: say how far it is
					t.Logf("%s %s: %d of %d started, %d failures so far", rtName, role, i+1, n, len(failures))
				}
				code, werr := c.Wait(ctx)
				ran := c.Ran()
				if derr := c.Destroy(ctx); derr != nil {
					failures = append(failures, fmt.Sprintf("%s %s #%d destroy: %v", rtName, role, i+1, derr))
				}
				if werr != nil || code != 0 || !ran || out.String() != "ran\n" {
					failures = append(failures, fmt.Sprintf("%s %s #%d: exit %d, %v, ran %v, output %q, stderr %q", rtName, role, i+1, code, werr, ran, out.String(), errb.String()))
				}
			}
		}
		if err := r.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return lat, failures
}

func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// Container starts hold beside a loaded host: every start of every role under runc, crun and
// gVisor, with stress-ng's CPU, memory, fork and disk stressors at 2x the cores, runs its process
// (the poststart marker says so) and exits 0 — no start failure at all. make test starts 8 of
// each (SEALRUN_LOAD_STARTS sets it); make soak 1,000.
func TestStartsUnderLoad(t *testing.T) {
	testenv.RequireRoot(t)
	onceForEveryRuntime(t)
	n := 8
	if v, err := strconv.Atoi(os.Getenv("SEALRUN_LOAD_STARTS")); err == nil && v > 0 {
		n = v
	}
	stress(t)
	lat, failures := startsUnderLoad(t, n)
	t.Logf("%d starts under load: p50 %s, p99 %s, max %s; %d failures", len(lat), percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat, 1), len(failures))
	for _, f := range failures {
		t.Error(f)
	}
}

// BenchmarkStartsUnderLoad: start failures per 1,000 starts and the p99 start latency beside
// stress-ng, every role under runc, crun and gVisor (target: 0 failures).
func BenchmarkStartsUnderLoad(b *testing.B) {
	testenv.RequireRoot(b)
	stress(b)
	var lat []time.Duration
	var failures []string
	for range b.N {
		l, f := startsUnderLoad(b, 20)
		lat, failures = append(lat, l...), append(failures, f...)
	}
	total := len(lat) + len(failures)
	b.ReportMetric(1000*float64(len(failures))/float64(max(1, total)), "failures/1000")
	b.ReportMetric(float64(percentile(lat, 0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(float64(percentile(lat, 0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(total), "starts")
	for _, f := range failures {
		b.Log(f)
	}
}
