package transcript_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/transcript"
)

// Every kind of audit record, written as its one type (package audit) that its writer uses, is
// read by every reader: the transcript (each its event, with what the record says), the bodies a
// gather checks (transcript.BodyRefs), the run's usage (attest.EntryTokens), report.html and the
// daemon's live activity lines (transcript.Activity). (The daemon's metrics read calls and
// requests through audit.Parse: TestMetricsReadTheAuditRecords.)
func TestEveryAuditRecordIsRead(t *testing.T) {
	r := newRun(t)
	cand := digest.Digest("sha256:" + strings.Repeat("c", 64))
	passed, value := 6, 0.875
	req, resp := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), []byte(`{"choices":[{"message":{"role":"assistant","content":"hello"}}]}`)
	if err := r.Exchange("/v1/chat/completions", req, resp, false, 200); err != nil { // audit.Gateway
		t.Fatal(err)
	}
	if err := r.Call([]string{"python3", "train.py"}, []byte("loss 0.1\n"), 0); err != nil { // audit.Call
		t.Fatal(err)
	}
	records := []struct {
		kind string
		body any
		want string // the event's text
	}{
		{audit.KindSubmit, audit.Submit{Candidate: cand, Size: 123, RawBytes: 456, Files: 3, Time: r.Now}, "submitted cccccccccccc (123 bytes gz, 3 files)"},
		{audit.KindSubmitRefused, audit.SubmitRefused{Dir: "/workspace/bad", Reason: "no predict.py", Time: r.Now}, "submission of /workspace/bad refused: no predict.py"},
		{audit.KindValidation, audit.Validation{Candidate: cand, Passed: &passed, Questions: 8, Outcomes: map[string]int{"pass": 6}, Time: r.Now}, "validation of cccccccccccc: 6/8 (75.0%)"},
		{audit.KindEvaluated, audit.Evaluated{Candidate: cand, Metric: "accuracy", Value: &value, ValidSubmission: true, Time: r.Now}, "evaluated cccccccccccc: accuracy 0.875"},
		{audit.KindPromote, audit.Promote{Candidate: cand, Time: r.Now}, "promoted cccccccccccc"},
		{audit.KindFinalize, audit.Finalize{Candidate: cand, Time: r.Now}, "finalized, promoted cccccccccccc"},
		{audit.KindSealed, audit.Sealed{Candidate: cand, PassVectorSHA256: digest.Hex(strings.Repeat("d", 64)), Passed: 5, Questions: 7, Time: r.Now}, "the hidden exam's pass vector sealed: 5/7"},
		{audit.KindTaskPrepare, audit.TaskPrepare{Script: "prepare.py", Exit: 0, Seconds: 1.5}, "the task's prepare.py: exit 0, 1.5 s"},
	}
	for _, rec := range records {
		if err := r.Record(rec.kind, rec.body); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// (events are on the run's time axis: the task's preparation, which has no time of its own,
	// comes first)
	byKind := map[string]transcript.Event{}
	for _, e := range tr.Events {
		if e.Seq > 0 {
			byKind[e.Kind] = e
		}
	}
	if len(byKind) != 2+len(records) {
		t.Fatalf("events %v; want the exchange, the call and each record", byKind)
	}
	if x := byKind[transcript.KindModel].Model; x == nil || x.Usage.Prompt != int64(len(req)/4) || x.Status != 200 || len(x.Tries) != 1 {
		t.Errorf("the gateway record, as the transcript reads it: %+v", x)
	}
	if c := byKind[transcript.KindCall].Call; c == nil || strings.Join(c.Argv, " ") != "python3 train.py" || c.Text != "loss 0.1\n" {
		t.Errorf("the call record, as the transcript reads it: %+v", c)
	}
	for _, rec := range records {
		if e := byKind[rec.kind]; e.Text != rec.want {
			t.Errorf("%s: event %q; want %q", rec.kind, e.Text, rec.want)
		}
	}
	if s := byKind[audit.KindSubmit].Submission; s == nil || s.Candidate != cand || s.Size != 123 || s.Files != 3 {
		t.Errorf("the submission, as the transcript reads it: %+v", s)
	}
	if s := byKind[audit.KindEvaluated].Submission; s == nil || s.Score == nil || *s.Score != value {
		t.Errorf("the evaluation, as the transcript reads it: %+v", s)
	}
	log, err := os.ReadFile(filepath.Join(r.Dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	refs, err := transcript.BodyRefs(bytes.NewReader(log))
	if err != nil || len(refs) != 3 {
		t.Errorf("BodyRefs: %v %v; want the request, the response and the call's log", refs, err)
	}
	var tokens int64
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		if tk, ok := attest.EntryTokens(line); ok {
			tokens += tk.Input
		}
	}
	if tokens != int64(len(req)/4) {
		t.Errorf("attest.EntryTokens: %d input tokens; want the gateway record's %d", tokens, len(req)/4)
	}

	// report.html: the call, the request and each of the grader's records on its timeline.
	h := header()
	page, err := transcript.RunPage(r.Dir, &attest.Predicate{Run: attest.RunInfo{ID: h.ID},
		Timeline: attest.Timeline{Started: h.Started, Deadline: h.Deadline, Finished: h.Finished}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"call 1: python3 train.py — exited, exit 0, 3s", "/v1/chat/completions m 200, 900 ms", "1 compute calls, 1 model requests",
		"submitted cccccccccccc", "refused: no predict.py", "validation of cccccccccccc: 6/8", "promote cccccccccccc", "finalize cccccccccccc", "pass vector sealed: 5/7"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html has no %q", want)
		}
	}

	// The live activity: each record a follower is shown, in the transcript's words.
	activity := map[string]string{
		audit.KindGateway: "model request 1 /v1/chat/completions: 200 in 900 ms, ", audit.KindCall: "call 1: python3 train.py — exited, exit 0, 3s",
		audit.KindSubmit: "submitted cccccccccccc", audit.KindSubmitRefused: "submission of /workspace/bad refused: no predict.py",
		audit.KindValidation: "validation of cccccccccccc: 6/8", audit.KindPromote: "promoted cccccccccccc",
		audit.KindFinalize: "finalized, promoted cccccccccccc",
	}
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		env, _, err := audit.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		got := transcript.Activity(env.Kind, line)
		if want, ok := activity[env.Kind]; !strings.HasPrefix(got, want) || ok != (got != "") {
			t.Errorf("the activity line of a %s record: %q; want %q", env.Kind, got, want)
		}
	}
}
