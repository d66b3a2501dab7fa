package audit

import (
	"encoding/json"
	"github.com/sealrun/sealrun/digest"
	"testing"
	"time"
)

// The grader's and the daemon's records were written from maps (their keys in sorted order, every
// key present but "dir" of an exam's submission and "invalid" of a valid evaluation): each record
// type writes exactly those bytes, so that an audit log keeps its format.
func TestRecordsKeepTheirBytes(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	passed, value := 7, 0.25
	cand := digest.Digest("sha256:" + "ab12")
	for _, tc := range []struct {
		name   string
		record any
		old    map[string]any
	}{
		{"submit", Submit{Candidate: cand, Size: 10, RawBytes: 30, Files: 2, Time: now},
			map[string]any{"candidate": cand, "size": int64(10), "raw_bytes": int64(30), "files": 2, "time": now}},
		{"task submit", Submit{Candidate: cand, Size: 10, RawBytes: 30, Files: 2, Dir: "/workspace/sub", Time: now},
			map[string]any{"candidate": cand, "size": int64(10), "raw_bytes": int64(30), "files": 2, "dir": "/workspace/sub", "time": now}},
		{"submit_refused", SubmitRefused{Dir: "/workspace/x", Reason: "no predict.py", Time: now},
			map[string]any{"dir": "/workspace/x", "reason": "no predict.py", "time": now}},
		{"validation", Validation{Candidate: cand, Passed: &passed, Questions: 9, Outcomes: map[string]int{"pass": 7, "wrong": 2}, Time: now},
			map[string]any{"candidate": cand, "passed": passed, "questions": 9, "outcomes": map[string]int{"pass": 7, "wrong": 2}, "time": now}},
		{"promote", Promote{Candidate: cand, Time: now}, map[string]any{"candidate": cand, "time": now}},
		{"finalize", Finalize{Time: now}, map[string]any{"candidate": "", "time": now}},
		{"sealed", Sealed{Candidate: cand, PassVectorSHA256: "cd34", Passed: 7, Questions: 9, Time: now},
			map[string]any{"candidate": cand, "pass_vector_sha256": "cd34", "passed": 7, "questions": 9, "time": now}},
		{"evaluated", Evaluated{Candidate: cand, Metric: "accuracy", Value: &value, ValidSubmission: true, Time: now},
			map[string]any{"candidate": cand, "metric": "accuracy", "value": &value, "valid_submission": true, "time": now}},
		{"evaluated, invalid", Evaluated{Candidate: cand, Metric: "accuracy", Invalid: "NaN", Time: now},
			map[string]any{"candidate": cand, "metric": "accuracy", "value": (*float64)(nil), "valid_submission": false, "invalid": "NaN", "time": now}},
		{"task_prepare", TaskPrepare{Script: "prepare.py", Exit: 1, Seconds: 2.5, TimedOut: true, OOM: false},
			map[string]any{"script": "prepare.py", "exit": 1, "seconds": 2.5, "timed_out": true, "oom": false}},
	} {
		got, _ := json.Marshal(tc.record)
		want, _ := json.Marshal(tc.old)
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// KindOf reads the kind of a line as Append writes it, and nothing else: a line in another form,
// or one that repeats "kind" (JSON takes the last), is left to Parse, which agrees with it
// wherever both read.
func TestKindOf(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir + "/audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var lines [][]byte
	l.OnAppend(func(_ string, line []byte) { lines = append(lines, append([]byte(nil), line...)) })
	for _, r := range []Record{Submit{Candidate: "sha256:ab"}, Call{Call: 1}, SubmitRefused{Reason: `"kind":"call"`}, Pause{Event: PauseStart}} {
		if _, _, err := l.Append(r.Kind(), r); err != nil {
			t.Fatal(err)
		}
	}
	for i, line := range lines {
		kind, ok := KindOf(line)
		e, rec, err := Parse(line)
		k2, rec2, err2 := ParseRecord(line)
		if !ok || kind != e.Kind || err != nil || err2 != nil || k2 != kind || rec.Kind() != rec2.Kind() {
			t.Errorf("line %d %s: KindOf %q %v; Parse %q %v; ParseRecord %q %v", i+1, line, kind, ok, e.Kind, err, k2, err2)
		}
	}
	for _, line := range []string{
		`{"seq":1,"prev":"","kind":"call","kind":"submit","candidate":"x"}`, // repeated: JSON says submit
		`{"prev":"","seq":1,"kind":"call"}`,                                 // another order
		`{"seq":1,"prev":"","kind":"Call"}`, `{"seq":,"prev":"","kind":"call"}`, `{"seq":1,"prev":"","kind":"call`, `{"seq":1,"prev":"","kind":""}`,
	} {
		if k, ok := KindOf([]byte(line)); ok {
			t.Errorf("KindOf(%s) = %q: a line not as Append writes it", line, k)
		}
	}
	k, rec, err := ParseRecord([]byte(`{"seq":1,"prev":"","kind":"call","kind":"submit","candidate":"sha256:ab"}`))
	if err != nil || k != KindSubmit || rec.Kind() != KindSubmit {
		t.Errorf("a repeated kind: ParseRecord %q %v %v; JSON takes the last (submit)", k, rec, err)
	}
}
