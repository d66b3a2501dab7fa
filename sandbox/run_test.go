package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/testenv"
)

// The race a fresh machine found: a command that prints at once and the host side reading the
// init pid. Start returns with the pid known (the runtime's own state, given to the hook), so
// the host sees the container's namespaces every time.
func TestPidKnownWhenStartReturns(t *testing.T) {
	r, imgs := testRun(t, "pidrace")
	ctx := context.Background()
	ws := workspace(t, r)
	myUserns, _ := os.Readlink("/proc/self/ns/user")
	for i := 0; i < 20; i++ {
		var out lineWaiter
		out.init()
		c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: ws, Stdout: &out,
			Args: []string{"sh", "-c", "echo ready; sleep 30"}})
		if err != nil {
			t.Fatal(err)
		}
		<-out.got // the command has printed: it won any race there is
		pid := c.Pid()
		ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/user")
		if pid <= 0 || err != nil || ns == myUserns {
			t.Fatalf("round %d: pid %d, user namespace %q (%v); want the container's own", i, pid, ns, err)
		}
		if err := c.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The same through the probe, several times: namespaces, pids.max and the memory limit are read
// from the host while the posture process waits.
func TestProbeRepeatedlyReadsHostSide(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	for i := 0; i < 3; i++ {
		res, err := h.Probe(context.Background(), ProbeConfig{Role: RoleRunner, Rootfs: imgs.python, Runner: runnerBinary(t)})
		if err != nil {
			t.Fatal(err)
		}
		ns, pids := 7, "256"
		if res.Runtime == KindRunsc {
			ns = 6 // gVisor's sandbox process keeps the host's cgroup namespace (judge)
			pids = strconv.FormatInt(runscHostTasks(256), 10)
		}
		if len(res.Namespaces) != ns || res.Limits["pids"] != pids || res.LimitsInside["memory"] != strconv.Itoa(512<<20) || !res.OK {
			t.Fatalf("round %d: namespaces %v limits %v, inside %v, problems %v", i, res.Namespaces, res.Limits, res.LimitsInside, res.Problems)
		}
	}
}

type lineWaiter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	got  chan struct{}
	once sync.Once
}

func (l *lineWaiter) init() { l.got = make(chan struct{}) }

func (l *lineWaiter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if bytes.IndexByte(p, '\n') >= 0 {
		l.once.Do(func() { close(l.got) })
	}
	return len(p), nil
}

