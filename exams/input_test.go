package exams

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func readQ(t *testing.T, src string, opts ...Option) ([]Question, *InvalidInputError) {
	t.Helper()
	qs, err := ReadQuestions("q.jsonl", strings.NewReader(src), opts...)
	if err == nil {
		return qs, nil
	}
	var ie *InvalidInputError
	if !errors.As(err, &ie) {
		t.Fatalf("ReadQuestions: %v (not *InvalidInputError)", err)
	}
	return nil, ie
}

func readD(t *testing.T, src string, opts ...Option) ([]Question, *InvalidInputError) {
	t.Helper()
	qs, err := ReadDocuments("d.jsonl", strings.NewReader(src), opts...)
	if err == nil {
		return qs, nil
	}
	var ie *InvalidInputError
	if !errors.As(err, &ie) {
		t.Fatalf("ReadDocuments: %v (not *InvalidInputError)", err)
	}
	return nil, ie
}

func hasProblem(ie *InvalidInputError, line int, msg string) bool {
	if ie == nil {
		return false
	}
	for _, p := range ie.Problems {
		if p.Line == line && strings.Contains(p.Msg, msg) {
			return true
		}
	}
	return false
}

func TestReadQuestionsValid(t *testing.T) {
	src := `{"id":"a","prefix":"hello ","answer":"world","family":"f"}

{"id":"b","prefix_b64":"/wA=","answer_b64":"AQ=="}
{"id":"é/1","prefix":"` + strings.Repeat("x", 2000) + `","answer":"y"}`
	qs, ie := readQ(t, src)
	if ie != nil {
		t.Fatal(ie)
	}
	if len(qs) != 3 {
		t.Fatalf("got %d questions", len(qs))
	}
	if string(qs[0].Prefix) != "hello " || string(qs[0].Answer) != "world" || qs[0].Family != "f" {
		t.Errorf("q0 = %+v", qs[0])
	}
	if !bytes.Equal(qs[1].Prefix, []byte{0xff, 0}) || !bytes.Equal(qs[1].Answer, []byte{1}) {
		t.Errorf("q1 = %+v", qs[1])
	}
	if len(qs[2].Prefix) != DefaultContextBytes {
		t.Errorf("q2 prefix not cut to the context window: %d", len(qs[2].Prefix))
	}
}

func TestReadQuestionsRejects(t *testing.T) {
	long := strings.Repeat("a", 257)
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"malformed json", `{"id":"a","prefix":"x"`, 1, "malformed JSON"},
		{"not an object", `["a"]`, 1, "is a JSON array, not an object"},
		{"null", `null`, 1, "not an object"},
		{"unknown key", `{"id":"a","prefix":"x","answer":"y","anwser":"z"}`, 1, `unknown key "anwser"`},
		{"duplicate key", `{"id":"a","prefix":"x","answer":"y","answer":"z"}`, 1, "appears more than once"},
		{"missing id", `{"prefix":"x","answer":"y"}`, 1, `missing "id"`},
		{"missing prefix", `{"id":"a","answer":"y"}`, 1, `missing "prefix" (or "prefix_b64")`},
		{"missing answer", `{"id":"a","prefix":"x"}`, 1, `missing "answer"`},
		{"both forms", `{"id":"a","prefix":"x","prefix_b64":"eA==","answer":"y"}`, 1, `both "prefix" and "prefix_b64"`},
		{"wrong type", `{"id":7,"prefix":"x","answer":"y"}`, 1, `"id" is a JSON number; expected a string`},
		{"duplicate id", "{\"id\":\"a\",\"prefix\":\"x\",\"answer\":\"y\"}\n{\"id\":\"a\",\"prefix\":\"x\",\"answer\":\"y\"}", 2, `duplicate question id "a" (first on line 1)`},
		{"empty answer", `{"id":"a","prefix":"x","answer":""}`, 1, "answer is empty"},
		{"long answer", `{"id":"a","prefix":"x","answer":"` + long + `"}`, 1, "answer is 257 bytes; answers are at most 256"},
		{"empty prefix", `{"id":"a","prefix":"","answer":"y"}`, 1, "prefix is empty"},
		{"invalid base64", `{"id":"a","prefix_b64":"!!!","answer":"y"}`, 1, `"prefix_b64" is not valid standard base64`},
		{"unpadded base64", `{"id":"a","prefix_b64":"eA","answer":"y"}`, 1, "not valid standard base64"},
		{"url base64", `{"id":"a","prefix_b64":"-_8=","answer":"y"}`, 1, "not valid standard base64"},
		{"invalid utf8", "{\"id\":\"a\",\"prefix\":\"\xff\",\"answer\":\"y\"}", 1, "not valid UTF-8 at byte 20"},
		{"lone surrogate", `{"id":"a","prefix":"\ud800","answer":"y"}`, 1, "lone surrogate"},
		{"empty id", `{"id":"","prefix":"x","answer":"y"}`, 1, "is empty"},
		{"control in id", `{"id":"a\u0007","prefix":"x","answer":"y"}`, 1, "control character"},
		{"long id", `{"id":"` + strings.Repeat("i", 300) + `","prefix":"x","answer":"y"}`, 1, "ids are at most 256 bytes"},
		{"empty input", "", 0, "no questions"},
		{"blank input", "\n\n  \n", 0, "no questions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ie := readQ(t, tc.src)
			if !hasProblem(ie, tc.line, tc.msg) {
				t.Errorf("want problem at line %d containing %q; got %v", tc.line, tc.msg, ie)
			}
			if ie != nil && !strings.HasPrefix(ie.Problems[0].String(), "q.jsonl:") {
				t.Errorf("problem does not name the file: %s", ie.Problems[0])
			}
		})
	}
}

