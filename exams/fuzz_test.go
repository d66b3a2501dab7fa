package exams

import (
	"bytes"
	"errors"
	"github.com/sealrun/sealrun/digest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkRead is the invariant of both input parsers: either questions that satisfy every rule,
// or an *InvalidInputError with problems; never a panic.
func checkRead(t *testing.T, qs []Question, err error, c int) {
	if err != nil {
		var ie *InvalidInputError
		if !errors.As(err, &ie) || len(ie.Problems) == 0 {
			t.Fatalf("error is not an *InvalidInputError with problems: %v", err)
		}
		return
	}
	ids := map[string]bool{}
	for _, q := range qs {
		if ids[q.ID] || checkID(q.ID) != "" || len(q.Prefix) == 0 || len(q.Prefix) > c || len(q.Answer) == 0 || len(q.Answer) > DefaultMaxAnswerBytes {
			t.Fatalf("accepted a question that breaks a rule: %+v", q)
		}
		ids[q.ID] = true
	}
	// What was accepted builds, and the build reads back identically.
	var buf bytes.Buffer
	sum, err := Encode(&buf, qs, c)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := Decode("fuzz", &buf, digest.Hex(sum))
	if err != nil {
		t.Fatalf("built exam does not read back: %v", err)
	}
	for i := range qs {
		if ex.Questions[i].ID != qs[i].ID || !bytes.Equal(ex.Questions[i].Prefix, qs[i].Prefix) || !bytes.Equal(ex.Questions[i].Answer, qs[i].Answer) {
			t.Fatalf("question %d changed in the round trip", i)
		}
	}
}

func FuzzReadQuestions(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "small-questions.jsonl")); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"", "{}", "null", `{"id":"a","prefix":"x","answer":"y","answer":"z"}`, `{"id":"a","prefix_b64":"eA==","answer":"\ud800"}`, "{\"id\":\"\xff\"}", `[{"id":1}]`, `{"id":"a","prefix":"x","answer":"y"}` + "\n" + `{"id":"a","prefix":"x","answer":"y"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := ReadQuestions("fuzz", bytes.NewReader(data), WithContextBytes(32))
		checkRead(t, qs, err, 32)
	})
}

func FuzzReadDocuments(f *testing.F) {
	var buf bytes.Buffer
	WriteDocuments(&buf, Synthesize(3, 6))
	f.Add(buf.Bytes())
	for _, s := range []string{`{"id":"d","text":"abc","answers":[[1,2],[2,3]]}`, `{"id":"d","text":"abc","answers":[[1,2,3]]}`, `{"id":"d","text":"é","answers":[[1,2]]}`, `{"id":"d","text":"abc","answers":[[1e3,2]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		qs, err := ReadDocuments("fuzz", bytes.NewReader(data), WithContextBytes(8))
		checkRead(t, qs, err, 8)
	})
}

// FuzzDecode: the built-exam reader never panics, and accepts only canonical files: whatever it
// accepts re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "small.sealrun")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"context_bytes":4,"format":"sealrun-exam/v1","questions":1}` + "\n" + `{"answer":"eA==","id":"a","prefix":"eA=="}` + "\n"))
	f.Add([]byte(strings.Repeat("\n", 10)))
	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := Decode("fuzz", bytes.NewReader(data), "")
		if err != nil {
			var ie *InvalidExamError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *InvalidExamError: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := Encode(&buf, ex.Questions, ex.Header.ContextBytes); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("accepted a non-canonical exam:\n%q\nre-encodes to\n%q", data, buf.Bytes())
		}
	})
}
