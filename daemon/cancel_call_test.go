package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/transcript"
)

// A run cancelled while a compute call runs ends with that call in its audit log before the
// end reads it: the attestation's audit head, transcript.json and a gather agree. (The call's
// entry used to be appended after the run's end, once its container was killed: the transcript
// missed it, and no gather of the run ever checked; a fresh CI's scancelled Slurm job met it.)
func TestCancelMidCall(t *testing.T) {
	tb := newTestbed(t)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte("runner python3 -c 'import time; print(\"long call\", flush=True); time.sleep(30)'\nsleep 600\n"), 0o755)
	rd := newRealDaemon(t, tb)
	rd.start()
	id := rd.launch("6")
	rec := rd.show(id)
	rd.waitFor("the call to run", func() bool {
		logs, _ := filepath.Glob(filepath.Join(rd.show(id).Dir, "calls", "*.log"))
		for _, l := range logs {
			if b, _ := os.ReadFile(l); strings.Contains(string(b), "long call") {
				return true
			}
		}
		return false
	})
	rd.sealrun("cancel", id)
	rd.waitFor("the run to end", func() bool { rec = rd.show(id); return rec.Final() })
	if rec.State != api.StateInvalid || rec.Reason != "cancelled" {
		t.Errorf("cancelled mid-call: %s (%s)", rec.State, rec.Reason)
	}
	env := mustRead(t, filepath.Join(rec.Dir, "result.att.json"))
	st, err := attest.ReadUnverified(env)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Read(filepath.Join(rec.Dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Totals.Calls != 1 || tr.Run.AuditHead != st.Predicate.Audit.Head {
		t.Errorf("transcript.json: %d calls, audit head %q; want the cut-short call, and the attestation's head %q", tr.Totals.Calls, tr.Run.AuditHead, st.Predicate.Audit.Head)
	}
	if _, err := client.New(rd.sock).Gather(context.Background(), rec, t.TempDir()); err != nil {
		t.Errorf("gather of the run cancelled mid-call: %v", err)
	}
}