func (l *lineWaiter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A step of NewRun that fails after the UID range is taken (here: a file that is not sealrun's
// already sits where the gateway's network namespace goes) returns its error, and undoes what
// NewRun made: the range, the record. Before, the undo read the nil result and panicked,
// hiding the error (a fresh CI's TestReapRemovesNetnsHiddenByAMount).
func TestNewRunUndoesAFailedStep(t *testing.T) {
	h := testHost(t)
	id := "undonewrun"
	p := filepath.Join(h.cfg.NetnsDir, Prefix+id+"-gw")
	if err := os.MkdirAll(h.cfg.NetnsDir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("a stranger's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	r, err := h.NewRun(context.Background(), id)
	if r != nil || !errors.Is(err, ErrRunInUse) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "no network namespace mounted on it") || !strings.Contains(err.Error(), "remove the file") {
		t.Fatalf("NewRun = %v, %v; want ErrRunInUse naming %s, what it is and the fix", r, err, p)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "a stranger's\n" {
		t.Errorf("the stranger's file was touched: %q %v", b, err)
	}
	if _, err := os.Stat(h.runRecordDir(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the run's record is left: %v", err)
	}
	// assertNoLeaks (the host's cleanup) finds no UID range left either.
}

// A run id that is live — on this host, or on another sealrun's host on the same machine — is
// refused, and nothing of the live run is touched.
func TestNewRunRefusesLiveID(t *testing.T) {
	h := testHost(t)
	other := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "dup")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	for name, host := range map[string]*Host{"same host": h, "another host": other} {
		_, err := host.NewRun(ctx, "dup")
		if !errors.Is(err, ErrRunInUse) || !strings.Contains(err.Error(), "dup") || !strings.Contains(err.Error(), "choose another id") {
			t.Errorf("%s: NewRun of a live id = %v; want ErrRunInUse naming it and the fix", name, err)
		}
	}
	select {
	case <-c.Done():
		t.Fatal("the live run's container died")
	default:
	}
	if _, err := os.Stat(r.gateway); err != nil {
		t.Errorf("the live run's gateway netns is gone: %v", err)
	}
	if !r.cg.Exists() {
		t.Error("the live run's cgroup is gone")
	}
	// Another host's Reap leaves it alone, too.
	if reaped, err := other.Reap(ctx); err != nil || !reaped.Empty() {
		t.Errorf("another host reaped %+v, %v", reaped, err)
	}
	select {
	case <-c.Done():
		t.Fatal("another host's Reap killed the container")
	default:
	}
	if err := c.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	// Once gone, the id is free again.
	r2, err := other.NewRun(ctx, "dup")
	if err != nil {
		t.Fatalf("reuse after destroy: %v", err)
	}
	if err := r2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
}

// The grader speaks JSON lines on the container's stdin and stdout.
func TestStdinPipe(t *testing.T) {
	r, imgs := testRun(t, "stdin")
	ctx := context.Background()
	bundle := t.TempDir()
	os.Chmod(filepath.Dir(bundle), 0o711)
	os.Chmod(bundle, 0o755)
	var out lineWaiter
	out.init()
	c, err := r.Start(ctx, ContainerConfig{Role: RoleGrader, Rootfs: imgs.controller, Bundle: bundle, Stdin: true, Stdout: &out,
		Args: []string{"sh", "-c", `while read -r line; do echo "got $line"; done; echo eof`}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if c.Stdin() == nil {
		t.Fatal("no stdin pipe")
	}
	fmt.Fprintln(c.Stdin(), `{"q":1}`)
	select {
	case <-out.got: // answered before stdin closed: a live conversation
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the first line")
	}
	fmt.Fprintln(c.Stdin(), `{"q":2}`)
	c.Stdin().Close()
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v", code, err)
	}
	if got := out.String(); got != "got {\"q\":1}\ngot {\"q\":2}\neof\n" {
		t.Errorf("output %q", got)
	}
	// Without Stdin the container reads EOF at once.
	var out2 bytes.Buffer
	c2, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Stdout: &out2, Args: []string{"sh", "-c", "cat; echo eof"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Destroy(ctx)
	if code, err := c2.Wait(ctx); code != 0 || err != nil || out2.String() != "eof\n" || c2.Stdin() != nil {
		t.Errorf("no-stdin container: exit %d %v %q", code, err, out2.String())
	}
}

// Kill with a signal the command handles; freeze and thaw stop and resume it.
func TestKillSignalFreezeThaw(t *testing.T) {
	r, imgs := testRun(t, "signals")
	ctx := context.Background()
	ws := workspace(t, r)
	var out lineWaiter
	out.init()
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: ws, Stdout: &out,
		Args: []string{"sh", "-c", `trap 'echo term; exit 7' TERM; echo ready; n=0; while :; do n=$((n+1)); echo $n > count; sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	<-out.got
	count := func() int {
		b, _ := os.ReadFile(filepath.Join(ws, "count"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a write under way lands
	frozenAt := count()
	time.Sleep(400 * time.Millisecond)
	if n := count(); n != frozenAt {
		t.Errorf("counter moved while frozen: %d -> %d", frozenAt, n)
	}
	if err := c.Thaw(); err != nil {
		t.Fatal(err)
	}
	// Thawed, it moves again: polled, since on a loaded host the loop's next fork of sleep can
	// take longer than any fixed wait (a fresh CI saw 400 ms pass without a step).
	for deadline := time.Now().Add(20 * time.Second); count() <= frozenAt; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("counter did not move in 20 s after thaw: %d -> %d", frozenAt, count())
			break
		}
	}
	if err := c.Kill(ctx, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 7 || err != nil || !strings.Contains(out.String(), "term") {
		t.Errorf("after SIGTERM: exit %d %v %q; want 7 from the trap", code, err, out.String())
	}
}

// fakeRuntime is runc behind a script that misbehaves on one verb: hangs on kill, or keeps the
// foreground `run` from returning after the container is gone.
func fakeRuntime(t *testing.T, misbehave string) string {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "runc-"+misbehave)
	var body string
	switch misbehave {
	case "hang-kill":
		body = `for a in "$@"; do [ "$a" = kill ] && exec sleep 30; done; exec ` + runc + ` "$@"`
	case "hang-run":
		body = `for a in "$@"; do if [ "$a" = run ]; then ` + runc + ` "$@"; exec sleep 3; fi; done; exec ` + runc + ` "$@"`
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A runtime that hangs on kill does not hang Kill or Wait: the cgroup kill ends the container.
// A runtime whose foreground run does not return after the container died makes Wait an
// InfraError after KillTimeout, not a hang.
func TestBoundedWaitWithMisbehavingRuntime(t *testing.T) {
	requireRoot(t)
	imgs := localImages(t)
	_, hook := buildBinaries(t)
	ctx := context.Background()
	for _, mode := range []string{"hang-kill", "hang-run"} {
		t.Run(mode, func(t *testing.T) {
			runDir := testenv.RunDir(t, ReapRunDir)
			h, err := NewHost(HostConfig{StateDir: t.TempDir(), RunDir: runDir, Hook: hook, Runtime: fakeRuntime(t, mode), KillTimeout: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			trackRecords(h)
			t.Cleanup(func() { assertNoLeaks(t, h); os.RemoveAll(runDir) })
			r, err := h.NewRun(ctx, "bounded")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Destroy(ctx)
			c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "60"}})
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err = c.Wait(wctx)
			took := time.Since(start)
			switch mode {
			case "hang-kill":
				if !errors.Is(err, context.DeadlineExceeded) || took > 5*time.Second {
					t.Errorf("wait = %v after %v; want the deadline, within seconds", err, took)
				}
			case "hang-run":
				if !IsInfra(err) || !strings.Contains(err.Error(), "after SIGKILL") || took > 5*time.Second {
					t.Errorf("wait = %v after %v; want an InfraError after KillTimeout", err, took)
				}
				select { // the fake runtime's sleep ends; nothing is left
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Error("the runtime never returned")
				}
			}
			if err := c.Destroy(ctx); err != nil && mode == "hang-kill" {
				t.Error(err)
			}
		})
	}
}

// Limits{CPUs: 2} keeps every other default: pids.max, memory, the size of /tmp.
func TestPartialLimitsInContainer(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	// Read from inside by the runner client's posture, on whichever hierarchy the host has (v1:
	// memory.limit_in_bytes and friends; v2: memory.max, memory.swap.max, pids.max, cpu.max); a
	// limit whose file is missing reads "absent" and fails.
	// The I/O caps go on the block device of the filesystem the probe's workspace is on.
	var st syscall.Stat_t
	if err := syscall.Stat(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	res, err := h.Probe(ctx, ProbeConfig{Role: RoleRunner, Rootfs: imgs.controller, Runner: runnerBinary(t),
		Limits: Limits{CPUs: 2, CPUSet: "0,1", IOReadBPS: 64 << 20, IOWriteBPS: 32 << 20, IODevices: []string{dev}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory": strconv.Itoa(512 << 20), "swap": "0", "pids": "256", "cpu": "200000 100000", "cpuset": "0-1",
		"io": dev + " rbps=67108864 wbps=33554432"}
	if res.Runtime == KindRunsc {
		want["pids"] = strconv.FormatInt(runscHostTasks(256), 10) // gVisor's host tasks
	}
	for k, v := range want {
		if res.Runtime == KindRunsc && res.Limits[k] == v {
			continue // inside is gVisor's own cgroupfs (judge): the host's limits are what hold
		}
		if res.LimitsInside[k] != v || res.Limits[k] != v {
			t.Errorf("limit %s: inside %q, on the host %q; want %q", k, res.LimitsInside[k], res.Limits[k], v)
		}
	}
	if !res.OK {
		t.Errorf("probe problems: %v", res.Problems)
	}
	r, err := h.NewRun(ctx, "partial")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Limits: Limits{CPUs: 2}, Stdout: &out, Stderr: &out,
		Args: []string{"sh", "-c", "df -k /tmp | tail -1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if code, err := c.Wait(ctx); code != 0 || err != nil || !strings.Contains(out.String(), " 65536 ") {
		t.Fatalf("exit %d %v: /tmp is %q; want 64 MiB", code, err, out.String())
	}
	if _, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Limits: Limits{Pids: -1}, Args: []string{"true"}}); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "limits.pids") {
		t.Errorf("negative pids: %v", err)
	}
}

// The workspace quota: writes past it fail with ENOSPC inside; the host is untouched; Destroy
// unmounts it and the image keeps what was written.
func TestWorkspaceQuota(t *testing.T) {
	r, imgs := testRun(t, "quota")
	ctx := context.Background()
	parent := t.TempDir()
	os.Chmod(parent, 0o711)
	ws := filepath.Join(parent, "workspace")
	if err := r.PrepareWorkspace(ws, 4<<20); !errors.Is(err, ErrBadConfig) {
		t.Errorf("a 4 MiB quota: %v; want ErrBadConfig", err)
	}
	if err := r.PrepareWorkspace(ws, 16<<20); err != nil {
		t.Fatal(err)
	}
	if !isMountpoint(ws) {
		t.Fatal("the workspace is not a filesystem of its own")
	}
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: ws, Stdout: &out, Stderr: &out,
		Args: []string{"sh", "-c", "echo kept > small.txt; dd if=/dev/zero of=big bs=1M count=64 2>&1; echo dd=$?; ls -ld /workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s", code, err, out.String())
	}
	if !strings.Contains(out.String(), "No space left on device") || !strings.Contains(out.String(), "dd=1") {
		t.Errorf("writing 64 MiB into a 16 MiB workspace: %q; want ENOSPC", out.String())
	}
	c.Destroy(ctx)
	if err := r.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if isMountpoint(ws) {
		t.Error("the workspace is still mounted after Destroy")
	}
	if st, err := os.Stat(ws + ".img"); err != nil || st.Size() != 16<<20 {
		t.Errorf("workspace image: %v %v", st, err)
	}
}

// An idmap failure is an error unless the host allows unshifted rootfs.
func TestIdmapFailure(t *testing.T) {
	requireRoot(t)
	imgs := localImages(t)
	orig := shiftRootfs
	shiftRootfs = func(string, string, []specs.LinuxIDMapping, []specs.LinuxIDMapping) error {
		return errors.New("mount_setattr: invalid argument (the kernel or filesystem cannot idmap mounts)")
	}
	defer func() { shiftRootfs = orig }()
	ctx := context.Background()
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			_, hook := buildBinaries(t)
			h := newTestHost(t, hook)
			h.cfg.AllowUnshiftedRootfs = allow
			r, err := h.NewRun(ctx, "idmap")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Destroy(ctx)
			c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"true"}})
			if !allow {
				if !IsInfra(err) || !strings.Contains(err.Error(), "idmap") || !strings.Contains(err.Error(), "allow unshifted rootfs") {
					t.Errorf("start = %v; want an InfraError naming the idmap and the fix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Destroy(ctx)
			if code, err := c.Wait(ctx); code != 0 || err != nil || c.ShiftedRootfs {
				t.Errorf("unshifted start: %d %v shifted=%v", code, err, c.ShiftedRootfs)
			}
		})
	}
}

// Every byte a container writes reaches the caller, up to the last one written right before it
// exits, with several runs starting containers at once (issue 28: closing the pipes when the
// runtime returned lost whole outputs and the tails of long ones under load). The daemon-level
// check of the same, with the call log and the audit, is runner's TestNoOutputLost.
func TestOutputDrainedWhole(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	// 3 runs of 40 calls; 3 of 15 where the machine is slow (the cgroup v2 guest, emulated), which
	// still drains each output right before its exit, in runs side by side.
	runs, perRun := 3, 40
	if testenv.Slow() > 1 {
		perRun = 15
	}
	var seq bytes.Buffer
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	lost := 0
	for ri := 0; ri < runs; ri++ {
		wg.Add(1)
		go func(ri int) {
			defer wg.Done()
			r, err := h.NewRun(ctx, fmt.Sprintf("drain%d", ri))
			if err != nil {
				t.Error(err)
				return
			}
			defer r.Destroy(ctx)
			ws := workspace(t, r)
			for i := 0; i < perRun; i++ {
				var out, errb bytes.Buffer
				short := fmt.Sprintf("run %d call %d\n", ri, i)
				script := fmt.Sprintf("printf '%s'; echo err >&2", short)
				want := short
				if i%2 == 1 {
					script = fmt.Sprintf("printf '%s'; seq 1 20000", short) // the last bytes right before the exit
					want = short + seq.String()
				}
				c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: ws, Args: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errb})
				if err != nil {
					t.Error(err)
					return
				}
				code, err := c.Wait(ctx)
				c.Destroy(ctx)
				if err != nil || code != 0 {
					t.Errorf("run %d call %d: exit %d %v", ri, i, code, err)
				}
				if got := out.String(); got != want || (i%2 == 0 && errb.String() != "err\n") {
					mu.Lock()
					lost++
					mu.Unlock()
					t.Errorf("run %d call %d: got %d bytes of stdout (want %d), stderr %q", ri, i, len(got), len(want), errb.String())
				}
			}
		}(ri)
	}
	wg.Wait()
	t.Logf("%d containers, %d outputs short", runs*perRun, lost)
}
