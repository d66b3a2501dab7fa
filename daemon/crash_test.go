package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// kill -9 of a real sealrund while a run is running, then a restart: the run ends invalid
// (daemon restart) with an attestation that verifies, a rerun is queued, linked both ways and
// graded, nothing of the killed run is left, and the journal is intact.
func TestKill9AndRestart(t *testing.T) {
	tb := newTestbed(t)
	daemonBin := sandboxtest.Static(t, "cmd/sealrund")
	cli := sandboxtest.Static(t, "cmd/sealrun")
	// The daemon's own state directory, with the local test images' store linked in.
	os.Symlink(filepath.Join(testenv.LocalImages(t).State, "images"), filepath.Join(tb.state, "images"))
	runDir, err := os.MkdirTemp("/run", "sealrun-crashtest-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(runDir)
	keys := filepath.Join(tb.base, "keys")
	os.MkdirAll(keys, 0o700)
	os.WriteFile(filepath.Join(keys, "sealrun.key"), mustRead(t, "../attest/testdata/ed25519.key"), 0o600)
	os.WriteFile(filepath.Join(keys, "sealrun.pub"), mustRead(t, "../attest/testdata/ed25519.pub"), 0o644)
	sock := filepath.Join(tb.base, "sealrun.sock")
	prov := tb.cfg.Providers["openai"]
	cfgFile := filepath.Join(tb.base, "sealrun.toml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`state_dir = %q
run_dir = %q
socket = %q
group = "root"
runner = %q
hook = %q
[keys]
signing = %q
public = %q
[scaffold]
entrypoint = ["sh", "/workspace/agent.sh"]
kit = %q
[providers.openai]
kind = "openai"
base_url = %q
key_file = %q
`, tb.state, runDir, sock, tb.cfg.Runner, sandboxtest.Static(t, "cmd/sealrun-netns-hook"), filepath.Join(keys, "sealrun.key"), filepath.Join(keys, "sealrun.pub"),
		tb.kit, prov.BaseURL, prov.KeyFile)), 0o644)
	slow := strings.Replace(agentScript, "PROMOTE", `runner promote "$id"; sleep 600`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(slow), 0o755)

	var logs bytes.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(daemonBin, "--config", cfgFile)
		cmd.Env = os.Environ()
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(sock); err == nil {
				return cmd
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Kill()
		t.Fatalf("sealrund did not start:\n%s", logs.String())
		return nil
	}
	sealrun := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(cli, append(args, "--socket", sock)...).CombinedOutput()
		if err != nil {
			t.Fatalf("sealrun %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	show := func(id string) Record {
		var r Record
		json.Unmarshal([]byte(sealrun("show", id, "--json")), &r)
		return r
	}
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)

	d1 := start()
	id := strings.TrimSpace(sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "1", "--detach"))
	// Wait until the agent has submitted and promoted (the history says so), then kill -9.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(string(readOr(filepath.Join(tb.state, "runs", id, "history.jsonl"))), `"kind":"promote"`) {
		time.Sleep(100 * time.Millisecond)
	}
	if r := show(id); r.State != StateRunning {
		t.Fatalf("run is %s before the kill; want running\n%s", r.State, logs.String())
	}
	d1.Process.Signal(syscall.SIGKILL)
	d1.Wait()
	os.Remove(sock) // a killed daemon leaves its socket; the new one replaces it anyway

	// The rerun should finish: the agent finalizes at once from now on.
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	d2 := start()
	current := d2
	defer func() {
		current.Process.Signal(syscall.SIGTERM)
		current.Wait()
		if t.Failed() {
			t.Logf("sealrund logs:\n%s", logs.String())
		}
	}()
	r := show(id)
	if r.State != StateInvalid || r.Reason != "daemon restart" || r.RerunBy == "" {
		t.Fatalf("after restart: %+v", r)
	}
	deadline = time.Now().Add(2 * time.Minute)
	var rerun Record
	for time.Now().Before(deadline) {
		if rerun = show(r.RerunBy); rerun.Final() {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if rerun.State != StateGraded || rerun.RerunOf != id {
		t.Fatalf("rerun: %+v", rerun)
	}
	verifier, _, _ := attest.LoadVerifier("../attest/testdata/ed25519.pub")
	for _, rec := range []Record{r, rerun} {
		af, _ := os.Open(filepath.Join(rec.Dir, "audit.jsonl"))
		v, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), verifier,
			attest.WithReportDigest(sha(mustRead(t, filepath.Join(rec.Dir, "report.json")))), attest.WithAuditLog(af), attest.WithTrack(tb.track))
		af.Close()
		if err != nil {
			t.Errorf("%s: %v", rec.ID, err)
			continue
		}
		if p := v.Statement.Predicate; p.Run.ID != rec.ID || p.Run.RerunOf != rec.RerunOf || p.Result.Status != rec.State {
			t.Errorf("%s: predicate run %+v result %s", rec.ID, p.Run, p.Result.Status)
		}
	}
	// kill -9 during grading: a bundle that hangs on the hidden exam's 7th question holds the
	// run in grading; after the restart it is invalid and its rerun (with a sound bundle) graded.
	example := mustRead(t, "../grader/example/predict.py")
	hang := strings.Replace(string(example), "        req = json.loads(line)", "        req = json.loads(line)\n        if req[\"seq\"] >= 7:\n            import time; time.sleep(3600)", 1)
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), []byte(hang), 0o644)
	id2 := strings.TrimSpace(sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "2", "--detach"))
	deadline = time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && show(id2).State != StateGrading {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if st := show(id2).State; st != StateGrading {
		t.Fatalf("second run is %s; want grading", st)
	}
	current.Process.Signal(syscall.SIGKILL)
	current.Wait()
	os.Remove(sock)
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), example, 0o644)
	current = start()
	r2 := show(id2)
	if r2.State != StateInvalid || r2.Reason != "daemon restart" || r2.RerunBy == "" {
		t.Fatalf("killed while grading, after restart: %+v", r2)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for rr := show(r2.RerunBy); time.Now().Before(deadline) && !rr.Final(); rr = show(r2.RerunBy) {
		time.Sleep(200 * time.Millisecond)
	}
	if rr := show(r2.RerunBy); rr.State != StateGraded || rr.RerunOf != id2 {
		t.Errorf("rerun of the run killed while grading: %+v", rr)
	}
	af, _ := os.Open(filepath.Join(r2.Dir, "audit.jsonl"))
	if _, err := attest.Verify(mustRead(t, filepath.Join(r2.Dir, "result.att.json")), verifier, attest.WithAuditLog(af), attest.WithTrack(tb.track)); err != nil {
		t.Errorf("attestation of the run killed while grading: %v", err)
	}
	af.Close()

	// kill -9 while signing (held there by the test failpoint): after the restart the run is
	// invalid with an attestation saying so, and its rerun is graded.
	current.Process.Signal(syscall.SIGTERM)
	current.Wait()
	os.Setenv("SEALRUND_TEST_HOLD", "sign")
	current = start()
	os.Unsetenv("SEALRUND_TEST_HOLD")
	id3 := strings.TrimSpace(sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "3", "--detach"))
	deadline = time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(string(readOr(filepath.Join(tb.state, "journal.jsonl"))), `"run":"`+id3+`","kind":"hold"`) {
		time.Sleep(100 * time.Millisecond)
	}
	current.Process.Signal(syscall.SIGKILL)
	current.Wait()
	os.Remove(sock)
	if _, err := os.Stat(filepath.Join(tb.state, "runs", id3, "result.att.json")); err == nil {
		t.Fatalf("an attestation was written past the failpoint")
	}
	current = start()
	r3 := show(id3)
	if r3.State != StateInvalid || r3.Reason != "daemon restart" || r3.RerunBy == "" {
		t.Fatalf("killed while signing, after restart: %+v", r3)
	}
	if _, err := os.Stat(filepath.Join(r3.Dir, "result.att.json")); err != nil {
		t.Errorf("no attestation for the run killed while signing: %v", err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for rr := show(r3.RerunBy); time.Now().Before(deadline) && !rr.Final(); rr = show(r3.RerunBy) {
		time.Sleep(200 * time.Millisecond)
	}
	if rr := show(r3.RerunBy); rr.State != StateGraded || rr.RerunOf != id3 {
		t.Errorf("rerun of the run killed while signing: %+v", rr)
	}

	// Nothing of the killed runs is left: no container, no run of the host's run directory.
	if out, _ := exec.Command("runc", "list", "-q").Output(); strings.Contains(string(out), id) || strings.Contains(string(out), id2) {
		t.Errorf("containers of the killed run are left: %s", out)
	}
	if entries, _ := os.ReadDir(filepath.Join(runDir, "runs")); len(entries) > 0 {
		t.Errorf("run records left in %s: %d", runDir, len(entries))
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
