package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
	"github.com/sigstore/sigstore/pkg/signature"
)

// realDaemon is a real sealrund process on a testbed, driven through the real sealrun CLI, that
// tests kill with -9 and restart.
type realDaemon struct {
	t        testing.TB
	tb       *testbed
	bin, cli string
	cfgFile  string
	sock     string
	runDir   string
	trackF   string
	logs     bytes.Buffer
	cmd      *exec.Cmd
	env      []string // extra environment of the next start
	wrap     []string // a command sealrund runs under (nsenter into a test node's namespaces)
	verifier signature.Verifier
}

func newRealDaemon(t testing.TB, tb *testbed) *realDaemon {
	rd := &realDaemon{t: t, tb: tb, bin: sandboxtest.Static(t, "cmd/sealrund"), cli: sandboxtest.Static(t, "cmd/sealrun")}
	// The daemon's own state directory, with the local test images' store linked in.
	os.Symlink(filepath.Join(testenv.LocalImages(t).State, "images"), filepath.Join(tb.state, "images"))
	rd.runDir = testenv.RunDir(t, sandbox.ReapRunDir)
	keys := filepath.Join(tb.base, "keys")
	os.MkdirAll(keys, 0o700)
	os.WriteFile(filepath.Join(keys, "sealrun.key"), mustRead(t, "../attest/testdata/ed25519.key"), 0o600)
	os.WriteFile(filepath.Join(keys, "sealrun.pub"), mustRead(t, "../attest/testdata/ed25519.pub"), 0o644)
	rd.sock = filepath.Join(tb.base, "sealrun.sock")
	prov := tb.cfg.Providers["openai"]
	rd.cfgFile = filepath.Join(tb.base, "sealrun.toml")
	os.WriteFile(rd.cfgFile, []byte(fmt.Sprintf(`state_dir = %q
run_dir = %q
socket = %q
group = "root"
runner = %q
hook = %q
[keys]
signing = %q
public = %q
[providers.openai]
kind = "openai"
base_url = %q
key_file = %q
`, tb.state, rd.runDir, rd.sock, tb.cfg.Runner, sandboxtest.Static(t, "cmd/sealrun-netns-hook"), filepath.Join(keys, "sealrun.key"), filepath.Join(keys, "sealrun.pub"),
		prov.BaseURL, prov.KeyFile)), 0o644)
	rd.trackF = filepath.Join(tb.base, "track.toml")
	os.WriteFile(rd.trackF, []byte(tb.trackTOML), 0o644)
	rd.verifier, _, _ = attest.LoadVerifier("../attest/testdata/ed25519.pub")
	t.Cleanup(func() {
		rd.stop()
		if t.Failed() {
			t.Logf("sealrund logs:\n%s", rd.logs.String())
		}
	})
	return rd
}

// start starts sealrund and waits for its socket.
func (rd *realDaemon) start() {
	t := rd.t
	t.Helper()
	os.Remove(rd.sock) // a killed daemon leaves its socket; the new one replaces it anyway
	argv := append(append([]string(nil), rd.wrap...), rd.bin, "--config", rd.cfgFile)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "SEALRUND_TEST_OVERLAY="+rd.tb.kit, "SEALRUND_TEST_ENTRYPOINT=sh /workspace/agent.sh",
		"SEALRUN_TEST_RUNDIR="+rd.runDir), rd.env...) // the mark by which a later test stops it if this one is killed (testenv.RunDir)
	cmd.Stderr = &rd.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd.cmd = cmd
	go cmd.Wait()
	armed := strings.Contains(strings.Join(rd.env, " "), "SEALRUND_TEST_KILL_AFTER=")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(rd.sock); err == nil {
			return
		}
		if rd.exited() {
			if armed {
				return // the failpoint fired while it started (a recovery event)
			}
			break
		}
	}
	t.Fatalf("sealrund did not start:\n%s", rd.logs.String())
}

// exited says whether the daemon's process is gone (killed by a failpoint).
func (rd *realDaemon) exited() bool {
	return rd.cmd != nil && syscall.Kill(rd.cmd.Process.Pid, 0) != nil
}

func (rd *realDaemon) kill9() {
	if rd.cmd != nil {
		rd.cmd.Process.Signal(syscall.SIGKILL)
		for rd.cmd.ProcessState == nil && syscall.Kill(rd.cmd.Process.Pid, 0) == nil {
			time.Sleep(10 * time.Millisecond)
		}
		rd.cmd = nil
	}
}

