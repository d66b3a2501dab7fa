package attest

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

func loadTaskTrack(t testing.TB) *policy.Track {
	t.Helper()
	tr, err := policy.Load(filepath.Join("..", "tracks", "airs-digits.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// taskFixture is a graded run of the shipped AIRS task: accuracy 0.95 on its promoted
// submission, three submissions, no validation scores.
func taskFixture(t testing.TB) (*Statement, string) {
	t.Helper()
	st, _ := fixture(t, 3, 10)
	p := PredicateFromTrack(loadTaskTrack(t))
	old := st.Predicate
	p.Agent, p.Host, p.AirGap, p.Timeline, p.Audit, p.Seed, p.Run = old.Agent, old.Host, old.AirGap, old.Timeline, old.Audit, old.Seed, old.Run
	p.Timeline.Deadline = p.Timeline.Started.Add(20 * time.Minute)
	p.Timeline.Finished = p.Timeline.Deadline.Add(time.Minute)
	worst := 0.1
	p.Task.Metric, p.Task.SOTA, p.Task.Optimal, p.Task.Worst = "Accuracy", 0.99, 1, &worst
	var bundle string
	for i := range 3 {
		d := sum(string(rune('a' + i)))
		p.Submissions.History = append(p.Submissions.History, Submission{Digest: digest.Digest("sha256:" + d), Size: 900, Time: p.Timeline.Started.Add(time.Duration(1+2*i) * time.Minute), Promoted: i == 1})
		if i == 1 {
			bundle = d
		}
	}
	p.Submissions.Head, _ = HistoryHead(p.Submissions.History)
	v := 0.95
	p.Result = Result{Status: outcome.Graded, Value: &v, ValidSubmission: true}
	return NewStatement(p, NewSubject(SubjectBundle, bundle), NewSubject(SubjectReport, sum("task report"))), bundle
}

// A task run is attested under its own predicate type, with task in place of exam and kit and
// its metric as the result; it verifies against its task track and validates against the
// published task schema, and not against the exam track or the exam schema.
func TestTaskPredicate(t *testing.T) {
	st, bundle := taskFixture(t)
	if st.PredicateType != PredicateTypeTaskV1 {
		t.Fatalf("predicate type %s", st.PredicateType)
	}
	env := sign(t, st, "ed25519")
	got, err := Verify(env, verifier(t, "ed25519"), WithBundleDigest(bundle), WithReportDigest(sum("task report")), WithTrack(loadTaskTrack(t)))
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Statement.Predicate.Result; r.Value == nil || *r.Value != 0.95 || got.Statement.Predicate.Task.Metric != "Accuracy" {
		t.Errorf("verified result %+v task %+v", r, got.Statement.Predicate.Task)
	}
	canon, _ := st.Canonical()
	if !bytes.Equal(got.Payload, canon) {
		t.Error("verified payload is not the canonical statement")
	}
	for _, absent := range []string{`"exam"`, `"kit"`, `"questions"`, `"pass_vector_sha256"`} {
		if bytes.Contains(canon, []byte(absent)) {
			t.Errorf("a task statement has %s:\n%s", absent, canon)
		}
	}
	for _, present := range []string{`"task":{`, `"value":0.95`, `"valid_submission":true`, `"invalid_submission":""`} {
		if !bytes.Contains(canon, []byte(present)) {
			t.Errorf("a task statement lacks %s", present)
		}
	}
	if _, err := Verify(env, verifier(t, "ed25519"), WithTrack(loadTrack(t))); reason(t, err) != ReasonTrack {
		t.Errorf("against the exam track: %v", err)
	}
	exam, _ := fixture(t, 2, 3)
	if _, err := Verify(sign(t, exam, "ed25519"), verifier(t, "ed25519"), WithTrack(loadTaskTrack(t))); reason(t, err) != ReasonTrack {
		t.Errorf("an exam run against the task track: %v", err)
	}
	// The kind itself is checked, not only the track id: the task track with its [task] taken
	// away (same id) refuses the task run.
	noTask := *loadTaskTrack(t)
	noTask.Task = nil
	if _, err := Verify(env, verifier(t, "ed25519"), WithTrack(&noTask)); reason(t, err) != ReasonTrack || !strings.Contains(err.Error(), "is an exam track") {
		t.Errorf("a task run against an exam track of the same id: %v", err)
	}

	// The schema.
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	taskSchema, err := c.Compile("task-predicate.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Predicate json.RawMessage }
	json.Unmarshal(canon, &doc)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(doc.Predicate))
	if err := taskSchema.Validate(inst); err != nil {
		t.Errorf("task schema: %v", err)
	}
	if err := compileSchema(t).Validate(inst); err == nil {
		t.Error("the exam schema accepted a task predicate")
	}
	examCanon, _ := exam.Canonical()
	json.Unmarshal(examCanon, &doc)
	inst, _ = jsonschema.UnmarshalJSON(bytes.NewReader(doc.Predicate))
	if err := taskSchema.Validate(inst); err == nil {
		t.Error("the task schema accepted an exam predicate")
	}
}

// Every inconsistent task predicate is refused, naming the field.
func TestTaskPredicateInconsistent(t *testing.T) {
	v := 0.9
	nan := math.NaN()
	for _, c := range []struct {
		name, field string
		edit        func(p *Predicate)
	}{
		{"value without valid", "result.valid_submission", func(p *Predicate) { p.Result.ValidSubmission = false; p.Result.Invalid = "x" }},
		{"valid without value", "result.valid_submission", func(p *Predicate) { p.Result.Value = nil }},
		{"invalid submission without why", "result.invalid_submission", func(p *Predicate) { p.Result.Value, p.Result.ValidSubmission = nil, false }},
		{"NaN value", "result.value", func(p *Predicate) { p.Result.Value = &nan }},
		{"value in a failed run", "result.valid_submission", func(p *Predicate) { p.Result.Status, p.Result.Reason, p.Result.Value = outcome.Failed, "x", &v }},
		{"exam fields", "result", func(p *Predicate) { p.Result.Questions = 100 }},
		{"an exam as well", "task", func(p *Predicate) { p.Exam = ExamInfo{SHA256: digest.Hex(sum("e")), Questions: 3} }},
		{"no metric", "task.metric", func(p *Predicate) { p.Task.Metric = "" }},
		{"bad task hash", "task.sha256", func(p *Predicate) { p.Task.SHA256 = "x" }},
		{"bad kind", "task.kind", func(p *Predicate) { p.Task.Kind = "kaggle" }},
		{"infinite sota", "task.sota_score", func(p *Predicate) { p.Task.SOTA = math.Inf(1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := taskFixture(t)
			c.edit(st.Predicate)
			err := CheckPredicate(st.Predicate, st.Subject)
			if reason(t, err) != ReasonPredicate || !strings.Contains(err.Error(), c.field+":") {
				t.Errorf("got %v, want a predicate failure naming %s", err, c.field)
			}
		})
	}
	// Task fields in an exam run's result are refused too.
	st, _ := fixture(t, 2, 3)
	st.Predicate.Result.Value = &v
	if err := CheckPredicate(st.Predicate, st.Subject); reason(t, err) != ReasonPredicate {
		t.Errorf("an exam result with a value: %v", err)
	}
}

// A signed task predicate relabelled with the exam predicate type (or the reverse) is refused:
// one predicate type, one shape.
func TestTaskPredicateTypeSwap(t *testing.T) {
	st, _ := taskFixture(t)
	canon, _ := st.Canonical()
	swapped := bytes.Replace(canon, []byte(PredicateTypeTaskV1), []byte(PredicateTypeV1), 1)
	if _, err := Verify(resign(t, PayloadType, swapped), verifier(t, "ed25519")); reason(t, err) != ReasonPredicateType {
		t.Errorf("task predicate as an exam one: %v", err)
	}
	exam, _ := fixture(t, 2, 3)
	canon, _ = exam.Canonical()
	swapped = bytes.Replace(canon, []byte(PredicateTypeV1), []byte(PredicateTypeTaskV1), 1)
	if _, err := Verify(resign(t, PayloadType, swapped), verifier(t, "ed25519")); reason(t, err) != ReasonPredicateType {
		t.Errorf("exam predicate as a task one: %v", err)
	}
	if _, err := Sign(t.Context(), &Statement{Type: StatementType, PredicateType: PredicateTypeV1, Predicate: st.Predicate, Subject: st.Subject}, signer(t, "ed25519")); err == nil {
		t.Error("Sign took a task predicate under the exam type")
	}
}
