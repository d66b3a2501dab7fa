package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// Every role's posture from inside and from the host: own namespaces, unprivileged mapping, no
// capabilities, seccomp, read-only rootfs, masked paths, limits, device rules, no host fds, no
// LD_*/proxy variables, lo only (controller: lo + the /30), and no way to the host's loopback or
// 0.0.0.0 listeners through any of its addresses — the controller reaching only its gateway.
func TestProbeEveryRole(t *testing.T) {
	h := testHost(t)
	if h.relayPath == "" || h.relayName == "" {
		t.Fatalf("the host does not use the hook's relay built beside the hook (%s)", h.hookPath)
	}
	imgs := localImages(t)
	for _, tc := range []struct {
		role   Role
		rootfs string
	}{{RoleController, imgs.controller}, {RoleRunner, imgs.python}, {RoleGrader, imgs.python}} {
		t.Run(string(tc.role), func(t *testing.T) {
			res, err := h.Probe(context.Background(), ProbeConfig{Role: tc.role, Rootfs: tc.rootfs, Runner: runnerBinary(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK {
				t.Fatalf("problems: %v", res.Problems)
			}
			if !res.RootfsShifted || res.RootfsOwner != 0 {
				t.Errorf("rootfs not shifted: shifted %v, / owned by %d inside", res.RootfsShifted, res.RootfsOwner)
			}
			if res.CapEff != "0000000000000000" || res.Seccomp != 2 || !res.NoNewPrivs || !res.ReadonlyRootfs || !res.MaskedPathsOK || !res.EgressBlocked {
				t.Errorf("posture %+v", res)
			}
			if strings.HasPrefix(res.UIDMap, "0 0 ") || !strings.Contains(res.Masked["/proc/kcore"], "no such file") && res.Masked["/proc/kcore"] != "empty" {
				t.Errorf("uid_map %q, kcore %q", res.UIDMap, res.Masked["/proc/kcore"])
			}
			wantLinks := "lo (device, up)"
			if tc.role == RoleController {
				wantLinks = "eth0 (veth, up),lo (device, up)"
			}
			if strings.Join(res.Links, ",") != wantLinks {
				t.Errorf("links %v", res.Links)
			}
			reachedGateway := false
			for _, e := range res.Egress {
				if e.Connected && !e.Allowed {
					t.Errorf("reached %s", e.Target)
				}
				reachedGateway = reachedGateway || e.Connected && e.Allowed
			}
			if reachedGateway != (tc.role == RoleController) {
				t.Errorf("gateway reached = %v", reachedGateway)
			}
			if len(res.Egress) < 3 {
				t.Errorf("too few egress attempts: %v", res.Egress)
			}
		})
	}
}

// This test runs the network hook through the fallback (the test binary re-executed), the path
// sealrun takes when no sealrun-netns-hook binary is installed next to it.
func TestRunCommandOutputAndExitCode(t *testing.T) {
	requireRoot(t)
	h := newTestHost(t, "")
	if h.hookArgv0 != HookArg {
		t.Fatalf("fallback hook not used: %s %s", h.hookPath, h.hookArgv0)
	}
	imgs := localImages(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Destroy(ctx); err != nil {
			t.Error(err)
		}
	}()
	var out, errb bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: workspace(t, r),
		Args: []string{"python3", "-c", "import os,sys; print(os.getcwd(), os.getuid()); print('oops', file=sys.stderr); sys.exit(3)"}, Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	code, err := c.Wait(ctx)
	if err != nil || code != 3 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if out.String() != "/workspace 1000\n" || errb.String() != "oops\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
	c.Destroy(ctx)
}

// The controller and a runner have different UID ranges but share /workspace through the run's GID.
func TestWorkspaceShared(t *testing.T) {
	r, imgs := testRun(t, "share")
	ctx := context.Background()
	ws := workspace(t, r)
	run := func(role Role, rootfs string, script ...string) string {
		var out bytes.Buffer
		c, err := r.Start(ctx, ContainerConfig{Role: role, Rootfs: rootfs, Workspace: ws, Args: script, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Destroy(ctx)
		if code, err := c.Wait(ctx); code != 0 || err != nil {
			t.Fatalf("%s: exit %d %v: %s", role, code, err, out.String())
		}
		return out.String()
	}
	run(RoleController, imgs.controller, "sh", "-c", "mkdir -p src && echo from-controller > src/notes.txt")
	run(RoleRunner, imgs.python, "sh", "-c", "echo from-runner >> src/notes.txt && mkdir out && touch out/model.bin")
	got := run(RoleController, imgs.controller, "sh", "-c", "cat src/notes.txt && ls out")
	if got != "from-controller\nfrom-runner\nmodel.bin\n" {
		t.Errorf("shared workspace: %q", got)
	}
}

func TestForkBombStoppedByPidsLimit(t *testing.T) {
	r, imgs := testRun(t, "forkbomb")
	ctx := context.Background()
	limits := DefaultLimits()
	limits.Pids = 32
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: workspace(t, r), Limits: limits, Stdout: &out, Stderr: &out,
		Args: []string{"python3", "-c", testenv.ForkBombPython}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	code, err := c.Wait(wctx)
	if c.rt.Kind == KindRunsc {
		// gVisor fails the fork (ENOMEM) when it cannot make the stub process a new process
		// needs, and its whole sandbox ends when it cannot make a thread it needs: either way
		// the host's count of its tasks never passes sealrun's limit on its cgroup.
		switch {
		case err == nil && code != 0 && c.PidsLimitEnded():
			t.Logf("under gVisor: the sandbox ended at the limit (exit %d)", code)
		case err == nil && code == 0 && !c.PidsLimitEnded() && strings.Contains(out.String(), "stopped after"):
			t.Logf("under gVisor: %s", strings.TrimSpace(out.String()))
		default:
			t.Fatalf("under gVisor: exit %d %v, PidsLimitEnded %v; want a fork refused or the container ended at its pids limit: %s", code, err, c.PidsLimitEnded(), out.String())
		}
		if got, want := strings.TrimSpace(readFile(t, c.pidsCgroup().PidsFile("pids.max"))), fmt.Sprint(runscHostTasks(32)); got != want {
			t.Errorf("pids.max on the container's cgroup %q, want %s", got, want)
		}
		if err := c.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
		c2, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := c2.Wait(ctx); code != 0 || err != nil || c2.PidsLimitEnded() {
			t.Errorf("after the fork bomb: %d %v (PidsLimitEnded %v)", code, err, c2.PidsLimitEnded())
		}
		c2.Destroy(ctx)
		return
	}
	if code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s", code, err, out.String())
	}
	if c.PidsLimitEnded() {
		t.Error("PidsLimitEnded under runc, whose container goes on at the limit")
	}
	var n int
	if _, err := fmt.Sscanf(out.String(), "stopped after %d forks", &n); err != nil || n >= 32 || !strings.Contains(out.String(), "Resource temporarily unavailable") {
		t.Errorf("fork bomb not stopped by pids.max 32: %q", out.String())
	}
	if err := c.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}

// A command that exits on its own is not taken for an OOM kill once the runtime has removed its
// cgroup (on v1 the OOM eventfd fires then too); under gVisor sealrun keeps the leaf in the pids
// hierarchy after gVisor removed the memory one.
func TestExitIsNotOOM(t *testing.T) {
	r, imgs := testRun(t, "notoom")
	ctx := context.Background()
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sh", "-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if code, err := c.Wait(ctx); code != 3 || err != nil {
		t.Fatalf("exit %d %v; want 3", code, err)
	}
	if !cgroup.Unified() {
		mem := filepath.Join("/sys/fs/cgroup/memory", c.leaf.Path)
		for i := 0; i < 100; i++ {
			if _, err := os.Stat(mem); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // the watcher has read the removal's event
	}
	if c.OOMKilled() {
		t.Error("a command that exited 3 is reported OOM-killed")
	}
}

func TestMemoryBombOOMKilled(t *testing.T) {
	r, imgs := testRun(t, "membomb")
	ctx := context.Background()
	limits := DefaultLimits()
	limits.MemoryBytes = 96 << 20
	oomLog := openOOMLog(t)
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: workspace(t, r), Limits: limits, Stdout: &out, Stderr: &out,
		Args: []string{"python3", "-c", "b = []\nwhile True: b.append(bytearray(8 << 20))"}})
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	code, err := c.Wait(waitCtx)
	if err != nil {
		t.Fatal(err)
	}
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d, want %d (OOM-killed): %s", code, 128+int(syscall.SIGKILL), out.String())
	}
	// The kernel's OOM killer acted inside the container's cgroup (counted there), not on the host.
	st, err := c.Stats()
	if err != nil || st.OOMKills == 0 || !c.OOMKilled() {
		t.Errorf("cgroup stats after the OOM: %+v %v; want oom kills counted", st, err)
	}
	// Each kill the kernel logged meanwhile was bounded by a memory cgroup (other tests' containers
	// may be OOM-killed beside this one), and this container's kills were in its own cgroup.
	ours, recs := 0, oomLog.kills(t)
	leaf := "/" + strings.Trim(c.leaf.Path, "/")
	for _, rec := range recs {
		if oomField(rec, "constraint") != "CONSTRAINT_MEMCG" {
			t.Errorf("the kernel's OOM killer acted on the host, not inside a memory cgroup: %s", rec)
		}
		if strings.HasSuffix(oomField(rec, "task_memcg"), leaf) {
			if !strings.HasSuffix(oomField(rec, "oom_memcg"), leaf) {
				t.Errorf("the container's process was killed for a limit outside its cgroup: %s", rec)
			}
			ours++
		}
	}
	if uint64(ours) != st.OOMKills {
		t.Errorf("the kernel logged %d OOM kills in the container's cgroup %s, its memory.events counted %d; the records: %q", ours, leaf, st.OOMKills, recs)
	}
	// The run goes on: a new container starts and works.
	c2, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c2.Wait(ctx); code != 0 || err != nil {
		t.Errorf("after the OOM: %d %v", code, err)
	}
	c.Destroy(ctx)
	c2.Destroy(ctx)
}

func TestCancelKillsContainer(t *testing.T) {
	r, imgs := testRun(t, "cancel")
	ctx := context.Background()
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sh", "-c", "sleep 600 & sleep 600"}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.Wait(wctx)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("wait = %v after %v", err, time.Since(start))
	}
	c.Destroy(ctx)
}

// A failed start (no mount point in the image, a command that does not exist) names the cause
// and leaves nothing behind.
func TestStartFailures(t *testing.T) {
	r, imgs := testRun(t, "fail")
	ctx := context.Background()
	bare := t.TempDir()
	os.Chmod(filepath.Dir(bare), 0o711)
	for _, d := range []string{"bin", "proc", "sys", "dev", "tmp"} {
		os.Mkdir(filepath.Join(bare, d), 0o755)
	}
	tests := []struct {
		name string
		cfg  ContainerConfig
		want string
	}{
		{"a mount whose source is missing", ContainerConfig{Role: RoleRunner, Rootfs: bare, Workspace: workspace(t, r), Args: []string{"/bin/true"},
			Extra: []specs.Mount{{Destination: "/data", Type: "bind", Source: "/no/such/sealrun-source"}}}, "the source of the mount at /data"},
		{"relative rootfs", ContainerConfig{Role: RoleRunner, Rootfs: "rootfs", Workspace: workspace(t, r), Args: []string{"true"}}, "must be an absolute path"},
		{"LD_PRELOAD", ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"true"}, Env: []string{"LD_PRELOAD=/x.so"}}, "no LD_* variables"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Start(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "sealrun-fail-runner-") {
				t.Errorf("error does not name the container: %v", err)
			}
			if !errors.Is(err, ErrBadConfig) || IsInfra(err) {
				t.Errorf("a configuration that can never start is ErrBadConfig, not infrastructure: %v", err)
			}
		})
	}
	if n := len(r.live); n != 0 {
		t.Errorf("%d containers still recorded after failed starts", n)
	}
	// A command that does not exist fails inside the runtime's init, after the start: Wait says so.
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"/no/such/binary"}})
	if err != nil {
		t.Fatal(err)
	}
	var ce *CommandError
	if _, err := c.Wait(ctx); !errors.As(err, &ce) || !strings.Contains(err.Error(), "/no/such/binary") || !strings.Contains(err.Error(), c.ID) || IsInfra(err) {
		t.Errorf("wait = %v; want a CommandError naming the container and the command", err)
	}
	c.Destroy(ctx)
}