func (rd *realDaemon) stop() {
	if rd.cmd != nil {
		rd.cmd.Process.Signal(syscall.SIGTERM)
		for i := 0; i < 600 && syscall.Kill(rd.cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
		rd.cmd = nil
	}
}

func (rd *realDaemon) sealrun(args ...string) string {
	rd.t.Helper()
	out, err := exec.Command(rd.cli, append(args, "--socket", rd.sock)...).CombinedOutput()
	if err != nil {
		rd.t.Fatalf("sealrun %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (rd *realDaemon) show(id string) api.Record {
	var r api.Record
	json.Unmarshal([]byte(rd.sealrun("show", id, "--json")), &r)
	return r
}

func (rd *realDaemon) waitFor(what string, ok func() bool) {
	rd.t.Helper()
	for deadline := time.Now().Add(90 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			rd.t.Fatalf("timed out waiting for %s\n%s", what, rd.logs.String())
		}
	}
}

// launch starts a run (detached) and returns its id.
func (rd *realDaemon) launch(seed string) string {
	return strings.TrimSpace(rd.sealrun("run", "--track", rd.trackF, "--agent", "openai/gpt-x@high", "--seed", seed, "--detach"))
}

// verify checks a final run's attestation with its report, audit log and track.
func (rd *realDaemon) verify(rec api.Record, phase string) {
	t := rd.t
	t.Helper()
	af, _ := os.Open(filepath.Join(rec.Dir, "audit.jsonl"))
	defer af.Close()
	v, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), rd.verifier,
		attest.WithReportDigest(sha(mustRead(t, filepath.Join(rec.Dir, "report.json")))), attest.WithAuditLog(af), attest.WithTrack(rd.tb.track))
	if err != nil {
		t.Errorf("%s (%s): %v", rec.ID, phase, err)
		return
	}
	if p := v.Statement.Predicate; p.Run.ID != rec.ID || p.Run.RerunOf != rec.RerunOf || string(p.Result.Status) != rec.State {
		t.Errorf("%s (%s): predicate run %+v result %s", rec.ID, phase, p.Run, p.Result.Status)
	}
}

// afterRestart checks a run killed at phase: invalid (daemon restart) with an attestation
// that verifies, and its rerun queued, linked both ways and graded.
func (rd *realDaemon) afterRestart(id, phase string) {
	t := rd.t
	t.Helper()
	r := rd.show(id)
	if r.State != api.StateInvalid || r.Reason != "daemon restart" || r.RerunBy == "" {
		t.Fatalf("killed %s, after restart: %+v", phase, r)
	}
	rd.waitFor("the rerun of the run killed "+phase, func() bool { return rd.show(r.RerunBy).Final() })
	rerun := rd.show(r.RerunBy)
	if rerun.State != api.StateGraded || rerun.RerunOf != id {
		t.Errorf("rerun of the run killed %s: %+v", phase, rerun)
	}
	rd.verify(r, phase)
	rd.verify(rerun, phase)
}

