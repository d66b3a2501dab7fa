package transcript_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/transcript"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.sha256 from what the code makes now")

// The bytes a run's readers make of one fixed run (every kind of audit record, a failed call and
// a refused model request among them): the transcript's JSON, its page, report.html. A change
// of code that says it changes no behaviour (a record read through another type, a text written
// by another function) keeps them; one that means to change them rewrites testdata/golden.sha256
// with -update, and says so.
func TestGoldenBytes(t *testing.T) {
	r := newRun(t)
	cand := digest.Digest("sha256:" + strings.Repeat("e", 64))
	passed, value := 3, 0.5
	req, resp := []byte(`{"model":"m","messages":[{"role":"user","content":"train it"}]}`), []byte(`{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	steps := []func() error{
		func() error { return r.Exchange("/v1/chat/completions", req, resp, false, 200) },
		func() error { return r.Exchange("/v1/chat/completions", req, []byte(`{"error":"busy"}`), false, 529) },
		func() error {
			return r.Call([]string{"python3", "train.py", "--epochs", "3"}, []byte("epoch 1\nloss 0.2\n"), 0)
		},
		func() error { return r.Call([]string{"python3", "eval.py"}, []byte("Traceback\n"), 1) },
		func() error {
			return r.Record(audit.KindSubmit, audit.Submit{Candidate: cand, Size: 2048, RawBytes: 9000, Files: 4, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindSubmitRefused, audit.SubmitRefused{Dir: "/workspace/x", Reason: "no predict.py", Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindValidation, audit.Validation{Candidate: cand, Passed: &passed, Questions: 4, Outcomes: map[string]int{"pass": 3, "wrong": 1}, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindEvaluated, audit.Evaluated{Candidate: cand, Metric: "accuracy", Value: &value, ValidSubmission: true, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindPromote, audit.Promote{Candidate: cand, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindFinalize, audit.Finalize{Candidate: cand, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindSealed, audit.Sealed{Candidate: cand, PassVectorSHA256: digest.Hex(strings.Repeat("f", 64)), Passed: 3, Questions: 5, Time: r.Now})
		},
		func() error {
			return r.Record(audit.KindTaskPrepare, audit.TaskPrepare{Script: "prepare.py", Exit: 0, Seconds: 1.25})
		},
		func() error {
			return r.Record(audit.KindAttach, audit.Attach{Time: r.Now, Offset: "30s", Event: audit.AttachWatch, User: "root (uid 0, pid 9) as operator"})
		},
		func() error {
			return r.Record(audit.KindPause, audit.Pause{Time: r.Now, Event: audit.PauseStart, By: "root", Reason: "fire drill", For: "5m0s", Left: "10m0s"})
		},
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	js, err := transcript.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, tr, transcript.PageOptions{}); err != nil {
		t.Fatal(err)
	}
	h := header()
	pred := &attest.Predicate{Track: attest.TrackInfo{Name: "ari", Version: "1"}, Seed: 1, Run: attest.RunInfo{ID: h.ID},
		Timeline: attest.Timeline{Queued: start, Started: start, Deadline: h.Deadline, Finished: h.Finished},
		Result:   attest.Result{Status: "graded", Questions: 5, Passed: 3, Score: 60}}
	report, err := transcript.RunPage(r.Dir, pred)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, f := range []struct {
		name string
		b    []byte
	}{{"transcript.json", js}, {"page.html", page.Bytes()}, {"report.html", report}} {
		s := sha256.Sum256(f.b)
		fmt.Fprintf(&got, "%s  %s\n", hex.EncodeToString(s[:]), f.name)
	}
	golden := filepath.Join("testdata", "golden.sha256")
	if *update {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (make it with go test -run TestGoldenBytes -update)", err)
	}
	if got.String() != string(want) {
		t.Errorf("the run's readers make other bytes than %s:\n got\n%s\nwant\n%s", golden, got.String(), want)
	}
}
