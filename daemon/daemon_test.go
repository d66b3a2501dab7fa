package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// The user's path: sealrund's queue and admin API in this process, the real sealrun CLI against
// its socket: run --wait (graded), the same seed refused, ps, show, logs, cancel of a queued and
// of a running run, each ending invalid with an attestation.
func TestDaemonThroughCLI(t *testing.T) {
	tb := newTestbed(t)
	cli := sandboxtest.Static(t, "cmd/sealrun")
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	tb.cfg.Resources.Concurrency = 1
	script := strings.Replace(agentScript, "PROMOTE", `if [ -f /workspace/slow ]; then sleep 600; fi; runner finalize "$id"`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(script), 0o755)
	// Three witnesses, each in a network namespace of its own: one cosigning, one answering
	// garbage, one unreachable. Runs go on; the cosigning one cosigns the heads.
	ws, good := netWitnesses(t, tb, 1)
	witnessKey, downKey := good.Key, ws[2].Key
	tb.cfg.Witnesses = ws
	tb.cfg.Ledger.WitnessQuorum = 1
	// A timestamp authority (sigstore's): every attestation's signature is timestamped.
	tsaURL, tsaChain := testenv.TimestampAuthority(t)
	tb.cfg.Timestamp = hostconfig.TimestampConfig{URL: tsaURL, Chain: tsaChain}
	x0, err := tb.cfg.TSA()
	if err != nil {
		t.Fatal(err)
	}
	x := tb.executor()
	x.TSA = x0
	ctx, stop := context.WithCancel(context.Background())
	d, err := New(ctx, tb.cfg, x, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apiDone := make(chan struct{})
	go func() { d.ServeAPI(ctx, l); close(apiDone) }()
	served := make(chan struct{})
	go func() { d.Serve(ctx); close(served) }()
	defer func() { stop(); <-served; <-apiDone; d.Close() }()
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)

	sealrun := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(cli, append(args, "--socket", tb.cfg.Socket)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out.String(), errb.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errb.String()
	}

	code, out, errs := sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "1")
	t.Logf("sealrun run: exit %d\n%s%s", code, out, errs)
	for _, want := range []string{"running", "call 1: python3 -c", "submitted ", "validation of ", "finalized", "graded: "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run, followed: exit %d, no %q in\n%s%s", code, want, out, errs)
		}
	}
	id := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
	if code, _, errs := sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "1", "--detach"); code != 1 || !strings.Contains(errs, "already has run "+id) || !strings.Contains(errs, "sealrun run: --seed: 1 of ") || !strings.HasSuffix(strings.TrimSpace(errs), "; give --rerun") {
		t.Errorf("same seed again (sealrund names the request's field, seed, and sealrun run its flag): %d %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--track", trackFile, "--agent", "nope", "--seed", "2"}, 1, `sealrun run: --agent: "nope": write PROVIDER/MODEL[@EFFORT]`},
		{[]string{"run", "--track", trackFile, "--agent", "anthropic/claude@high", "--seed", "2"}, 1, `provider "anthropic" is not configured`},
		{[]string{"run", "--track", trackFile, "--agent", "openai/gpt-x", "--seed", "2", "--wait", "--detach"}, 2, "exclude each other"},
		{[]string{"show", "r-nope"}, 1, "no run r-nope"},
		{[]string{"ps", "-a"}, 0, id},
		{[]string{"show", id}, 0, "graded"},
		{[]string{"logs", id, "--agent"}, 0, "finalized: the run ends now"},
		{[]string{"logs", id}, 0, `"state":"grading"`},
	} {
		code, out, errs := sealrun(c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%v: exit %d %q %q; want %d %q", c.args, code, out, errs, c.code, c.want)
		}
	}

	// A slow run occupies the only slot; a second waits queued; both are cancelled.
	os.WriteFile(filepath.Join(tb.kit, "slow"), nil, 0o644)
	_, slowOut, _ := sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "2", "--detach")
	_, queuedOut, _ := sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "3", "--detach")
	slow, queued := strings.TrimSpace(slowOut), strings.TrimSpace(queuedOut)
	waitState(t, d, slow, api.StateRunning)
	if r, _ := d.Run(queued); r.State != api.StateQueued {
		t.Errorf("second run is %s; want queued behind the first", r.State)
	}
	if code, out, errs := sealrun("cancel", queued); code != 0 || !strings.Contains(out, "cancel requested") {
		t.Errorf("cancel queued: %d %s %s", code, out, errs)
	}
	if code, out, errs := sealrun("cancel", slow); code != 0 {
		t.Errorf("cancel running: %d %s %s", code, out, errs)
	}
	for _, r := range []string{queued, slow} {
		rec := waitState(t, d, r, api.StateInvalid)
		if rec.Reason != "cancelled" {
			t.Errorf("%s: reason %q", r, rec.Reason)
		}
		if _, err := os.Stat(filepath.Join(rec.Dir, "result.att.json")); err != nil {
			t.Errorf("%s: no attestation: %v", r, err)
		}
	}
	if code, _, errs := sealrun("cancel", slow); code != 1 || !strings.Contains(errs, "has already ended") {
		t.Errorf("cancel twice: %d %s", code, errs)
	}
	// Gathering into a results directory (deploy/slurm): atomic, once, with the graded bundle;
	// then what the directory says of each seed.
	results := filepath.Join(tb.base, "results")
	os.Mkdir(results, 0o755)
	os.MkdirAll(filepath.Join(results, "."+id+".tmp-cut"), 0o755) // a gather killed midway
	os.WriteFile(filepath.Join(results, "."+id+".tmp-cut", "result.att.json"), []byte(`{"payload":`), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"results", "gather", id, filepath.Join(tb.base, "nowhere")}, 1, "results directory " + filepath.Join(tb.base, "nowhere") + ": not a directory"},
		{[]string{"results", "gather", "../etc", results}, 2, `"../etc" is not a run id`},
		{[]string{"results", "gather", "r-nope", results}, 1, "no run r-nope"},
		{[]string{"results", "gather", id, results}, 0, filepath.Join(results, id)},
		{[]string{"results", "gather", id, results}, 0, "already gathered, the same attestation"},
		{[]string{"results", "gather", slow, results}, 0, filepath.Join(results, slow)},
	} {
		code, out, errs := sealrun(c.args...)
		if code != c.code || !strings.Contains(out+errs, c.want) {
			t.Errorf("%v: exit %d %q %q; want %d %q", c.args, code, out, errs, c.code, c.want)
		}
	}
	for _, c := range []struct{ seed, want string }{{"1", "graded " + id}, {"2", "invalid " + slow}, {"9", "none "}, {"", "give --track, --agent and --seed"}} {
		args := []string{"results", "seed", results, "--track", trackFile, "--agent", "openai/gpt-x@high"}
		if c.seed != "" {
			args = append(args, "--seed", c.seed)
		}
		if out, _ := exec.Command(cli, args...).CombinedOutput(); !strings.Contains(string(out), c.want) {
			t.Errorf("results seed %s: %q; want %q", c.seed, out, c.want)
		}
	}
	for _, f := range []string{"result.att.json", "report.json", "audit.jsonl", "track.toml", "summary.txt", "report.html", "bundle.tar.gz", "run.json"} {
		if _, err := os.Stat(filepath.Join(results, id, f)); err != nil {
			t.Errorf("gathered run: %v", err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(results, ".*")); len(left) > 0 {
		t.Errorf("left after gathering: %v", left)
	}
	os.WriteFile(filepath.Join(results, slow, "result.att.json"), []byte("{}"), 0o644)
	if code, _, errs := sealrun("results", "gather", slow, results); code != 1 || !strings.Contains(errs, "holds another attestation of this run id") {
		t.Errorf("gather over another attestation: %d %s", code, errs)
	}
	// Metrics: the runs by state, the calls and the grading of ended runs.
	fams, err := d.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			seen[key] += v
		}
	}
	for key, min := range map[string]float64{"sealrun_runs{state=graded}": 1, "sealrun_runs{state=invalid}": 2, "sealrun_calls_total{status=exited}": 1,
		"sealrun_grading_seconds": 1, "sealrun_runs_ended_total{state=invalid}": 2, "sealrun_call_seconds": 1} {
		if seen[key] < min {
			t.Errorf("metric %s = %v; want at least %v (have %v)", key, seen[key], min, seen)
		}
	}
	var recs []api.Record
	_, out, _ = sealrun("ps", "-a", "--json")
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 3 {
		t.Errorf("ps --json: %v %s", err, out)
	}
	if seen["sealrun_ledger_entries"] < 6 || seen["sealrun_daemon_broken"] != 0 {
		t.Errorf("ledger metrics: %v entries, broken %v", seen["sealrun_ledger_entries"], seen["sealrun_daemon_broken"])
	}

	// The run ledger: exported, verified, and the board accounts for all three runs (one graded,
	// two cancelled). Then a run withheld from the published set is named.
	cliNoSocket := func(args ...string) (int, string) {
		out, err := exec.Command(cli, args...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		return 0, string(out)
	}
	// What sealrund's follower says of each: the garbage and the unreachable one held nothing.
	// The unreachable one's error comes only when its first request gives up (no route to host
	// after about 3 s unanswered ARP, at most the 20 s timeout), which the runs' end can
	// precede (the fresh CI: 2.9 s): polled until then.
	wrong := func(st witness.TargetStatus) bool {
		return (st.Name == "cosigns") != (st.Held > 0) || (st.Name != "cosigns") != (st.LastError != "")
	}
	sts := d.witnesses.Status()
	for deadline := time.Now().Add(40 * time.Second); slices.ContainsFunc(sts, wrong) && time.Now().Before(deadline); sts = d.witnesses.Status() {
		time.Sleep(200 * time.Millisecond)
	}
	for _, st := range sts {
		t.Logf("witness %s: holds %d, last error %q", st.Name, st.Held, st.LastError)
		if wrong(st) {
			t.Errorf("witness %s: %+v", st.Name, st)
		}
	}
	led := filepath.Join(tb.base, "ledger-export.jsonl")
	pub := "../attest/testdata/ed25519.pub"
	if code, out := cliNoSocket("ledger", "export", "--state-dir", tb.state, "--out", led); code != 0 || !strings.Contains(out, "6 entries of sealrun.ledger/") {
		t.Errorf("ledger export: %d %s", code, out)
	}
	if code, out := cliNoSocket("ledger", "verify", led, "--key", pub); code != 0 || !strings.Contains(out, "3 queued (0 reruns); ended: 1 graded, 0 failed, 2 invalid; not ended: 0") {
		t.Errorf("ledger verify: %d %s", code, out)
	}
	// Witnessed: the export carries the head the answering witness cosigned, and a reader
	// checks it with that witness's key.
	wled := filepath.Join(tb.base, "ledger-witnessed.jsonl")
	if code, out := cliNoSocket("ledger", "export", "--state-dir", tb.state, "--out", wled, "--witnessed", "1", "--wait", "30s"); code != 0 || !strings.Contains(out, "witnessed head: 6 of 6 entries, cosigned by witness.test/daemon") {
		t.Errorf("ledger export --witnessed: %d %s", code, out)
	}
	if code, out := cliNoSocket("ledger", "verify", wled, "--key", pub, "--witness", witnessKey); code != 0 || !strings.Contains(out, "witnessed  head of 6 entries cosigned by witness.test/daemon; 0 entries after it") {
		t.Errorf("ledger verify --witness: %d %s", code, out)
	}
	if code, out := cliNoSocket("ledger", "verify", wled, "--key", pub, "--witness", witnessKey, "--witness", downKey); code != 1 || !strings.Contains(out, "witness.test/down cosigned nothing here") {
		t.Errorf("ledger verify with the down witness required: %d %s", code, out)
	}
	if code, out := cliNoSocket("verify", filepath.Join(results, id, "result.att.json"), "--key", pub, "--tsa-chain", tsaChain); code != 0 || !strings.Contains(out, "timestamp  existed before "+time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("verify --tsa-chain of a gathered run: %d %s", code, out)
	}
	if code, out := cliNoSocket("verify", filepath.Join(results, id, "result.att.json"), "--key", pub); code != 0 || !strings.Contains(out, "ledger     entry 0 of sealrun.ledger/") {
		t.Errorf("verify shows the ledger entry: %d %s", code, out)
	}
	// The cancelled queued run was never gathered, the slow one's attestation was overwritten
	// above: gather both, then the board is whole.
	os.RemoveAll(filepath.Join(results, slow))
	sealrun("results", "gather", slow, results)
	sealrun("results", "gather", queued, results)
	if code, out := cliNoSocket("leaderboard", "--key", pub, results, "--ledger", led); code != 0 || !strings.Contains(out, "every run accounted for (3 in sealrun.ledger/") {
		t.Errorf("leaderboard --ledger: %d %s", code, out)
	}
	if code, out := cliNoSocket("leaderboard", "--key", pub, results, "--ledger", wled, "--witness", witnessKey); code != 0 || !strings.Contains(out, "head of 6 entries cosigned by witness.test/daemon") {
		t.Errorf("leaderboard --ledger --witness: %d %s", code, out)
	}
	if code, out := cliNoSocket("leaderboard", "--key", pub, results, "--ledger", led, "--witness", witnessKey); code != 1 || !strings.Contains(out, "witness.test/daemon cosigned nothing here") {
		t.Errorf("leaderboard --witness over a ledger exported without its witnessed head: %d %s", code, out)
	}
	os.RemoveAll(filepath.Join(results, slow))
	if code, out := cliNoSocket("leaderboard", "--key", pub, results, "--ledger", led); code != 1 || !strings.Contains(out, "MISSING "+slow+" (seed 2, invalid") {
		t.Errorf("leaderboard --ledger with a run withheld: %d %s", code, out)
	}
}