// Reap removes what a crashed sealrun left: a running container, its cgroups, the gateway netns
// and the UID ranges.
func TestReapAfterCrash(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	// The daemon "dies" here: nothing is destroyed. A new daemon reaps.
	reaped, err := h.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped.Containers) != 1 || len(reaped.Runs) != 1 || len(reaped.Ranges) != 1 || len(reaped.Bundles) != 1 {
		t.Errorf("reaped %+v; want 1 container, 1 run (its range goes with it), 1 container range, 1 bundle", reaped)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Error("the container still runs after Reap")
	}
}

// A daemon killed between freezing a container's cgroup and thawing it leaves the container
// frozen of its own; a later Reap still kills it and removes its cgroup.
func TestReapKillsFrozenContainer(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "frozen")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: localImages(t).controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	// Frozen once the runtime's init has become the command: frozen mid-exec, the kernel never
	// finishes the freeze (Freeze gives up after freezeTimeout; KillAll kills all the same).
	for i := 0; i < 200; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Pid())); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.cg.Freeze(); err != nil {
		t.Fatal(err)
	}
	// The daemon dies here; a new one reaps.
	if _, err := h.Reap(ctx); err != nil {
		t.Fatalf("reap a run with a frozen container: %v", err)
	}
	assertNoLeaks(t, h)
}

