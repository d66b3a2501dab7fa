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
[providers.openai]
kind = "openai"
base_url = %q
key_file = %q
`, tb.state, runDir, sock, tb.cfg.Runner, sandboxtest.Static(t, "cmd/sealrun-netns-hook"), filepath.Join(keys, "sealrun.key"), filepath.Join(keys, "sealrun.pub"),
		prov.BaseURL, prov.KeyFile)), 0o644)
	slow := strings.Replace(agentScript, "PROMOTE", `runner promote "$id"; sleep 600`, 1)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(slow), 0o755)

	var logs bytes.Buffer
	start := func() *exec.Cmd {
		cmd := exec.Command(daemonBin, "--config", cfgFile)
		cmd.Env = append(os.Environ(), "SEALRUND_TEST_OVERLAY="+tb.kit, "SEALRUND_TEST_ENTRYPOINT=sh /workspace/agent.sh")
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

	verifier, _, _ := attest.LoadVerifier("../attest/testdata/ed25519.pub")
	var current *exec.Cmd
	defer func() {
		if current != nil {
			current.Process.Signal(syscall.SIGTERM)
			current.Wait()
		}
		if t.Failed() {
			t.Logf("sealrund logs:\n%s", logs.String())
		}
	}()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, logs.String())
			}
		}
	}
	kill9 := func() {
		current.Process.Signal(syscall.SIGKILL)
		current.Wait()
		os.Remove(sock) // a killed daemon leaves its socket; the new one replaces it anyway
	}
	// afterRestart checks a run killed at phase: invalid (daemon restart) with an attestation
	// that verifies, and its rerun queued, linked both ways and graded.
	afterRestart := func(id, phase string) {
		t.Helper()
		r := show(id)
		if r.State != StateInvalid || r.Reason != "daemon restart" || r.RerunBy == "" {
			t.Fatalf("killed %s, after restart: %+v", phase, r)
		}
		waitFor("the rerun of the run killed "+phase, func() bool { return show(r.RerunBy).Final() })
		rerun := show(r.RerunBy)
		if rerun.State != StateGraded || rerun.RerunOf != id {
			t.Errorf("rerun of the run killed %s: %+v", phase, rerun)
		}
		for _, rec := range []Record{r, rerun} {
			af, _ := os.Open(filepath.Join(rec.Dir, "audit.jsonl"))
			v, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), verifier,
				attest.WithReportDigest(sha(mustRead(t, filepath.Join(rec.Dir, "report.json")))), attest.WithAuditLog(af), attest.WithTrack(tb.track))
			af.Close()
			if err != nil {
				t.Errorf("%s (%s): %v", rec.ID, phase, err)
				continue
			}
			if p := v.Statement.Predicate; p.Run.ID != rec.ID || p.Run.RerunOf != rec.RerunOf || p.Result.Status != rec.State {
				t.Errorf("%s (%s): predicate run %+v result %s", rec.ID, phase, p.Run, p.Result.Status)
			}
		}
	}
	launch := func(seed string) string {
		return strings.TrimSpace(sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", seed, "--detach"))
	}
	finalizing := []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1))

	// 1. kill -9 while running, once the agent has submitted and promoted.
	current = start()
	id := launch("1")
	waitFor("the promotion", func() bool {
		return strings.Contains(string(readOr(filepath.Join(tb.state, "runs", id, "history.jsonl"))), `"kind":"promote"`)
	})
	if r := show(id); r.State != StateRunning {
		t.Fatalf("run is %s before the kill; want running\n%s", r.State, logs.String())
	}
	kill9()
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), finalizing, 0o755) // reruns finish at once
	current = start()
	afterRestart(id, "while running")

	// 2. kill -9 during grading: a bundle that hangs on the hidden exam's 7th question holds the
	// run in grading; its rerun gets a sound bundle.
	example := mustRead(t, "../grader/example/predict.py")
	hang := strings.Replace(string(example), "        req = json.loads(line)", "        req = json.loads(line)\n        if req[\"seq\"] >= 7:\n            import time; time.sleep(3600)", 1)
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), []byte(hang), 0o644)
	id2 := launch("2")
	waitFor("grading", func() bool { return show(id2).State == StateGrading })
	time.Sleep(time.Second)
	if st := show(id2).State; st != StateGrading {
		t.Fatalf("second run is %s; want grading", st)
	}
	kill9()
	os.WriteFile(filepath.Join(tb.kit, "predict.py"), example, 0o644)
	current = start()
	afterRestart(id2, "while grading")

	// 3. kill -9 while signing (held there by the test failpoint): no attestation was written
	// before the kill; after the restart the run has one saying invalid.
	current.Process.Signal(syscall.SIGTERM)
	current.Wait()
	os.Setenv("SEALRUND_TEST_HOLD", "sign")
	current = start()
	os.Unsetenv("SEALRUND_TEST_HOLD")
	id3 := launch("3")
	waitFor("the signing failpoint", func() bool {
		return strings.Contains(string(readOr(filepath.Join(tb.state, "journal.jsonl"))), `"run":"`+id3+`","kind":"hold"`)
	})
	kill9()
	if _, err := os.Stat(filepath.Join(tb.state, "runs", id3, "result.att.json")); err == nil {
		t.Fatalf("an attestation was written past the failpoint")
	}
	current = start()
	afterRestart(id3, "while signing")

	// Nothing of the killed runs is left: no container, no run of the host's run directory.
	if out, _ := exec.Command("runc", "list", "-q").Output(); strings.Contains(string(out), id) || strings.Contains(string(out), id2) || strings.Contains(string(out), id3) {
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