// cancelRun cancels run id and checks that it ends invalid, reason cancelled, with an attestation.
func cancelRun(t *testing.T, d *Daemon, id string) {
	t.Helper()
	if _, err := d.Cancel(id); err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, id, api.StateInvalid)
	if rec.Reason != "cancelled" {
		t.Errorf("reason %q", rec.Reason)
	}
	if _, err := os.Stat(filepath.Join(rec.Dir, "result.att.json")); err != nil {
		t.Errorf("no attestation: %v", err)
	}
}

func waitState(t testing.TB, d *Daemon, id, state string) api.Record {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if r, ok := d.Run(id); ok && r.State == state {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	r, _ := d.Run(id)
	t.Fatalf("run %s is %s (%s); want %s", id, r.State, r.Reason, state)
	return r
}

// startDaemon runs a daemon of the testbed in this process until the test ends.
func startDaemon(t testing.TB, tb *testbed, x *Executor) *Daemon {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	d, err := New(ctx, tb.cfg, x, slog.New(slog.NewTextHandler(testLogOutput(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { d.Serve(ctx); close(served) }()
	t.Cleanup(func() { stop(); <-served; d.Close() })
	return d
}

// serveAPI serves d's admin API on tb.cfg.Socket (set it, and Group, before startDaemon) until
// the test ends, and returns a client of it.
func serveAPI(t testing.TB, tb *testbed, d *Daemon) *client.Client {
	t.Helper()
	l, err := Listen(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.ServeAPI(ctx, l); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return client.New(tb.cfg.Socket)
}

// Two runs on a host with one GPU run one after the other; each runner call sees the GPU.
func TestQueueOneGPU(t *testing.T) {
	tb := newTestbed(t)
	node := "/dev/sealrun-test-gpu0"
	os.Remove(node)
	if err := syscall.Mknod(node, syscall.S_IFCHR|0o666, int(195<<8)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(node) })
	cdi := filepath.Join(tb.base, "cdi")
	os.MkdirAll(cdi, 0o755)
	os.WriteFile(filepath.Join(cdi, "fake.yaml"), []byte(`cdiVersion: "0.6.0"
kind: sealrun.test/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: `+node+`
          hostPath: `+node+`
          type: c
          major: 195
          minor: 0
`), 0o644)
	tb.cfg.Resources = hostconfig.ResourcesConfig{GPUs: []string{"sealrun.test/gpu=0"}, CDIDirs: []string{cdi}, Concurrency: 2}
	script := strings.Replace(agentScript, "PROMOTE", `runner sh -c 'ls /dev/sealrun-test-gpu0 && grep Cpus_allowed_list /proc/self/status && sleep 2'; runner finalize "$id"`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(script), 0o755)
	x := tb.executor()
	d := startDaemon(t, tb, x)
	gpuTrack := []byte(strings.Replace(tb.trackTOML, "gpus = 0", "gpus = 1", 1))
	a, err := d.Submit(gpuTrack, "gpu.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Submit(gpuTrack, "gpu.toml", "openai/gpt-x@high", 2, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a.ID, api.StateRunning)
	if r, _ := d.Run(b.ID); r.State != api.StateQueued {
		t.Errorf("the second run is %s while the first holds the only GPU", r.State)
	}
	for _, r := range d.Runs() {
		if r.ID == b.ID && r.Waiting != "#1: waiting for GPUs (1 needed, 0 free)" {
			t.Errorf("ps says the second run waits for %q", r.Waiting)
		}
	}
	ra := waitState(t, d, a.ID, api.StateGraded)
	rb := waitState(t, d, b.ID, api.StateGraded)
	if !rb.Started.After(ra.Finished) && !rb.Started.Equal(ra.Finished) {
		t.Errorf("runs overlapped: first finished %s, second started %s", ra.Finished, rb.Started)
	}
	// Each run is pinned to CPUs of its own from the host's (the track's one; the first free).
	var set unix.CPUSet
	unix.SchedGetaffinity(0, &set)
	first := "0"
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			first = strconv.Itoa(c)
			break
		}
	}
	for _, r := range []api.Record{ra, rb} {
		out, err := os.ReadFile(filepath.Join(r.Dir, "calls", "2.log"))
		if err != nil || !strings.Contains(string(out), node) {
			t.Errorf("%s: call 2 did not see the GPU: %v %q", r.ID, err, out)
		}
		if !strings.Contains(string(out), "Cpus_allowed_list:\t"+first+"\n") {
			t.Errorf("%s: call 2 was not pinned to CPU %s alone: %q", r.ID, first, out)
		}
	}
	if _, err := d.Submit([]byte(strings.Replace(tb.trackTOML, "gpus = 0", "gpus = 2", 1)), "gpu2.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "needs 2 GPUs per run") {
		t.Errorf("a track needing two GPUs: %v", err)
	}
	// A run dispatched with its GPU waits for exactly that one, then gets it.
	c, err := d.Submit(gpuTrack, "gpu.toml", "openai/gpt-x@high", 3, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.SubmitRequest(api.RunRequest{Track: string(gpuTrack), TrackName: "gpu.toml", Agent: "openai/gpt-x@high", Seed: 4, GPUs: []string{"sealrun.test/gpu=0"}, Dispatcher: "slurm job 9_4"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, c.ID, api.StateRunning)
	for _, r := range d.Runs() {
		if r.ID == p.ID && r.Waiting != "#1: waiting for its GPUs sealrun.test/gpu=0 (dispatched with them)" {
			t.Errorf("ps says the dispatched run waits for %q", r.Waiting)
		}
	}
	rp := waitState(t, d, p.ID, api.StateGraded)
	if out, err := os.ReadFile(filepath.Join(rp.Dir, "calls", "2.log")); err != nil || !strings.Contains(string(out), node) {
		t.Errorf("the dispatched run's call 2 did not see its GPU: %v %q", err, out)
	}
}

// A pin mismatch is refused before anything is created; the deadline reached during a call
// kills the call and the promoted candidate is graded.
func TestPinMismatchAndDeadlineMidCall(t *testing.T) {
	tb := newTestbed(t)
	x := tb.executor()
	d := startDaemon(t, tb, x)
	bad := strings.Replace(tb.trackTOML, string(tb.track.Exam.SHA256), strings.Repeat("9", 64), 1)
	if _, err := d.Submit([]byte(bad), "bad.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "the hidden exam "+strings.Repeat("9", 64)) {
		t.Errorf("exam pin mismatch: %v", err)
	}
	badImage := strings.Replace(tb.trackTOML, strings.TrimPrefix(string(tb.track.Images.Controller.Digest), "sha256:"), strings.Repeat("8", 64), 1)
	if _, err := d.Submit([]byte(badImage), "bad.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "controller image") {
		t.Errorf("image pin mismatch: %v", err)
	}
	if _, err := d.Submit([]byte(strings.Replace(tb.trackTOML, "cpus = 1", "cpus = 999", 1)), "cpus.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "needs 999 CPUs per run") {
		t.Errorf("a track needing more CPUs than the host: %v", err)
	}
	// The kit: a hash the store does not have; a kit damaged in the store (a file missing, a
	// symlink out, a file over the cap); a track whose validation set is not its kit's; a
	// scaffold pin the controller image's labels do not carry. Each is refused, naming the file.
	noKit := strings.Replace(tb.trackTOML, string(tb.track.Kit.SHA256), strings.Repeat("7", 64), 1)
	if _, err := d.Submit([]byte(noKit), "nokit.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "pins kit "+strings.Repeat("7", 64)+", which is not in this host's kit store") {
		t.Errorf("kit not in the store: %v", err)
	}
	badVal := strings.Replace(tb.trackTOML, string(tb.track.Exam.ValidationSHA256), strings.Repeat("6", 64), 1)
	if _, err := d.Submit([]byte(badVal), "badval.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), "validation.sealrun has sha256") {
		t.Errorf("validation set not the kit's: %v", err)
	}
	badScaffold := strings.Replace(tb.trackTOML, `version = "1.0.0"`, `version = "9.9.9"`, 1)
	if _, err := d.Submit([]byte(badScaffold), "scaffold.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), `label dev.sealrun.scaffold.version is "1.0.0", the track says "9.9.9"`) {
		t.Errorf("scaffold pin mismatch: %v", err)
	}
	kitDir := api.KitPath(tb.state, tb.track.Kit.SHA256)
	for _, c := range []struct {
		name, want string
		damage     func()
		restore    func()
	}{
		{"missing", "BRIEF.md: listed in SHA256SUMS but missing", func() { os.Rename(filepath.Join(kitDir, "BRIEF.md"), filepath.Join(tb.base, "brief")) },
			func() { os.Rename(filepath.Join(tb.base, "brief"), filepath.Join(kitDir, "BRIEF.md")) }},
		{"symlink out", "extra: is a symbolic link (to /etc/shadow)", func() { os.Symlink("/etc/shadow", filepath.Join(kitDir, "extra")) }, func() { os.Remove(filepath.Join(kitDir, "extra")) }},
		{"over the cap", "big: is 67108865 bytes, over the kit's limit", func() {
			f, _ := os.Create(filepath.Join(kitDir, "big"))
			f.Truncate(64<<20 + 1)
			f.Close()
		}, func() { os.Remove(filepath.Join(kitDir, "big")) }},
	} {
		c.damage()
		if _, err := d.Submit([]byte(tb.trackTOML), "kit.toml", "openai/gpt-x@high", 1, false, "test"); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), kitDir) {
			t.Errorf("kit %s: %v", c.name, err)
		}
		c.restore()
	}
	if entries, _ := os.ReadDir(filepath.Join(tb.state, "runs")); len(entries) != 0 {
		t.Errorf("a refused run created %d run directories", len(entries))
	}
	// A 40 s run with a 10 s reserve: the agent promotes, then starts a call that would run past
	// the reserve start; the call is cut, the run reaches its deadline, the candidate is graded.
	short := strings.NewReplacer(`wall = "3m"`, `wall = "40s"`, `call_limit = "1m"`, `call_limit = "30s"`, `reserve = "30s"`, `reserve = "10s"`).Replace(tb.trackTOML)
	script := strings.Replace(agentScript, "PROMOTE", `runner promote "$id"; runner sh -c 'echo started; sleep 120'; echo "call exit $?"; sleep 120`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(script), 0o755)
	r, err := d.Submit([]byte(short), "short.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, r.ID, api.StateGraded)
	transcript := string(mustRead(t, filepath.Join(rec.Dir, "transcript.log")))
	if !strings.Contains(transcript, "call exit 124") {
		t.Errorf("the call was not cut at the reserve start:\n%s", transcript)
	}
	if rec.Finished.Sub(rec.Started) < 40*time.Second || rec.Passed == nil {
		t.Errorf("run ended after %s, passed %v", rec.Finished.Sub(rec.Started), rec.Passed)
	}
}

// Cancel during grading: the run ends invalid (cancelled), attested, with nothing left running.
func TestCancelWhileGrading(t *testing.T) {
	tb := newTestbed(t)
	// The bundle answers the 6 validation questions, then hangs from the hidden exam's 7th on.
	hang := strings.Replace(string(mustRead(t, "../grader/example/predict.py")), `        req = json.loads(line)`, `        req = json.loads(line)
        if req["seq"] >= 7:
            import time; time.sleep(3600)`, 1)
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), []byte(hang), 0o644)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	x := tb.executor()
	d := startDaemon(t, tb, x)
	r, err := d.Submit([]byte(tb.trackTOML), "t.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, r.ID, api.StateGrading)
	time.Sleep(time.Second) // the grader is answering (and hanging)
	cancelRun(t, d, r.ID)
}

// The admin socket admits root and members of its group, and refuses everybody else with the fix.
func TestSocketGroup(t *testing.T) {
	tb := newTestbed(t)
	cli := sandboxtest.Static(t, "cmd/sealrun")
	sockDir, err := os.MkdirTemp("/run", "sealrun-socktest-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	os.Chmod(sockDir, 0o755)
	tb.cfg.Socket = filepath.Join(sockDir, "sealrun.sock")
	tb.cfg.Group = "nogroup"
	x := tb.executor()
	x.Entrypoint = []string{"true"}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d, err := New(ctx, tb.cfg, x, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := Listen(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	go d.ServeAPI(ctx, l)
	if st, err := os.Stat(tb.cfg.Socket); err != nil || st.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v", st, err)
	}
	as := func(uid, gid uint32) (string, error) {
		cmd := exec.Command(cli, "ps", "--socket", tb.cfg.Socket)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := as(65534, 65534); err != nil || !strings.Contains(out, "RUN") {
		t.Errorf("a member of the socket's group: %v\n%s", err, out)
	}
	if out, err := as(65534, 12345); err == nil || !strings.Contains(out, "join the sealrun group") {
		t.Errorf("a non-member: %v\n%s", err, out)
	}
}

// Cancel while preparing (held there by the test failpoint): invalid, cancelled, attested.
func TestCancelWhilePreparing(t *testing.T) {
	tb := newTestbed(t)
	x := tb.executor()
	x.Entrypoint, x.Hold = []string{"true"}, "preparing"
	d := startDaemon(t, tb, x)
	r, err := d.Submit([]byte(tb.trackTOML), "t.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, r.ID, api.StatePreparing)
	cancelRun(t, d, r.ID)
}

// A run that the infrastructure fails is rerun automatically, linked both ways, and a chain of
// failing reruns stops after MaxReruns.
func TestInfraFailureIsRerun(t *testing.T) {
	tb := newTestbed(t)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte("sleep 600\n"), 0o755)
	x := tb.executor()
	d := startDaemon(t, tb, x)
	a, err := d.Submit([]byte(tb.trackTOML), "t.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a.ID, api.StateRunning)
	b, err := d.Submit([]byte(tb.trackTOML), "t.toml", "openai/gpt-x@high", 2, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	// The kit's validation set disappears from the host while b waits: its start fails.
	os.Remove(filepath.Join(api.KitPath(tb.state, tb.track.Kit.SHA256), "validation.sealrun"))
	d.Cancel(a.ID)
	chain := []string{b.ID}
	deadline := time.Now().Add(time.Minute)
	for len(chain) < MaxReruns+1 && time.Now().Before(deadline) {
		r, _ := d.Run(chain[len(chain)-1])
		if r.Final() && r.RerunBy != "" {
			chain = append(chain, r.RerunBy)
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := waitState(t, d, chain[len(chain)-1], api.StateInvalid)
	time.Sleep(500 * time.Millisecond)
	if last, _ = d.Run(last.ID); len(chain) != MaxReruns+1 || last.RerunBy != "" {
		t.Fatalf("rerun chain %v; the last is rerun by %q", chain, last.RerunBy)
	}
	for i, id := range chain {
		r, _ := d.Run(id)
		if r.State != api.StateInvalid || !strings.Contains(r.Reason, "validation.sealrun: listed in SHA256SUMS but missing") || (i > 0 && r.RerunOf != chain[i-1]) {
			t.Errorf("%s: %+v", id, r)
		}
	}
	if r, _ := d.Run(a.ID); r.RerunBy != "" {
		t.Errorf("a cancelled run was rerun: %+v", r)
	}
}

func testLogOutput() io.Writer {
	if os.Getenv("SEALRUN_TEST_DAEMON_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// Three runs of one CPU each on a two-CPU host with three slots: two start at once, the third
// when one ends, and none is ever started twice (a started run stays queued until its Execute
// records preparing; the queue once picked it again in that moment: make demo found it).
func TestQueueNeverStartsARunTwice(t *testing.T) {
	tb := newTestbed(t)
	tb.cfg.Resources.Concurrency, tb.cfg.Resources.CPUs = 3, 2
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte("sleep 2\n"), 0o755)
	x := tb.executor()
	d := startDaemon(t, tb, x)
	var ids []string
	for seed := int64(1); seed <= 3; seed++ {
		r, err := d.Submit([]byte(tb.trackTOML), "t.toml", "openai/gpt-x@high", seed, false, "test")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		if r := waitState(t, d, id, api.StateFailed); r.State != api.StateFailed {
			t.Errorf("run %s: %s (%s); want failed (its agent promotes nothing)", id, r.State, r.Reason)
		}
	}
	preparing := map[string]int{}
	j, err := OpenJournal(filepath.Join(tb.state, "journal.jsonl"), func(e api.Event) error {
		if e.Kind == "state" && e.State == api.StatePreparing {
			preparing[e.Run]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	for _, id := range ids {
		if preparing[id] != 1 {
			t.Errorf("run %s was started %d times", id, preparing[id])
		}
	}
}

// takeGPUs: the first free GPUs, or a dispatched run's own, all of which must be free.
func TestTakeGPUs(t *testing.T) {
	free := []string{"g=0", "g=1", "g=2"}
	for _, c := range []struct {
		need       int
		want       []string
		gpus, rest string
		ok         bool
	}{
		{0, nil, "", "g=0,g=1,g=2", true},
		{2, nil, "g=0,g=1", "g=2", true},
		{4, nil, "", "g=0,g=1,g=2", false},
		{1, []string{"g=2", "g=0"}, "g=2", "g=0,g=1", true},
		{2, []string{"g=2", "g=0"}, "g=2,g=0", "g=1", true},
		{1, []string{"g=3"}, "", "g=0,g=1,g=2", false}, // held by another run: it waits
		{2, []string{"g=1"}, "", "g=0,g=1,g=2", false},
		{0, []string{"g=1"}, "", "g=0,g=1,g=2", true},
	} {
		gpus, rest, ok := takeGPUs(free, c.need, c.want)
		if strings.Join(gpus, ",") != c.gpus || strings.Join(rest, ",") != c.rest || ok != c.ok {
			t.Errorf("takeGPUs(%v, %d, %v) = %v %v %v; want %s | %s %v", free, c.need, c.want, gpus, rest, ok, c.gpus, c.rest, c.ok)
		}
	}
	if strings.Join(free, ",") != "g=0,g=1,g=2" {
		t.Errorf("takeGPUs changed its input: %v", free)
	}
}

// An outside scheduler's fields are checked at submit: GPUs of this host and enough of them,
// a rerun link to an invalid run of the same seed, a job name of bounded size. A dispatched
// run records them and shows its GPUs in ps while it waits.
func TestDispatchedRunRequests(t *testing.T) {
	tb := newTestbed(t)
	tb.cfg.Resources = hostconfig.ResourcesConfig{GPUs: []string{"sealrun.test/gpu=0", "sealrun.test/gpu=1"}, Concurrency: 1}
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	d := startDaemon(t, tb, tb.executor())
	gpuTrack := strings.Replace(tb.trackTOML, "gpus = 0", "gpus = 1", 1)
	req := func(mod func(*api.RunRequest)) api.RunRequest {
		r := api.RunRequest{Track: gpuTrack, TrackName: "gpu.toml", Agent: "openai/gpt-x@high", Seed: 1, Dispatcher: "slurm job 812_1", GPUs: []string{"sealrun.test/gpu=0"}}
		mod(&r)
		return r
	}
	for _, c := range []struct {
		name string
		req  api.RunRequest
		want string
	}{
		{"not this host's", req(func(r *api.RunRequest) { r.GPUs = []string{"nvidia.com/gpu=0"} }), "gpus: nvidia.com/gpu=0 is not one of this host's GPUs ([resources] gpus: sealrun.test/gpu=0, sealrun.test/gpu=1)"},
		{"twice", req(func(r *api.RunRequest) { r.GPUs = []string{"sealrun.test/gpu=1", "sealrun.test/gpu=1"} }), "gpus: sealrun.test/gpu=1 is named twice"},
		{"too few", req(func(r *api.RunRequest) {
			r.Track = strings.Replace(tb.trackTOML, "gpus = 0", "gpus = 2", 1)
			r.GPUs = []string{"sealrun.test/gpu=1"}
		}), "gpus: 1 GPUs (sealrun.test/gpu=1); track"},
		{"bad rerun id", req(func(r *api.RunRequest) { r.RerunOf = "../../etc" }), `rerun_of: "../../etc" is not a run id`},
		{"no GPUs from the scheduler", req(func(r *api.RunRequest) { r.GPUs = nil }), "gpus: 0 GPUs (); track"},
		{"too few CPUs", req(func(r *api.RunRequest) {
			r.Track = strings.Replace(gpuTrack, "cpus = 1", "cpus = 2", 1)
			r.GPUs, r.CPUs = []string{"sealrun.test/gpu=0"}, 1
		}), "needs 2 CPUs per run; the job was given 1 (sbatch --cpus-per-task=2)"},
		{"too little memory", req(func(r *api.RunRequest) { r.GPUs, r.Memory = []string{"sealrun.test/gpu=0"}, 1<<20 }), "MiB of memory per run; the job was given 1 MiB"},
		{"negative", req(func(r *api.RunRequest) { r.GPUs, r.CPUs = []string{"sealrun.test/gpu=0"}, -1 }), "cpus: -1, memory 0: both are 0 (not given) or more"},
		{"long job", req(func(r *api.RunRequest) { r.Dispatcher = strings.Repeat("j", 201) }), "dispatcher: is longer than 200 bytes"},
		{"control", req(func(r *api.RunRequest) { r.Dispatcher = "job\x1b[2J" }), "holds control characters"},
	} {
		if _, err := d.SubmitRequest(c.req, "test"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want refused with %q", c.name, err, c.want)
		}
	}
	// A dispatched run records its job and GPUs.
	a, err := d.SubmitRequest(req(func(r *api.RunRequest) { r.GPUs = []string{"sealrun.test/gpu=1"}; r.Seed = 7; r.Track = tb.trackTOML }), "test")
	if err != nil {
		t.Fatal(err)
	}
	if a.Dispatcher != "slurm job 812_1" || strings.Join(a.GPUs, ",") != "sealrun.test/gpu=1" {
		t.Errorf("the record: dispatcher %q, GPUs %v", a.Dispatcher, a.GPUs)
	}
	waitState(t, d, a.ID, api.StateGraded)
	// Rerunning a graded run is refused; an unknown id (another host's run) is accepted.
	if _, err := d.SubmitRequest(req(func(r *api.RunRequest) { r.Seed = 7; r.Track = tb.trackTOML; r.RerunOf = a.ID }), "test"); err == nil || !strings.Contains(err.Error(), "only an invalid run of the same track, agent and seed without a rerun can be rerun") {
		t.Errorf("rerun of a graded run: %v", err)
	}
	b, err := d.SubmitRequest(req(func(r *api.RunRequest) { r.Seed = 7; r.Track = tb.trackTOML; r.RerunOf = "r-20261122-101500-a1b2c3" }), "test")
	if err != nil {
		t.Fatalf("rerun of another host's run: %v", err)
	}
	if rb := waitState(t, d, b.ID, api.StateGraded); rb.RerunOf != "r-20261122-101500-a1b2c3" {
		t.Errorf("the rerun's record: %+v", rb)
	}
}

// A journal that cannot be written (the disk fails under the daemon): the daemon takes no new
// run, the running one ends invalid with the reason in its attestation, the log and the
// metrics say why; nothing is acknowledged that was not written.
func TestJournalFailureStopsTheDaemon(t *testing.T) {
	tb := newTestbed(t)
	tb.cfg.Resources.Concurrency = 1
	script := strings.Replace(agentScript, "PROMOTE", `sleep 600`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(script), 0o755)
	x := tb.executor()
	var logs bytes.Buffer
	ctx, stop := context.WithCancel(context.Background())
	d, err := New(ctx, tb.cfg, x, slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { d.Serve(ctx); close(served) }()
	defer func() { stop(); <-served; d.Close() }()
	rec, err := d.Submit([]byte(tb.trackTOML), "track.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, rec.ID, api.StateRunning)
	// The journal's file goes away under the daemon.
	d.j.mu.Lock()
	d.j.f.Close()
	d.j.mu.Unlock()
	if _, err := d.Submit([]byte(tb.trackTOML), "track.toml", "openai/gpt-x@high", 2, false, "test"); err == nil {
		t.Fatal("a run was acknowledged that the journal could not record")
	}
	got := waitState(t, d, rec.ID, api.StateInvalid)
	if !strings.Contains(got.Reason, "could not write its journal") {
		t.Errorf("the running run ended with reason %q", got.Reason)
	}
	v, err := attest.Verify(mustRead(t, filepath.Join(got.Dir, "result.att.json")), tb.verifier)
	if err != nil || v.Statement.Predicate.Result.Status != outcome.Invalid || !strings.Contains(v.Statement.Predicate.Result.Reason, "journal") {
		t.Errorf("its attestation: %v %+v", err, v)
	}
	_, err = d.Submit([]byte(tb.trackTOML), "track.toml", "openai/gpt-x@high", 3, false, "test")
	if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "takes no new runs") || !strings.Contains(err.Error(), "restart sealrund") {
		t.Errorf("a new run after the failure: %v", err)
	}
	fams, _ := d.metrics.reg.Gather()
	broken := -1.0
	for _, f := range fams {
		if f.GetName() == "sealrun_daemon_broken" {
			broken = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if broken != 1 {
		t.Errorf("sealrun_daemon_broken = %v; want 1", broken)
	}
	if !strings.Contains(logs.String(), "the daemon takes no new runs") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
}

// syncWriter serializes writes to w (the daemon logs from several goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
