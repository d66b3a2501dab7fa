package leaderboard

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/attest"
	sdigest "github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// taskAttestation signs one run of the shipped AIRS task's track: value nil with invalid set is
// a graded run whose submission yields no number; status failed or invalid as for exam runs.
func (f *fixture) taskAttestation(track *policy.Track, model, id string, status string, value *float64, invalid string) []byte {
	p := f.base
	tp := attest.PredicateFromTrack(track)
	p.Track, p.Exam, p.Kit, p.Task, p.Images, p.Scaffold, p.Budget = tp.Track, tp.Exam, tp.Kit, tp.Task, tp.Images, tp.Scaffold, tp.Budget
	worst := 0.1
	p.Task.Metric, p.Task.SOTA, p.Task.Optimal, p.Task.Worst = "Accuracy", 0.99, 1, &worst
	p.Agent = attest.Agent{Model: model, ReasoningEffort: "high"}
	p.Run = attest.RunInfo{ID: id}
	start := time.Date(2026, 11, 21, 12, 0, 10, 0, time.UTC)
	p.Timeline = attest.Timeline{Queued: start, Started: start, Deadline: start.Add(track.Budget.Wall), Finished: start.Add(track.Budget.Wall + time.Minute)}
	bundle := digest(id)
	p.Submissions.History = []attest.Submission{{Digest: sdigest.Digest("sha256:" + bundle), Size: 300, Time: start.Add(time.Minute), Promoted: status == "graded"}}
	p.Submissions.Head, _ = attest.HistoryHead(p.Submissions.History)
	p.Result = attest.Result{Status: outcome.Outcome(status), Value: value, ValidSubmission: value != nil, Invalid: invalid}
	switch status {
	case "failed":
		p.Result.Reason = "no candidate was promoted"
	case "invalid":
		p.Result.Reason = "daemon restart"
	}
	subjects := []attest.Subject{attest.NewSubject(attest.SubjectReport, digest("report "+id))}
	if status == "graded" {
		subjects = append(subjects, attest.NewSubject(attest.SubjectBundle, bundle))
	}
	return edSigner{f.t, f.key}.sign(attest.NewStatement(&p, subjects...))
}