// A freeze at any moment of a container's start ends, frozen or not (the kernel never finishes
// freezing a task frozen mid-exec: Freeze gives up after freezeTimeout), and the container is
// destroyed all the same.
func TestFreezeAtStartIsBounded(t *testing.T) {
	r, imgs := testRun(t, "freezestart")
	ctx := context.Background()
	stuck := 0
	for i := 0; i < 8; i++ {
		c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if err := c.cg.Freeze(); err != nil {
			stuck++
			t.Logf("start %d: %v", i, err)
		}
		if d := time.Since(t0); d > cgroup.FreezeTimeout+time.Second {
			t.Errorf("start %d: the freeze took %s", i, d)
		}
		if err := c.Destroy(ctx); err != nil {
			t.Errorf("start %d: destroy a frozen container: %v", i, err)
		}
	}
	t.Logf("%d of 8 freezes could not complete", stuck)
}

// A test process killed mid-run (a timeout, a cancelled CI job) never runs its cleanups. The
// next test process's testenv.RunDir reaps what it left — here a live container, its run's
// cgroups and gateway netns — so the same run id is free again (a CI run once failed on
// "cgroup /sealrun/run-opencode already exists" after an earlier run was killed).
func TestRunDirReapsKilledTestProcess(t *testing.T) {
	requireRoot(t)
	imgs := localImages(t)
	ctx := context.Background()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale, err := os.MkdirTemp("/run", fmt.Sprintf("sealrun-test-%d-", gone.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(stale)
	_, hook := buildBinaries(t)
	h, err := NewHost(HostConfig{StateDir: t.TempDir(), RunDir: stale, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.NewRun(ctx, "killed-test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	netns := r.gateway
	// The process that made it is "gone" (its pid names the directory); the next one reaps.
	h2 := testHost(t)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead test process's run directory %s is still there (%v)", stale, err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Error("its container still runs")
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Errorf("its gateway netns %s is still there", netns)
	}
	r2, err := h2.NewRun(ctx, "killed-test")
	if err != nil {
		t.Fatalf("the same run id after the reap: %v", err)
	}
	r2.Destroy(ctx)
}

func TestGatewayListenerReachableOnlyFromController(t *testing.T) {
	r, imgs := testRun(t, "gw")
	ctx := context.Background()
	l, err := ListenGateway(ctx, r.GatewayNetns(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			conn.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhello from the gateway\n"))
			conn.Close()
		}
	}()
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Stdout: &out, Stderr: &out,
		Args: []string{"sh", "-c", "echo | nc -w 3 10.88.0.1 8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil || !strings.Contains(out.String(), "hello from the gateway") {
		t.Errorf("controller to gateway: exit %d %v %q", code, err, out.String())
	}
	c.Destroy(ctx)
	out.Reset()
	c, err = r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Stdout: &out, Stderr: &out,
		Args: []string{"sh", "-c", "echo | nc -w 3 10.88.0.1 8080"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := c.Wait(ctx); code == 0 || strings.Contains(out.String(), "hello") {
		t.Errorf("a runner reached the gateway: %q", out.String())
	}
	c.Destroy(ctx)
}

// oomLog follows the kernel's log from the moment it is opened: the OOM killer writes one
// "oom-kill:" record per kill naming its constraint and the memory cgroup it acted in. A count on
// the whole machine (/proc/vmstat) cannot tell this container's kill from one in another
// package's test running beside it; the records can.
type oomLog struct{ fd int }

func openOOMLog(t *testing.T) *oomLog {
	t.Helper()
	// The raw descriptor, not an *os.File: Go's poller would wait on an empty log, not return.
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("the kernel log (/dev/kmsg), to see where the OOM killer acted: %v", err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if _, err := syscall.Seek(fd, 0, io.SeekEnd); err != nil {
		t.Fatalf("/dev/kmsg: seeking to its end: %v", err)
	}
	return &oomLog{fd}
}

// oomField is one "key=value" of an "oom-kill:" record.
func oomField(rec, key string) string {
	for _, kv := range strings.Split(strings.TrimPrefix(rec, "oom-kill:"), ",") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// kills returns the "oom-kill:" records written since the log was opened (or last read).
func (l *oomLog) kills(t *testing.T) []string {
	t.Helper()
	var out []string
	buf := make([]byte, 8192)
	for {
		n, err := syscall.Read(l.fd, buf)
		if err == syscall.EPIPE || err == syscall.EINTR {
			continue // records were overwritten before we read them; the next read goes on
		}
		if err == syscall.EAGAIN || (err == nil && n <= 0) {
			return out // no more records
		}
		if err != nil {
			t.Fatalf("/dev/kmsg: %v", err)
		}
		_, msg, _ := strings.Cut(string(buf[:n]), ";")
		msg, _, _ = strings.Cut(msg, "\n")
		if strings.HasPrefix(msg, "oom-kill:") {
			out = append(out, msg)
		}
	}
}
