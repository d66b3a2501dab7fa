package daemon

// Phase 7 of a run, record: the run's end goes into the host's ledger with the digest of its
// signed statement, summary.txt, report.html, transcript.json and transcript.html are written,
// and followers are told the result and the end state (which the journal records).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/transcript"
)

// record records the run's end once its attestation is written.
func (rs *runState) record(st *attest.Statement, pred *attest.Predicate) error {
	x, spec, out := rs.x, rs.spec, rs.out
	payload, err := st.Canonical()
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	if err := x.ledgerEnded(spec.ID, out.Status, out.Reason, hex.EncodeToString(sum[:])); err != nil {
		return fmt.Errorf("the ledger's end of run %s: %w", spec.ID, err)
	}
	x.writeSummary(rs.io.dir, spec, out, pred)
	// report.html from the signed predicate and the audit log alone: a reader regenerates it
	// byte for byte (verify.Publication).
	if err := transcript.WriteRunPage(rs.io.dir, pred); err != nil {
		x.event(spec.ID, api.EventReportHTMLFailed, err.Error())
	}
	// The transcript is read from the audit log and the bodies it hashes, which the attestation
	// binds: a transcript that cannot be written loses nothing (sealrun transcript makes it
	// again from the same files), so it is an event, not the run's end.
	if err := writeTranscript(rs.io.dir, pred); err != nil {
		x.event(spec.ID, api.EventTranscriptFailed, err.Error())
	}
	result := map[string]any{"passed": pred.Result.Passed, "questions": pred.Result.Questions, "attestation": out.Attestation}
	if pred.Task != nil {
		result = map[string]any{"metric": pred.Task.Metric, "value": pred.Result.Value, "valid_submission": pred.Result.ValidSubmission, "attestation": out.Attestation}
	}
	x.emit(api.Event{Run: spec.ID, Kind: api.EventResult, Data: mustJSON(result)})
	x.state(spec.ID, string(out.Status), out.Reason)
	return nil
}

func (x *Executor) writeSummary(dir string, spec RunSpec, out *Outcome, p *attest.Predicate) {
	var b strings.Builder
	fmt.Fprintf(&b, "run        %s\n", spec.ID)
	fmt.Fprintf(&b, "track      %s %s (%s)\n", spec.Track.Name, spec.Track.Version, spec.Track.ID)
	fmt.Fprintf(&b, "agent      %s, seed %d\n", spec.Agent.String(), spec.Seed)
	fmt.Fprintf(&b, "status     %s", out.Status)
	if out.Reason != "" {
		fmt.Fprintf(&b, " (%s)", out.Reason)
	}
	if p.Task != nil {
		fmt.Fprintf(&b, "\ntask       %s (%s)\n", p.Task.Name, p.Task.SHA256)
		fmt.Fprintf(&b, "metric     %s\n", p.MetricText())
	} else {
		fmt.Fprintf(&b, "\nscore      %d/%d = %.2f%%\n", p.Result.Passed, p.Result.Questions, p.Result.Score)
	}
	fmt.Fprintf(&b, "candidates %d\n", len(p.Submissions.History))
	fmt.Fprintf(&b, "audit      %d entries, head %s\n", p.Audit.Entries, p.Audit.Head)
	fmt.Fprintf(&b, "verify     sealrun verify %s --key PUB --bundle <candidate> --report %s --audit %s\n",
		filepath.Join(dir, "result.att.json"), filepath.Join(dir, "report.json"), filepath.Join(dir, "audit.jsonl"))
	fileio.WriteAtomic(filepath.Join(dir, "summary.txt"), 0o644, func(w io.Writer) error { _, err := io.WriteString(w, b.String()); return err })
}