// kill -9 of a real sealrund while a run is running, then a restart: the run ends invalid
// (daemon restart) with an attestation that verifies, a rerun is queued, linked both ways and
// graded, nothing of the killed run is left, and the journal is intact.
func TestKill9AndRestart(t *testing.T) {
	tb := newTestbed(t)
	rd := newRealDaemon(t, tb)
	slow := strings.Replace(agentScript, "PROMOTE", `runner promote "$id"; sleep 600`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(slow), 0o755)
	start, show, waitFor, kill9, afterRestart := rd.start, rd.show, rd.waitFor, rd.kill9, rd.afterRestart
	logs, runDir := &rd.logs, rd.runDir
	launch := rd.launch
	finalizing := []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1))

	// 1. kill -9 while running, once the agent has submitted and promoted.
	start()
	id := launch("1")
	waitFor("the promotion", func() bool {
		return strings.Contains(string(readOr(filepath.Join(tb.state, "runs", id, "history.jsonl"))), `"kind":"promote"`)
	})
	if r := show(id); r.State != api.StateRunning {
		t.Fatalf("run is %s before the kill; want running\n%s", r.State, logs.String())
	}
	kill9()
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), finalizing, 0o755) // reruns finish at once
	start()
	afterRestart(id, "while running")

	// 2. kill -9 during grading: a bundle that hangs on the hidden exam's 7th question holds the
	// run in grading; its rerun gets a sound bundle.
	example := mustRead(t, "../grader/example/predict.py")
	hang := strings.Replace(string(example), "        req = json.loads(line)", "        req = json.loads(line)\n        if req[\"seq\"] >= 7:\n            import time; time.sleep(3600)", 1)
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), []byte(hang), 0o644)
	id2 := launch("2")
	waitFor("grading", func() bool { return show(id2).State == api.StateGrading })
	time.Sleep(time.Second)
	if st := show(id2).State; st != api.StateGrading {
		t.Fatalf("second run is %s; want grading", st)
	}
	kill9()
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), example, 0o644)
	start()
	afterRestart(id2, "while grading")

	// 3. kill -9 while signing (held there by the test failpoint): no attestation was written
	// before the kill; after the restart the run has one saying invalid.
	rd.stop()
	os.Setenv("SEALRUND_TEST_HOLD", "sign")
	start()
	os.Unsetenv("SEALRUND_TEST_HOLD")
	id3 := launch("3")
	waitFor("the signing failpoint", func() bool {
		return strings.Contains(string(readOr(filepath.Join(tb.state, "journal.jsonl"))), `"run":"`+id3+`","kind":"hold"`)
	})
	kill9()
	if _, err := os.Stat(filepath.Join(tb.state, "runs", id3, "result.att.json")); err == nil {
		t.Fatalf("an attestation was written past the failpoint")
	}
	start()
	afterRestart(id3, "while signing")

	// Nothing of the killed runs is left: no container, no run of the host's run directory.
	if out, _ := exec.Command("runc", "list", "-q").Output(); strings.Contains(string(out), id) || strings.Contains(string(out), id2) || strings.Contains(string(out), id3) {
		t.Errorf("containers of the killed run are left: %s", out)
	}
	// A rerun's record goes with its teardown, which follows its end: waited for, not assumed.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		entries, _ := os.ReadDir(filepath.Join(runDir, "runs"))
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("run records left in %s 30 s after the last run ended: %d", runDir, len(entries))
			break
		}
	}
	// The journal replays: every line is whole.
	j, err := OpenJournal(filepath.Join(tb.state, "journal.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
}

func readOr(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// kill -9 at each of ten journal event boundaries of a run's life (the daemon kills itself
// right after the event is fsynced: SEALRUND_TEST_KILL_AFTER), then a restart. Each time: every
// line journaled before the kill is still there (no acknowledged record lost); a run killed
// once started is invalid (daemon restart) with a rerun linked both ways and graded; a run
// killed while queued keeps its place and runs; a run killed after its end (or after its end
// is in the run ledger) keeps its result;
// every attestation verifies; nothing is left behind.
func TestKill9AtEveryJournalEvent(t *testing.T) {
	tb := newTestbed(t)
	rd := newRealDaemon(t, tb)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	journal := filepath.Join(tb.state, "journal.jsonl")
	var ids []string
	kills := 0
	for i, p := range []struct {
		point string // the run's event after which the daemon dies
		// recover: the restart after that kill dies too, after this event of its recovery
		recover string
	}{
		{"submitted", ""}, {"state:preparing", ""}, {"state:running", "state:invalid"}, {"finalized", "submitted"},
		{"state:grading", ""}, {"sealed", ""}, {"result", ""}, {"state:graded", ""},
	} {
		name := fmt.Sprintf("%d-%s", i+1, p.point)
		rd.env = []string{"SEALRUND_TEST_KILL_AFTER=" + p.point}
		rd.start()
		out, err := exec.Command(rd.cli, "run", "--track", rd.trackF, "--agent", "openai/gpt-x@high", "--seed", fmt.Sprint(100+i), "--detach", "--socket", rd.sock).CombinedOutput()
		id := strings.TrimSpace(string(out))
		if p.point == "submitted" && err == nil {
			t.Fatalf("%s: the run was acknowledged: %s", name, out)
		}
		if err != nil {
			// Killed before it answered (after "submitted", or "preparing" when the queue was
			// quicker than the reply): the client saw no id; the journal has it.
			rd.waitFor(name+": the failpoint", rd.exited)
			id = lastRun(t, journal)
		}
		ids = append(ids, id)
		for _, point := range []string{p.point, p.recover} {
			if point == "" {
				break
			}
			if point == p.recover {
				name += ", then " + point + " in the recovery"
				rd.env = []string{"SEALRUND_TEST_KILL_AFTER=" + point}
				rd.start()
			}
			kills++
			rd.waitFor(name+": the failpoint", rd.exited)
			rd.cmd = nil
			before := mustRead(t, journal)
			if !bytes.HasSuffix(before, []byte("\n")) {
				t.Fatalf("%s: the journal ends with a torn line after the kill", name)
			}
			if last := lastEvent(t, before); string(last.Kind)+":"+last.State != point && string(last.Kind) != point {
				t.Fatalf("%s: the last journaled event is %+v", name, last)
			}
		}
		before := mustRead(t, journal)
		rd.env = nil
		rd.start()
		if after := mustRead(t, journal); !bytes.HasPrefix(after, before) {
			t.Fatalf("%s: the restart changed what was journaled before the kill", name)
		}
		rd.waitFor(name+": every run final", func() bool {
			for _, r := range listRuns(rd) {
				if !r.Final() {
					return false
				}
			}
			return true
		})
		r := rd.show(id)
		switch {
		case p.point == "state:graded", p.point == "submitted", p.point == "result":
			// Killed after its end, or after it was attested and its end in the ledger (only
			// the final state's journal line was lost: the ledger completes it), or while queued
			// (it keeps its place): graded, never rerun.
			if r.State != api.StateGraded || r.RerunBy != "" {
				t.Errorf("%s: %+v", name, r)
			}
			rd.verify(r, name)
		default:
			rd.afterRestart(id, name)
		}
		rd.stop()
	}
	// Every run: final, attested, and each killed one rerun exactly once.
	rd.start()
	reruns := map[string]int{}
	for _, r := range listRuns(rd) {
		if r.RerunOf != "" {
			reruns[r.RerunOf]++
		}
	}
	for id, n := range reruns {
		if n != 1 {
			t.Errorf("run %s was rerun %d times", id, n)
		}
	}
	if out, _ := exec.Command("runc", "list", "-q").Output(); len(bytes.TrimSpace(out)) > 0 {
		for _, id := range ids {
			if strings.Contains(string(out), id) {
				t.Errorf("containers of killed runs are left: %s", out)
			}
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(rd.runDir, "runs")); len(entries) > 0 {
		t.Errorf("run records left in %s: %d", rd.runDir, len(entries))
	}
	if kills != 10 {
		t.Errorf("%d kills; the catalogue has 10", kills)
	}
	// The run ledger, through every kill: each run queued and ended once, in the state the
	// daemon reports, naming the attestation the run directory holds.
	var pub bytes.Buffer
	lf, err := os.Open(filepath.Join(tb.state, "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if _, err := ledger.Export(lf, &pub); err != nil {
		t.Fatalf("ledger export after the kills: %v", err)
	}
	led, err := ledger.Read(&pub, "ledger", []signature.Verifier{rd.verifier})
	if err != nil {
		t.Fatalf("the ledger after the kills: %v", err)
	}
	runs := listRuns(rd)
	for _, r := range runs {
		_, queued := led.Queued[r.ID]
		ei, ended := led.Ended[r.ID]
		if !queued || !ended {
			t.Errorf("run %s (%s): queued in the ledger %v, ended %v", r.ID, r.State, queued, ended)
			continue
		}
		e := led.Entries[ei]
		digest, _ := StatementDigest(readOr(filepath.Join(r.Dir, "result.att.json")))
		if string(e.State) != r.State || (string(e.Attestation) != "" && string(e.Attestation) != digest) {
			t.Errorf("run %s: ledger says %s %s, the daemon %s with attestation %s", r.ID, e.State, e.Attestation, r.State, digest)
		}
	}
	if len(led.Queued) != len(runs) {
		t.Errorf("the ledger has %d runs, the daemon %d", len(led.Queued), len(runs))
	}
	t.Logf("%d kills at journal events, %d runs, 0 acknowledged records lost; the ledger (%d entries) accounts for every run", kills, len(runs), led.Head.Size)
}

func listRuns(rd *realDaemon) []api.Record {
	var rs []api.Record
	json.Unmarshal([]byte(rd.sealrun("ps", "-a", "--json")), &rs)
	return rs
}

func lastEvent(t *testing.T, journal []byte) api.Event {
	lines := bytes.Split(bytes.TrimSpace(journal), []byte("\n"))
	var e api.Event
	if err := json.Unmarshal(lines[len(lines)-1], &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func lastRun(t *testing.T, journal string) string {
	return lastEvent(t, mustRead(t, journal)).Run
}

// The fresh machine of issue 53, through a real sealrund, in a mount namespace where /run/netns
// and sealrun's namespace directory have never been mounts. A run is live when iproute2's `ip
// netns add` runs for the first time on the machine: the run still grades, and nothing of it is
// left. Then a run is live when sealrund is killed and something mounts over sealrun's own
// namespace directory, hiding the run's namespace: the next sealrund removes it, says so in its
// log, and the rerun grades.
func TestNetnsHiddenAcrossRestart(t *testing.T) {
	if !testenv.InPrivateMounts(t, sandbox.LegacyNetnsDir, sandbox.DefaultNetnsDir) {
		return
	}
	tb := newTestbed(t)
	rd := newRealDaemon(t, tb)
	agent := func(promote string) {
		os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", promote, 1)), 0o755)
	}
	promoted := func(id string) func() bool {
		return func() bool {
			return strings.Contains(string(readOr(filepath.Join(tb.state, "runs", id, "history.jsonl"))), `"kind":"promote"`)
		}
	}
	gw := func(id string) string { return filepath.Join(sandbox.DefaultNetnsDir, sandbox.Prefix+id+"-gw") }
	nothingLeft := func(id string) {
		t.Helper()
		// (other packages' runs, made in the host's mount namespace, are hidden in this one too)
		if s := sandbox.StrandedNetns(sandbox.DefaultNetnsDir); slices.Contains(s, gw(id)) {
			t.Errorf("run %s's network namespace is stranded: %v", id, s)
		}
		if _, err := os.Lstat(gw(id)); err == nil {
			t.Errorf("run %s's network namespace %s is left", id, gw(id))
		}
	}

	// 1. iproute2's first mount of /run/netns while a run is live.
	agent(`runner promote "$id"; sleep 4; runner finalize "$id"`)
	rd.start()
	id := rd.launch("1")
	rd.waitFor("the promotion", promoted(id))
	probe := fmt.Sprintf("sealrun-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", probe).Run()
	if !testenv.IsMountPoint(sandbox.LegacyNetnsDir) {
		t.Fatalf("ip netns add did not mount %s: the test did not reproduce a fresh machine", sandbox.LegacyNetnsDir)
	}
	rd.waitFor("the run's end", func() bool { return rd.show(id).Final() })
	if r := rd.show(id); r.State != api.StateGraded {
		t.Errorf("the run live during ip netns add: %s %s", r.State, r.Reason)
	}
	rd.waitFor("the run's teardown", func() bool { _, err := os.Lstat(gw(id)); return err != nil })
	nothingLeft(id)
	if j := string(readOr(filepath.Join(tb.state, "journal.jsonl"))); strings.Contains(j, string(api.EventTeardownFailed)) {
		t.Errorf("the journal has a failed teardown:\n%s", j)
	}

	// 2. sealrund killed with a run live; its namespace's directory mounted over; restarted.
	agent(`runner promote "$id"; sleep 600`)
	id2 := rd.launch("2")
	rd.waitFor("the promotion", promoted(id2))
	rd.kill9()
	testenv.IPRoute2FirstMount(t, sandbox.DefaultNetnsDir)
	if s := sandbox.StrandedNetns(sandbox.DefaultNetnsDir); !slices.Contains(s, gw(id2)) {
		t.Fatalf("StrandedNetns = %v; want the killed run's %s", s, gw(id2))
	}
	agent(`runner finalize "$id"`)
	rd.start()
	rd.afterRestart(id2, "with its namespace hidden")
	if !strings.Contains(rd.logs.String(), "a later mount over its directory had hidden") || !strings.Contains(rd.logs.String(), gw(id2)) {
		t.Errorf("sealrund's log does not name the hidden namespace it removed:\n%s", rd.logs.String())
	}
	rd.stop()
	nothingLeft(id2)
}