func TestReadReportsAllProblemsUpToCap(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 80; i++ {
		b.WriteString(`{"id":"x","prefix":"","answer":""}` + "\n")
	}
	_, ie := readQ(t, b.String())
	if ie == nil || len(ie.Problems) != MaxProblems || ie.More == 0 {
		t.Fatalf("problems %d, more %d", len(ie.Problems), ie.More)
	}
	if !strings.Contains(ie.Error(), "... and") {
		t.Error("Error() does not say how many more")
	}
	// Two problems on one line are both reported.
	_, ie = readQ(t, `{"id":"a","prefix":"","answer":""}`)
	if !hasProblem(ie, 1, "prefix is empty") || !hasProblem(ie, 1, "answer is empty") {
		t.Errorf("got %v", ie)
	}
}

func TestReadQuestionLimit(t *testing.T) {
	src := strings.Repeat(`{"id":"a","prefix":"x","answer":"y"}`+"\n", 1)
	src += `{"id":"b","prefix":"x","answer":"y"}` + "\n" + `{"id":"c","prefix":"x","answer":"y"}`
	_, ie := readQ(t, src, WithMaxQuestions(2))
	if !hasProblem(ie, 3, "more than 2 questions") {
		t.Errorf("got %v", ie)
	}
	_, ie = readQ(t, `{"id":"a","prefix":"x","answer":"yyy"}`, WithMaxAnswerBytes(2))
	if !hasProblem(ie, 1, "at most 2 bytes") {
		t.Errorf("got %v", ie)
	}
	if _, err := ReadQuestions("q", strings.NewReader(""), WithContextBytes(0)); err == nil {
		t.Error("context bytes 0 accepted")
	}
}

func TestReadLongLine(t *testing.T) {
	src := `{"id":"a","prefix":"` + strings.Repeat("x", MaxLineBytes) + `","answer":"y"}` + "\n" + `{"id":"b","prefix":"x","answer":"y"}`
	_, ie := readQ(t, src)
	if !hasProblem(ie, 1, "longer than") {
		t.Errorf("got %v", ie)
	}
	if len(ie.Problems) != 1 {
		t.Errorf("line 2 should be fine, got %v", ie)
	}
}

func TestReadDocuments(t *testing.T) {
	src := `{"id":"d","text":"a=1; b=2; a+b=3.","answers":[[2,3],[7,8],[14,15]],"family":"records"}`
	qs, ie := readD(t, src)
	if ie != nil {
		t.Fatal(ie)
	}
	want := []struct{ id, prefix, answer string }{
		{"d/1", "a=", "1"},
		{"d/2", "a=_; b=", "2"},
		{"d/3", "a=_; b=_; a+b=", "3"},
	}
	for i, w := range want {
		q := qs[i]
		if q.ID != w.id || string(q.Prefix) != w.prefix || string(q.Answer) != w.answer || q.Family != "records" {
			t.Errorf("q%d = %q %q %q, want %+v", i, q.ID, q.Prefix, q.Answer, w)
		}
	}
	// The window cuts from the front; masking still applies inside it.
	qs, _ = readD(t, src, WithContextBytes(5))
	if string(qs[2].Prefix) != " a+b=" {
		t.Errorf("windowed prefix = %q", qs[2].Prefix)
	}
	if string(qs[1].Prefix) != "_; b=" {
		t.Errorf("windowed masked prefix = %q", qs[1].Prefix)
	}
}