// The AIRS board from signed task attestations, with values computed by hand:
//
//	alpha  0.95 0.96 0.94    NS (march of 9s, s_min = 0.90 observed, SOTA 0.99: φ = 1 and 2)
//	                         = 0.30103, 0.39794, 0.22185; mean 0.30694; valid rate 1
//	beta   0.90, an invalid submission, a failed run: NS 0, 0, 0; valid rate 1/3
//	       and an invalid run (left out, listed); an exam run beside them is skipped.
func TestAIRSBoard(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	track := loadTrack(t, "../tracks/airs-digits.toml", nil)
	v := func(x float64) *float64 { return &x }
	f.write("a1.att.json", f.taskAttestation(track, "openai/alpha", "a1", "graded", v(0.95), ""))
	f.write("a2.att.json", f.taskAttestation(track, "openai/alpha", "a2", "graded", v(0.96), ""))
	f.write("a3.att.json", f.taskAttestation(track, "openai/alpha", "a3", "graded", v(0.94), ""))
	f.write("b1.att.json", f.taskAttestation(track, "openai/beta", "b1", "graded", v(0.90), ""))
	f.write("b2.att.json", f.taskAttestation(track, "openai/beta", "b2", "graded", nil, "evaluate.py exited 2: row count"))
	f.write("b3.att.json", f.taskAttestation(track, "openai/beta", "b3", "failed", nil, ""))
	f.write("b4.att.json", f.taskAttestation(track, "openai/beta", "b4", "invalid", nil, ""))
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	f.write("exam.att.json", f.attestation(runSpec{track: ari, model: "openai/alpha", effort: "high", seed: 1, id: "e1", status: "graded", passed: 50}))
	b, in, keys := airsBoard(t, f.dir)
	if len(b.Tasks) != 1 || b.Tasks[0].Min == nil || *b.Tasks[0].Min != 0.9 || b.Tasks[0].MinSource != airs.MinFromRuns || len(b.Invalid) != 1 || len(b.Rejected) != 0 {
		t.Fatalf("tasks %+v invalid %+v rejected %+v", b.Tasks, b.Invalid, b.Rejected)
	}
	if len(b.Agents) != 3 || b.Agents[2].Name != airs.SOTAPlayer {
		t.Fatalf("agents %+v", b.Agents)
	}
	alpha, beta := b.Agents[0], b.Agents[1]
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-4 }
	want := (math.Log10(1/0.05) + math.Log10(1/0.04) + math.Log10(1/0.06) - 3) / 3
	if !strings.Contains(alpha.Name, "alpha") || !near(alpha.MeanNS, want) || !near(alpha.VSR, 1) || alpha.Runs != 3 {
		t.Errorf("alpha %+v; want mean NS %.5f", alpha, want)
	}
	if !strings.Contains(beta.Name, "beta") || beta.MeanNS != 0 || !near(beta.VSR, 1.0/3) || beta.Runs != 3 {
		t.Errorf("beta %+v", beta)
	}
	if !(b.Agents[2].Elo > alpha.Elo && alpha.Elo > beta.Elo) || alpha.EloCI[0] > alpha.Elo || alpha.EloCI[1] < alpha.Elo {
		t.Errorf("Elo: SOTA %.0f alpha %.0f %v beta %.0f", b.Agents[2].Elo, alpha.Elo, alpha.EloCI, beta.Elo)
	}
	if c := alpha.PerTask["DigitsClassificationAccuracy"]; c.Valid != 3 || c.MeanRaw == nil || !near(*c.MeanRaw, 0.95) {
		t.Errorf("alpha's cell %+v", c)
	}
	skippedExam := false
	for _, s := range b.Skipped {
		skippedExam = skippedExam || strings.Contains(s.Reason, "an exam run")
	}
	if !skippedExam {
		t.Errorf("the exam run was not skipped: %+v", b.Skipped)
	}
	var text, md, js bytes.Buffer
	for _, o := range []struct {
		w      *bytes.Buffer
		format string
	}{{&text, "text"}, {&md, "markdown"}, {&js, "json"}} {
		if err := b.Render(o.w, o.format); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", text.String())
	for _, s := range []string{"AIRS-Bench suite: 1 task(s), 2 agent(s), 6 counted run(s), 1 invalid", "march-of-9s", "s_min 0.9 (worst observed)", "MEAN ACCURACY", "b4", "daemon restart"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the text board lacks %q", s)
		}
	}
	if !strings.Contains(md.String(), "| NS RANK | AGENT |") {
		t.Errorf("markdown:\n%s", md.String())
	}
	var doc struct {
		Format string
		Agents []struct {
			MeanNS float64 `json:"mean_normalized_score"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc.Format != AIRSFormat || !near(doc.Agents[0].MeanNS, want) {
		t.Errorf("json: %v %+v", err, doc)
	}
	if err := b.Render(&text, "html"); err == nil {
		t.Error("html for the AIRS board")
	}
	// The identity transform says so in the rules, and scores linearly: (0.95 − 0.9) / (0.99 − 0.9).
	ib, err := BuildAIRS(in, keys, airs.Options{Transform: airs.Identity})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(ib.Rules, "\n"), "the identity transform") || strings.Contains(strings.Join(ib.Rules, "\n"), "march of 9s") ||
		!near(ib.Agents[0].PerTask["DigitsClassificationAccuracy"].MeanNS, (0.05/0.09+0.06/0.09+0.04/0.09)/3) {
		t.Errorf("identity: rules %q, alpha %+v", ib.Rules, ib.Agents[0])
	}
	// The exam board skips the task runs.
	eb := Build(in, keys)
	if len(eb.Tables) != 1 || eb.Tables[0].Track.Name != "ari-v1" {
		t.Errorf("the exam board has %d tables", len(eb.Tables))
	}
}

// amendAttestation signs an amendment of the run whose signed envelope is env, with the
// fixture's key.
func (f *fixture) amendAttestation(env []byte, a attest.Amendment) []byte {
	f.t.Helper()
	run, err := attest.ReadUnverified(env)
	if err != nil {
		f.t.Fatal(err)
	}
	var e struct{ Payload string }
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	a.Run, a.Time, a.Ledger = run.Predicate.Run.ID, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), "sealrun.ledger/airs-host"
	st, err := attest.NewAmendment(run, sdigest.SumHex(payload), a)
	if err != nil {
		f.t.Fatal(err)
	}
	signer, err := attest.LoadSigner(context.Background(), f.key, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	out, _, err := attest.SignAmendment(context.Background(), st, signer)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// The AIRS board applies amendments as the exam board does: an invalidated run leaves the
// scores and is listed among the invalid runs with its reason; a noted or legacy run is counted
// and listed with them; the rule is printed.
func TestAIRSBoardAmended(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	track := loadTrack(t, "../tracks/airs-digits.toml", nil)
	v := func(x float64) *float64 { return &x }
	a1 := f.taskAttestation(track, "openai/alpha", "a1", "graded", v(0.95), "")
	a2 := f.taskAttestation(track, "openai/alpha", "a2", "graded", v(0.99), "")
	f.write("a1.att.json", a1)
	f.write("a2.att.json", a2)
	f.write("b1.att.json", f.taskAttestation(track, "openai/beta", "b1", "graded", v(0.90), ""))
	f.write("a2-amended.att.json", f.amendAttestation(a2, attest.Amendment{Action: "invalidate", Reason: "the evaluation data leaked into the workspace", Link: "https://example.org/r/1"}))
	f.write("a1-noted.att.json", f.amendAttestation(a1, attest.Amendment{Action: "note", Reason: "a contamination report under review"}))
	// Without the runs' track (not given, not beside them), an amendment cannot be judged: the
	// track says whether it needs a reviewer's signature too.
	if b, _, _ := airsBoard(t, f.dir); len(b.Rejected) != 2 || len(b.Invalid) != 0 || !strings.Contains(b.Rejected[0].Reason, "is neither given (--track) nor beside the run") {
		t.Errorf("amendments of a track not given: invalid %+v rejected %+v", b.Invalid, b.Rejected)
	}
	b, _, _ := airsBoard(t, f.dir, track)
	if len(b.Invalid) != 1 || b.Invalid[0].ID != "a2" || b.Invalid[0].Reason != "invalidated by amendment: the evaluation data leaked into the workspace" || len(b.Rejected) != 0 {
		t.Fatalf("invalid %+v rejected %+v", b.Invalid, b.Rejected)
	}
	if len(b.Amended) != 1 || b.Amended[0].ID != "a1" || b.Amended[0].Amendments[0].Action != "note" {
		t.Errorf("amended %+v", b.Amended)
	}
	if alpha := b.Agents[0]; !strings.Contains(alpha.Name, "alpha") || alpha.Runs != 1 {
		t.Errorf("alpha counts %d runs; the invalidated one left: %+v", alpha.Runs, alpha)
	}
	var text bytes.Buffer
	b.Render(&text, "text")
	for _, s := range []string{"a2  ", "invalidated by amendment: the evaluation data leaked", "Amended runs (counted; sealrun amend)", "note 2026-12-01: a contamination report under review", "Amendments (sealrun amend"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the text board lacks %q:\n%s", s, text.String())
		}
	}
}

// airsBoard is the AIRS board of the attestations in dir, verified with the test key (and the
// tracks, pinned, where given), and what it was built from.
func airsBoard(t *testing.T, dir string, tracks ...*policy.Track) (*AIRSBoard, *Inputs, []Key) {
	t.Helper()
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Load([]string{dir}, keys, tracks)
	if err != nil {
		t.Fatal(err)
	}
	b, err := BuildAIRS(in, keys, airs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b, in, keys
}
