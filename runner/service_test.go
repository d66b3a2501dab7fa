package runner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// fakeClock is a budget clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// fixture is one run's service on a real sandbox, served on a real socket, driven by the real
// static client.
type fixture struct {
	t      testing.TB
	svc    *Service
	sock   string
	client string
	ws     string
	calls  string
	log    *audit.Log
	clock  *fakeClock
	rc     *policy.RunClock
	run    *sandbox.Run
	host   *sandbox.Host
	// stop ends Serve (its context cancelled) and waits until it has returned.
	stop func()
}

var budget = policy.Budget{Wall: time.Hour, CallLimit: 20 * time.Minute, Reserve: 5 * time.Minute}

func newFixture(t testing.TB, opts ...Option) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, opts...)
}

// newFixtureWith is newFixture with edit applied to the service's Config first.
func newFixtureWith(t testing.TB, edit func(*Config), opts ...Option) *fixture {
	t.Helper()
	return newFixtureOn(t, sandboxtest.Host(t), edit, opts...)
}

// newFixtureOn is newFixtureWith on the host h.
func newFixtureOn(t testing.TB, h *sandbox.Host, edit func(*Config), opts ...Option) *fixture {
	t.Helper()
	imgs := sandboxtest.LocalImages(t)
	ctx := context.Background()
	var rb [4]byte
	rand(rb[:])
	r, err := h.NewRun(ctx, "rt-"+hex.EncodeToString(rb[:]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	f := &fixture{t: t, host: h, run: r, ws: sandboxtest.Workspace(t, r), client: sandboxtest.Static(t, "cmd/runner")}
	f.clock = &fakeClock{t: time.Now()}
	f.rc = budget.Start(f.clock.now)
	dir := t.TempDir()
	f.calls = filepath.Join(dir, "calls")
	if f.log, err = audit.Open(filepath.Join(dir, "audit.jsonl")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.log.Close() })
	cfg := Config{Clock: f.rc, Image: imgs.Python, Workspace: f.ws, Shim: f.client, Audit: f.log, CallsDir: f.calls}
	if edit != nil {
		edit(&cfg)
	}
	if f.svc, err = NewService(r, cfg, opts...); err != nil {
		t.Fatal(err)
	}
	f.sock = filepath.Join(dir, "agent.sock")
	l, err := Listen(f.sock, int(r.SharedGID()))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { f.svc.Serve(sctx, l); close(done) }()
	f.stop = func() { cancel(); <-done }
	t.Cleanup(func() { f.stop(); f.svc.Close() })
	return f
}

func rand(b []byte) {
	f, _ := os.Open("/dev/urandom")
	io.ReadFull(f, b)
	f.Close()
}

type result struct {
	code           int
	stdout, stderr string
}

// runner runs the real client against the socket.
func (f *fixture) runner(args ...string) result {
	f.t.Helper()
	cmd := exec.Command(f.client, args...)
	cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock, "PATH=/usr/bin:/bin"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// post sends a raw request over the socket.
func (f *fixture) post(path, body string) (int, string) {
	f.t.Helper()
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", f.sock)
	}}}
	resp, err := c.Post("http://sealrun"+path, "application/json", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *fixture) entries() []audit.Call {
	f.t.Helper()
	data, err := os.ReadFile(f.log.Path())
	if err != nil {
		f.t.Fatal(err)
	}
	var out []audit.Call
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Call
		if err := json.Unmarshal(line, &r); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Calls start through the C shim beside the runner binary, or through the runner binary itself
// where the shim is not installed: the same statuses and output either way.
func TestExitStatusesAndOutput(t *testing.T) {
	t.Run(ExecShim, func(t *testing.T) {
		f := newFixture(t)
		if filepath.Base(f.svc.o.shim) != ExecShim {
			t.Fatalf("calls start through %s, not the %s built beside the runner binary", f.svc.o.shim, ExecShim)
		}
		exitStatusesAndOutput(t, f)
	})
	t.Run("runner _exec", func(t *testing.T) {
		alone := filepath.Join(t.TempDir(), "runner")
		b, err := os.ReadFile(sandboxtest.Static(t, "cmd/runner"))
		if err == nil {
			err = os.WriteFile(alone, b, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		f := newFixtureWith(t, func(c *Config) { c.Shim = alone })
		if f.svc.o.shim != alone {
			t.Fatalf("calls start through %s, want the runner binary %s", f.svc.o.shim, alone)
		}
		exitStatusesAndOutput(t, f)
	})
}

func exitStatusesAndOutput(t *testing.T, f *fixture) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"true"}, 0, "", "[time left 1h00m00s]\n"},
		{[]string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 3, "out\nerr\n", "[time left"},
		{[]string{"sh", "-c", `sh -c 'kill -9 $$'`}, 137, "Killed\n", ""}, // a child: pid 1 cannot be killed from inside
		{[]string{"python3", "-c", "import sys; print('py', sys.argv[1])", "arg with spaces"}, 0, "py arg with spaces\n", ""},
		{[]string{"/no/such/command"}, 127, "runner: /no/such/command: no such file or directory\n", ""},
		{[]string{"no-such-command"}, 127, "runner: no-such-command: command not found\n", ""},
	} {
		r := f.runner(tc.args...)
		if r.code != tc.code || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) || !strings.HasPrefix(r.stderr, "[time left ") {
			t.Errorf("runner %v: exit %d stdout %q stderr %q; want %d %q ~%q", tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
	// stdout and stderr keep their order (one pipe inside the container).
	r := f.runner("sh", "-c", "for i in 1 2 3; do echo o$i; echo e$i >&2; done")
	if r.stdout != "o1\ne1\no2\ne2\no3\ne3\n" {
		t.Errorf("interleaving: %q", r.stdout)
	}
	// The audit chain recomputes from the file, and every call is in it, in order.
	entries := f.entries()
	if len(entries) != 7 {
		t.Fatalf("%d audit entries, want 7", len(entries))
	}
	for i, e := range entries {
		if e.Call != i+1 || e.Container == "" || e.OutputSHA256 == "" || e.Start.IsZero() || e.End.Before(e.Start) {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if entries[1].Exit != 3 || entries[1].OutputBytes != 8 || entries[1].Status != "exited" {
		t.Errorf("entry 2: %+v", entries[1])
	}
	sum := sha256.Sum256([]byte("out\nerr\n"))
	if string(entries[1].OutputSHA256) != hex.EncodeToString(sum[:]) {
		t.Errorf("output sha256 %s", entries[1].OutputSHA256)
	}
	fh, _ := os.Open(f.log.Path())
	head, n, err := audit.Head(fh)
	fh.Close()
	wantHead, wantN := f.log.Head()
	if err != nil || head != wantHead || n != wantN {
		t.Errorf("audit chain: %s %d %v; log says %s %d", head, n, err, wantHead, wantN)
	}
	if b, _ := os.ReadFile(filepath.Join(f.calls, "2.log")); string(b) != "out\nerr\n" {
		t.Errorf("calls/2.log = %q", b)
	}
}

// Output arrives while the call runs, line by line.
func TestOutputStreamsLive(t *testing.T) {
	f := newFixture(t)
	cmd := exec.Command(f.client, "sh", "-c", "echo one; sleep 1.5; echo two")
	cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var times []time.Time
	for sc.Scan() {
		times = append(times, time.Now())
	}
	cmd.Wait()
	if len(times) != 2 || times[1].Sub(times[0]) < time.Second {
		t.Errorf("lines at %v; want the first a second and more before the second", times)
	}
}

// The limit is min(call limit, time until the reserve window): near the window it shrinks, the
// call is killed with its children at it (124 and a reason), and in the window compute is refused
// while submit/promote/finalize/history still answer.
func TestLimitAndReserveWindow(t *testing.T) {
	f := newFixture(t, WithJudge(&fakeJudge{}))
	start := f.rc.Started()
	f.clock.set(start.Add(55*time.Minute - 2*time.Second)) // 2 s before the reserve window
	t0 := time.Now()
	r := f.runner("sh", "-c", "sleep 60 & sleep 60; echo never")
	took := time.Since(t0)
	if r.code != ExitLimit || !strings.Contains(r.stderr, "call limit of 2s") || strings.Contains(r.stdout, "never") || took > 15*time.Second {
		t.Errorf("at the limit: exit %d after %v, stderr %q", r.code, took, r.stderr)
	}
	last := f.entries()[0]
	if !last.LimitHit || last.Status != "limit" || last.Limit != "2s" {
		t.Errorf("audit: %+v", last)
	}
	f.clock.set(start.Add(57 * time.Minute))
	r = f.runner("true")
	if r.code != ExitRefused || !strings.Contains(r.stderr, "reserve window") || !strings.Contains(r.stderr, "[time left 3m00s — reserve window: submit/promote/finalize only]") {
		t.Errorf("in the reserve window: %+v", r)
	}
	for _, args := range [][]string{{"history"}, {"promote", "abc"}, {"time_left"}, {"status"}} {
		if r := f.runner(args...); r.code != 0 {
			t.Errorf("runner %v in the reserve window: %+v", args, r)
		}
	}
	if r := f.runner("time_left"); r.stdout != "3m00s left; in the reserve window: submit, promote and finalize only\n" {
		t.Errorf("time_left: %q", r.stdout)
	}
	f.clock.set(start.Add(61 * time.Minute))
	if r := f.runner("submit", "x"); r.code != ExitRefused || !strings.Contains(r.stderr, "the run is over") {
		t.Errorf("after the deadline: %+v", r)
	}
	// After the daemon ended the run: every compute call refused.
	f.clock.set(start.Add(10 * time.Minute))
	f.svc.End()
	if r := f.runner("true"); r.code != ExitRefused || !strings.Contains(r.stderr, "the run is over") {
		t.Errorf("after End: %+v", r)
	}
}

// One call at a time; the client's disconnect kills the call and its children.
func TestSecondCallRefusedAndDisconnectKills(t *testing.T) {
	f := newFixture(t)
	cmd := exec.Command(f.client, "sh", "-c", "sleep 300 & echo started; sleep 300")
	cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(out).ReadString('\n')
	r := f.runner("true")
	if r.code != ExitRefused || !strings.Contains(r.stderr, "call 1") || !strings.Contains(r.stderr, "sleep 300 & echo started") {
		t.Errorf("second call: %+v", r)
	}
	if r := f.runner("status"); !strings.Contains(r.stdout, "running:     call 1:") {
		t.Errorf("status: %q", r.stdout)
	}
	cmd.Process.Signal(syscall.SIGINT) // the agent's Ctrl-C: the client dies, the call with it
	cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for len(f.entries()) < 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	es := f.entries() // the refused call ran nothing and is not audited
	if len(es) != 1 || es[0].Status != "cancelled" || es[0].Exit != 137 {
		t.Fatalf("audit after disconnect: %+v", es)
	}
	if n := sleepers(); n != 0 {
		t.Errorf("%d of the call's sleep processes survived the disconnect", n)
	}
	if r := f.runner("sh", "-c", "echo free"); r.code != 0 || r.stdout != "free\n" {
		t.Errorf("the next call: %+v", r)
	}
}

func TestCwdAndEnv(t *testing.T) {
	f := newFixture(t)
	os.MkdirAll(filepath.Join(f.ws, "sub/deeper"), 0o755)
	os.Symlink("/etc", filepath.Join(f.ws, "link"))
	code, body := f.post(PathCall, `{"argv":["pwd"],"cwd":"/workspace/sub/deeper"}`)
	if code != 200 || !strings.Contains(body, "/workspace/sub/deeper\n") {
		t.Errorf("cwd inside: %d %q", code, body)
	}
	for cwd, want := range map[string]string{
		"/workspace/link":     "is a symbolic link",
		"/workspace/missing":  "does not exist",
		"/etc":                "outside /workspace",
		"/workspace/../etc":   "outside /workspace",
		"relative/dir":        "not an absolute path",
		"/workspace/sub\x00x": "not an absolute path",
	} {
		b, _ := json.Marshal(CallRequest{Argv: []string{"pwd"}, Cwd: cwd})
		if code, body := f.post(PathCall, string(b)); code != 400 || !strings.Contains(body, want) || !strings.HasPrefix(body, "[time left") {
			t.Errorf("cwd %q: %d %q; want 400 ~%q", cwd, code, body, want)
		}
	}
	r := f.runner("--env", "FOO=bar baz", "--env=N=1", "sh", "-c", "env | sort")
	for _, want := range []string{"FOO=bar baz\n", "N=1\n", "PYTHONUNBUFFERED=1\n", "SEALRUN_CALL=", "HOME=/workspace\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("env lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "SEALRUN_AGENT_SOCKET") {
		t.Error("the client's environment reached the call")
	}
	for _, bad := range []string{"LD_PRELOAD=/x.so", "HTTP_PROXY=x", "1BAD=x", "NOEQUALS"} {
		if r := f.runner("--env", bad, "true"); r.code != ExitRefused || !strings.Contains(r.stderr, "env ") {
			t.Errorf("--env %s: %+v", bad, r)
		}
	}
}

// Hostile and malformed requests get a clear 4xx; the service keeps serving.
func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	many := make([]string, MaxArgs+1)
	for i := range many {
		many[i] = "x"
	}
	manyJSON, _ := json.Marshal(CallRequest{Argv: many})
	bigArg, _ := json.Marshal(CallRequest{Argv: []string{"echo", strings.Repeat("a", MaxArgvBytes)}})
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{PathCall, "garbage", 400, "not the JSON"},
		{PathCall, `{"argv":["true"],"sudo":true}`, 400, `unknown field "sudo"`},
		{PathCall, `{"argv":["true"]} {"argv":["id"]}`, 400, "data after its JSON object"},
		{PathCall, `{"argv":[]}`, 400, "no command"},
		{PathCall, `{"argv":["ec\u0000ho"]}`, 400, "NUL byte"},
		{PathCall, string(manyJSON), 400, "257 arguments"},
		{PathCall, string(bigArg), 400, "at most 131072"},
		{PathCall, `{"argv":["true"],"pad":"` + strings.Repeat("p", 2<<20) + `"}`, 400, "over 1048576 bytes"},
		{"/v1/admin/runs", `{}`, 404, "unknown request"},
		{"/v1/../../admin", `{}`, 404, "unknown request"},
		{PathTimeLeft, `{"x":1}`, 400, "unknown field"},
		{PathSubmit, `{"arg":"x"}`, 200, "not served in this run"},
	} {
		code, body := f.post(tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %.60q: %d %.200q; want %d ~%q", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	// A half-closed connection and garbage on the socket.
	for _, raw := range []string{"POST /v1/call HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"argv\":", "\x00\x01\x02 not http\r\n\r\n"} {
		c, err := net.Dial("unix", f.sock)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(raw))
		c.(*net.UnixConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.ReadAll(c)
		c.Close()
	}
	if r := f.runner("echo", "still serving"); r.code != 0 || r.stdout != "still serving\n" {
		t.Errorf("after bad input: %+v", r)
	}
}

func TestRateLimit(t *testing.T) {
	f := newFixture(t, WithRate(1, 3))
	var limited int
	for i := 0; i < 8; i++ {
		if code, body := f.post(PathTimeLeft, `{}`); code == 429 {
			limited++
			if !strings.Contains(body, "slow down") {
				t.Errorf("429 body %q", body)
			}
		}
	}
	if limited < 4 {
		t.Errorf("%d of 8 rapid requests limited; want at least 4 (burst 3)", limited)
	}
}

// A 200 MB output streams through and is hashed whole; the log keeps its cap; the daemon's
// memory does not grow with it.
func TestLargeOutputCapped(t *testing.T) {
	f := newFixture(t, WithLogCap(1<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cmd := exec.Command(f.client, "head", "-c", "200000000", "/dev/zero")
	cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
	h := sha256.New()
	cmd.Stdout = h
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	zeros := sha256.New()
	io.CopyN(zeros, zeroReader{}, 200000000)
	want := hex.EncodeToString(zeros.Sum(nil))
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Errorf("client received %s, want %s", got, want)
	}
	e := f.entries()[0]
	if e.OutputBytes != 200000000 || string(e.OutputSHA256) != want || !e.LogTruncated {
		t.Errorf("audit: %+v", e)
	}
	// The log holds exactly its cap, and the entry hashes exactly that.
	kept, _ := os.ReadFile(filepath.Join(f.calls, "1.log"))
	sum := sha256.Sum256(kept)
	if len(kept) != 1<<20 || e.LogBytes != 1<<20 || string(e.LogSHA256) != hex.EncodeToString(sum[:]) {
		t.Errorf("log: %d bytes, sha256 %x; the entry says %d bytes, %s", len(kept), sum, e.LogBytes, e.LogSHA256)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d MiB while streaming 200 MB", grew>>20)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type fakeJudge struct{}

func (fakeJudge) Submit(context.Context, string) (string, error) { return "candidate c0ffee\n", nil }
func (fakeJudge) Promote(_ context.Context, id string) (string, error) {
	return fmt.Sprintf("promoted %s\n", id), nil
}
func (fakeJudge) Finalize(context.Context, string) (string, error) { return "finalized\n", nil }
func (fakeJudge) History(context.Context) (string, error)          { return "", nil }

// sleepers counts processes running "sleep 300" as a sealrun container user.
func sleepers() int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || string(b) != "sleep\x00300\x00" {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", p.Name()), &st) == nil && st.Uid >= sandbox.RangeBase {
			n++
		}
	}
	return n
}

// The real path: the agent in a controller container (busybox, no Python) runs the runner
// client mounted at /usr/local/bin/runner against the socket mounted at /run/sealrun/agent.sock;
// the call runs in a runner container in the agent's directory.
func TestFromController(t *testing.T) {
	f := newFixture(t)
	f.waitingContainer() // started before the controller, as in a run
	imgs := sandboxtest.LocalImages(t)
	ctx := context.Background()
	var out syncBuffer
	c, err := f.run.Start(ctx, sandbox.ContainerConfig{Role: sandbox.RoleController, Rootfs: imgs.Controller, Workspace: f.ws, Runner: f.client,
		Extra:  []specs.Mount{{Destination: SocketPath, Type: "bind", Source: f.sock, Options: []string{"bind", "nosuid", "nodev", "noexec"}}},
		Stdout: &out, Stderr: &out,
		Args: []string{"sh", "-c", `mkdir -p sub && cd sub && runner python3 -c 'import os; print(os.getcwd(), os.getuid())'; echo "exit=$?"; runner time_left; command -v python3 || echo no-python-here; ` +
			// No call from a call: the shim a call starts through is no runner client (runner-exec
			// knows only _exec and _await; the Go fallback would find no agent socket, below).
			`runner /tmp/.sealrun/runner time_left; echo "nested=$?"; ` +
			// The container waiting for the next call is out of the agent's sight (its own pid
			// namespace): no process here is a shim waiting for a call.
			`echo "waiting shims seen: $(for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '_awai[t]')"; ` +
			`runner python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/sealrun/agent.sock'); print('agent socket reached')" 2>&1 | tail -1`}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("controller: exit %d %v: %s", code, err, out.String())
	}
	// stdout and stderr are separate pipes here (the controller's own), so each is checked alone.
	for _, want := range []string{"[time left 1h00m00s]\n", "/workspace/sub 1000\nexit=0\n", "1h00m00s left; reserve window starts in 55m00s\n", "no-python-here\n",
		"inside a call there is no runner client", "nested=2\n", "waiting shims seen: 0\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("controller output lacks %q:\n%s", want, out.String())
		}
	}
	// A compute call cannot connect to the agent socket: the path inside the runner is the image's
	// placeholder on a read-only root (EROFS), or one it may not write (EACCES); either way no call.
	if o := out.String(); strings.Contains(o, "agent socket reached") ||
		!(strings.Contains(o, "[Errno 30] Read-only file system") || strings.Contains(o, "PermissionError: [Errno 13] Permission denied")) {
		t.Errorf("a compute call's connect to the agent socket was not refused:\n%s", o)
	}
}

// A failure of the host (here: the runner image's rootfs is gone) is the infrastructure's fault:
// the agent is told so, the call is audited infra_error, and the daemon hears of it.
func TestInfraErrorReported(t *testing.T) {
	var mu sync.Mutex
	var heard []error
	f := newFixtureWith(t, func(c *Config) { c.Image = "/nonexistent/rootfs" }, WithInfraHandler(func(err error) { mu.Lock(); heard = append(heard, err); mu.Unlock() }))
	r := f.runner("true")
	if r.code != ExitRefused || !strings.Contains(r.stderr, "infrastructure error (not your program's fault)") || !strings.Contains(r.stderr, "marked invalid") {
		t.Errorf("runner true: %+v", r)
	}
	es := f.entries()
	mu.Lock()
	defer mu.Unlock()
	if len(es) != 1 || es[0].Status != "infra_error" || !strings.Contains(es[0].Error, "/nonexistent/rootfs") || len(heard) != 1 {
		t.Errorf("audit %+v, daemon heard %v", es, heard)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// An OOM kill is the agent's fault, and the client is told so; the audit entry records it.
func TestOOMKillIsTheAgents(t *testing.T) {
	f := newFixture(t, WithLimits(sandbox.Limits{MemoryBytes: 96 << 20}))
	r := f.runner("python3", "-c", "b = []\nwhile True: b.append(bytearray(8 << 20))")
	if r.code != 137 || !strings.Contains(r.stderr, "OOM killer") || !strings.Contains(r.stderr, "your program's fault") {
		t.Errorf("runner: %+v", r)
	}
	if e := f.entries()[0]; !e.OOMKilled || e.Status != "exited" || e.Exit != 137 {
		t.Errorf("audit: %+v", e)
	}
}

// A call that forks past its pids limit: under runc the fork fails and the call goes on; under
// gVisor the fork fails or the call's sandbox ends there, and then the client is told it was the
// program's own limit and the audit entry records it.
func TestPidsLimitIsTheAgents(t *testing.T) {
	f := newFixture(t, WithLimits(sandbox.Limits{Pids: 32}))
	r := f.runner("python3", "-c", testenv.ForkBombPython)
	e := f.entries()[0]
	if f.host.RuntimeFor(sandbox.RoleRunner).Kind == sandbox.KindRunsc && r.code != 0 {
		// gVisor's sandbox ended at the limit (when it refuses the fork instead, ENOMEM, the
		// call goes on as under runc, below).
		if !strings.Contains(r.stderr, "limit of 32 processes and threads") || !strings.Contains(r.stderr, "your program's fault") {
			t.Errorf("runner under gVisor: %+v", r)
		}
		if !e.PidsLimitEnded || e.OOMKilled || e.Status != "exited" || e.Exit != r.code {
			t.Errorf("audit under gVisor: %+v", e)
		}
		return
	}
	if r.code != 0 || !strings.Contains(r.stdout, "stopped after") || strings.Contains(r.stderr, "processes and threads") {
		t.Errorf("runner: %+v", r)
	}
	if e.PidsLimitEnded || e.Status != "exited" || e.Exit != 0 {
		t.Errorf("audit: %+v", e)
	}
}

// Serve returns only once every request under way has: a call the socket's closing cut short
// (the run ended or was cancelled) has its audit entry written when Serve returns, before the
// run's end reads the log and signs its head.
func TestServeWaitsForCallsUnderWay(t *testing.T) {
	f := newFixture(t)
	done := make(chan result, 1)
	go func() {
		done <- f.runner("python3", "-c", "import time; print('long call', flush=True); time.sleep(60)")
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		logs, _ := filepath.Glob(filepath.Join(f.calls, "*.log"))
		if len(logs) > 0 {
			if b, _ := os.ReadFile(logs[0]); strings.Contains(string(b), "long call") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never ran")
		}
	}
	f.stop()
	if es := f.entries(); len(es) != 1 {
		t.Errorf("when Serve returned, the audit log held %d entries; want the cut-short call's", len(es))
	}
	<-done
}

// A pause of the run freezes the compute call under way (nothing of it runs meanwhile) and
// refuses new ones; its end thaws the call, whose limit has moved by the pause: a call that
// needs about 1 s of its 5 s limit (2 s in the emulated cgroup v2 guest), paused for 6 s of the
// wall, ends well.
func TestPauseFreezesTheCall(t *testing.T) {
	f := newFixture(t)
	start := f.rc.Started()
	f.clock.set(start.Add(55*time.Minute - 5*time.Second)) // a 5 s limit: the reserve window is 5 s away
	cmd := exec.Command(f.client, "sh", "-c", `i=0; while [ $i -lt 10 ]; do i=$((i+1)); echo tick $i; sleep 0.1; done; echo done`)
	cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		at   time.Time
		text string
	}
	lines := make(chan line, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- line{time.Now(), sc.Text()}
		}
		close(lines)
	}()
	if l := <-lines; l.text != "tick 1" {
		t.Fatalf("first line %q", l.text)
	}
	f.rc.Pause()
	if err := f.svc.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	if r := f.runner("true"); r.code != ExitRefused || !strings.Contains(r.stderr, "paused") {
		t.Errorf("a call while paused: %+v", r)
	}
	time.Sleep(6 * time.Second) // past the call's limit, on the wall
	f.clock.set(f.clock.now().Add(6 * time.Second))
	resumed := time.Now()
	f.rc.Resume()
	if err := f.svc.Resume(); err != nil {
		t.Fatal(err)
	}
	var during []string
	last := ""
	for l := range lines {
		// What was on its way when the freeze took (a line or two) may arrive just after.
		if l.at.After(paused.Add(500*time.Millisecond)) && l.at.Before(resumed) {
			during = append(during, l.text)
		}
		last = l.text
	}
	err := cmd.Wait()
	if err != nil || last != "done" {
		t.Errorf("the paused call: %v, last line %q, stderr %q", err, last, errb.String())
	}
	if len(during) > 0 {
		t.Errorf("the call ran while paused: %q", during)
	}
	if e := f.entries()[0]; e.LimitHit || e.Status != "exited" || e.Exit != 0 {
		t.Errorf("audit: %+v", e)
	}
}

// TestPauseCycles: a run paused and resumed hundreds of times while its compute call is busy
// (a shell that forks a process each step; a Python with four threads making system calls): each
// freeze takes and each thaw lets the call go on, and every call ends well with its whole output,
// under each runtime (gVisor's sandbox is frozen whole: its sentry, gofer and stub processes). A
// paused call once ended with SIGSEGV under gVisor; this is the test that would see it again.
// SEALRUN_TEST_PAUSE_CYCLES sets how many (default 300).
func TestPauseCycles(t *testing.T) {
	cycles := 300
	if v := os.Getenv("SEALRUN_TEST_PAUSE_CYCLES"); v != "" {
		if _, err := fmt.Sscan(v, &cycles); err != nil || cycles < 1 {
			t.Fatalf("SEALRUN_TEST_PAUSE_CYCLES=%q: give a whole number of cycles", v)
		}
	}
	f := newFixture(t)
	calls := []struct {
		argv  []string
		ticks int
	}{
		{[]string{"sh", "-c", `i=0; while [ $i -lt 150 ]; do i=$((i+1)); sleep 0.01; echo tick $i; done; echo done`}, 150},
		{[]string{"python3", "-c", `
import os, threading, time
stop = False
def busy():
    n = 0
    while not stop:
        n += 1
        if n % 500 == 0:
            os.getpid(); os.stat("/")
ts = [threading.Thread(target=busy) for _ in range(4)]
for th in ts: th.start()
for i in range(1, 201):
    print("tick", i, flush=True)
    time.sleep(0.005)
stop = True
for th in ts: th.join()
print("done", flush=True)
`}, 200},
	}
	done, frozen := 0, time.Duration(0)
	rng := uint32(time.Now().UnixNano())
	jitter := func(n uint32) time.Duration { // 1..n ms
		rng ^= rng << 13
		rng ^= rng >> 17
		rng ^= rng << 5
		return time.Duration(1+rng%n) * time.Millisecond
	}
	for call := 0; done < cycles; call++ {
		c := calls[call%len(calls)]
		cmd := exec.Command(f.client, c.argv...)
		cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
		out, _ := cmd.StdoutPipe()
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		first := make(chan struct{})
		var lines []string
		read := make(chan struct{})
		go func() {
			defer close(read)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if lines = append(lines, sc.Text()); len(lines) == 1 {
					close(first)
				}
			}
		}()
		select {
		case <-first:
		case <-read:
		}
		// Freeze and thaw until the call ends (read is closed at its end of output).
		for ended := false; !ended; {
			select {
			case <-read:
				ended = true
				continue
			default:
			}
			t0 := time.Now()
			if err := f.svc.Pause(); err != nil {
				f.svc.Resume()
				cmd.Wait()
				t.Fatalf("pause %d (call %d, %s): %v", done+1, call+1, c.argv[0], err)
			}
			frozen += time.Since(t0)
			time.Sleep(jitter(5))
			if err := f.svc.Resume(); err != nil {
				t.Fatalf("resume %d (call %d, %s): %v", done+1, call+1, c.argv[0], err)
			}
			done++
			time.Sleep(jitter(20))
		}
		err := cmd.Wait()
		want := make([]string, 0, c.ticks+1)
		for i := 1; i <= c.ticks; i++ {
			want = append(want, fmt.Sprintf("tick %d", i))
		}
		want = append(want, "done")
		if err != nil || strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Fatalf("call %d (%s) after %d pauses in all: %v (stderr %q); its output ends %q", call+1, c.argv[0], done, err, errb.String(), lines[max(0, len(lines)-3):])
		}
	}
	es := f.entries()
	for i, e := range es {
		if e.Status != "exited" || e.Exit != 0 || e.LimitHit {
			t.Errorf("call %d's audit entry: %+v", i+1, e)
		}
	}
	t.Logf("%d pauses of %d busy calls under %s, each frozen in %s on average: every call ended well", done, len(es), filepath.Base(sandboxtest.RoleRuntime(t, sandbox.RoleRunner)), (frozen / time.Duration(max(1, done))).Round(10*time.Microsecond))
}