func TestReadDocumentsRejects(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"missing text", `{"id":"d","answers":[[1,2]]}`, 1, `missing "text"`},
		{"missing answers", `{"id":"d","text":"abc"}`, 1, `missing "answers"`},
		{"no spans", `{"id":"d","text":"abc","answers":[]}`, 1, `"answers" is empty`},
		{"bad spans type", `{"id":"d","text":"abc","answers":"1-2"}`, 1, "not a list of [start, end] pairs"},
		{"three numbers", `{"id":"d","text":"abc","answers":[[1,2,3]]}`, 1, "answers[0] has 3 numbers"},
		{"float offset", `{"id":"d","text":"abc","answers":[[1.5,2]]}`, 1, "1.5 is not a byte offset"},
		{"negative offset", `{"id":"d","text":"abc","answers":[[-1,2]]}`, 1, "-1 is not a byte offset"},
		{"out of range", `{"id":"d","text":"abc","answers":[[1,4]]}`, 1, "out of range: text is 3 bytes"},
		{"empty span", `{"id":"d","text":"abc","answers":[[1,1]]}`, 1, "is empty or reversed"},
		{"reversed span", `{"id":"d","text":"abc","answers":[[2,1]]}`, 1, "is empty or reversed"},
		{"starts at 0", `{"id":"d","text":"abc","answers":[[0,1]]}`, 1, "prefix would be empty"},
		{"unsorted", `{"id":"d","text":"abcdef","answers":[[3,4],[1,2]]}`, 1, "answers[1] = [1, 2] is not sorted"},
		{"overlapping", `{"id":"d","text":"abcdef","answers":[[1,3],[2,4]]}`, 1, "overlaps the span before it [1, 3]"},
		{"span too long", `{"id":"d","text":"abcdef","answers":[[1,6]]}`, 1, "at most 2 bytes"},
		{"duplicate doc id", "{\"id\":\"d\",\"text\":\"ab\",\"answers\":[[1,2]]}\n{\"id\":\"d\",\"text\":\"ab\",\"answers\":[[1,2]]}", 2, `duplicate document id "d"`},
		{"slash in document id", "{\"id\":\"d/1\",\"text\":\"ab\",\"answers\":[[1,2]]}\n{\"id\":\"d\",\"text\":\"ab\",\"answers\":[[1,2]]}", 0, ""},
		{"unknown key", `{"id":"d","text":"ab","answers":[[1,2]],"note":"x"}`, 1, `unknown key "note"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ie := readD(t, tc.src, WithMaxAnswerBytes(2))
			if tc.msg == "" {
				if ie != nil {
					t.Errorf("unexpected %v", ie)
				}
				return
			}
			if !hasProblem(ie, tc.line, tc.msg) {
				t.Errorf("want problem at line %d containing %q; got %v", tc.line, tc.msg, ie)
			}
		})
	}
}

// Property: masking never leaves an earlier answer's bytes at its original offset in a later
// prefix, whatever the window.
func TestMaskingProperty(t *testing.T) {
	docs := Synthesize(42, 400)
	for _, c := range []int{7, 64, 1024} {
		var buf bytes.Buffer
		if err := WriteDocuments(&buf, docs); err != nil {
			t.Fatal(err)
		}
		qs, err := ReadDocuments("d", &buf, WithContextBytes(c))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for _, d := range docs {
			for k, s := range d.Answers {
				q := qs[i]
				i++
				lo := s[0] - len(q.Prefix) // text offset of the prefix's first byte
				for _, e := range d.Answers[:k] {
					for off := max(e[0], lo); off < e[1]; off++ {
						if q.Prefix[off-lo] != '_' {
							t.Fatalf("context %d: %s: byte %d of earlier answer [%d,%d] not masked: %q", c, q.ID, off, e[0], e[1], q.Prefix)
						}
					}
				}
				if string(q.Answer) != d.Text[s[0]:s[1]] {
					t.Fatalf("%s: answer %q", q.ID, q.Answer)
				}
			}
		}
	}
}
