package exams

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/sealrun/sealrun/digest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./exams -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./exams -update to accept)\n--- got\n%s", name, got)
	}
}

func buildFile(t *testing.T, input string, docs bool, c int) (string, string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", input))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := ReadQuestions
	if docs {
		read = ReadDocuments
	}
	qs, err := read(input, f, WithContextBytes(c))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "exam.sealrun")
	sum, err := WriteFile(out, qs, c)
	if err != nil {
		t.Fatal(err)
	}
	return out, sum
}

// The small exam and its hash are pinned: any change to the format changes this test.
func TestBuildGolden(t *testing.T) {
	out, sum := buildFile(t, "small-questions.jsonl", false, 16)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "small.sealrun", data)
	golden(t, "small.sha256", []byte(sum+"\n"))
	h := sha256.Sum256(data)
	if hex.EncodeToString(h[:]) != sum {
		t.Error("returned hash is not the SHA-256 of the file")
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("built exam mode %v, want 0600", st.Mode().Perm())
	}
	// Every line is RFC 8785 canonical according to an independent implementation.
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		canon, err := jsoncanonicalizer.Transform(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil || !bytes.Equal(append(canon, '\n'), line) {
			t.Errorf("line %d is not JCS canonical:\n%s\n%s", i+1, line, canon)
		}
	}
}

func TestSynthGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteDocuments(&buf, Synthesize(1, 30)); err != nil {
		t.Fatal(err)
	}
	golden(t, "synth-seed1-30.jsonl", buf.Bytes())
	out, sum := buildFile(t, "synth-seed1-30.jsonl", true, 1024)
	golden(t, "synth-seed1-30.sha256", []byte(sum+"\n"))
	if _, err := Open(out, digest.Hex(sum)); err != nil {
		t.Error(err)
	}
}

func TestSynthesize(t *testing.T) {
	docs := Synthesize(9, 500)
	fams := map[string]int{}
	n := 0
	for _, d := range docs {
		fams[d.Family]++
		for _, s := range d.Answers {
			n++
			if l := s[1] - s[0]; l < 1 || l > 16 {
				t.Errorf("%s: answer %q is %d bytes; want 1 to 16", d.ID, d.Text[s[0]:s[1]], l)
			}
		}
	}
	if n != 500 {
		t.Errorf("%d questions, want 500", n)
	}
	if len(fams) != len(Families) || len(Families) < 6 {
		t.Errorf("families %v", fams)
	}
	if !bytesEqualDocs(Synthesize(9, 500), docs) || bytesEqualDocs(Synthesize(10, 500), docs) {
		t.Error("not deterministic per seed")
	}
}

func bytesEqualDocs(a, b []Document) bool {
	var x, y bytes.Buffer
	WriteDocuments(&x, a)
	WriteDocuments(&y, b)
	return bytes.Equal(x.Bytes(), y.Bytes())
}

func TestOpen(t *testing.T) {
	out, sum := buildFile(t, "small-questions.jsonl", false, 16)
	ex, err := Open(out, digest.Hex(sum))
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Questions) != ex.Header.Questions || string(ex.SHA256) != sum {
		t.Errorf("exam = %+v", ex.Header)
	}
	wrong := strings.Repeat("0", 64)
	_, err = Open(out, digest.Hex(wrong))
	var hm *HashMismatchError
	if !errors.As(err, &hm) || !strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), sum) {
		t.Errorf("mismatch error %v does not show both hashes", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	out, _ := buildFile(t, "small-questions.jsonl", false, 16)
	good, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	first := lines[1]
	tests := []struct {
		name, data string
		msg        string
	}{
		{"empty", "", "the file is empty"},
		{"truncated", strings.Join(lines[:len(lines)-2], ""), "truncated?"},
		{"no final newline", strings.TrimSuffix(string(good), "\n"), "not in canonical form"},
		{"extra line", string(good) + first, "more question lines than"},
		{"wrong format", strings.Replace(string(good), "sealrun-exam/v1", "sealrun-exam/v9", 1), `format is "sealrun-exam/v9"`},
		{"header spacing", strings.Replace(string(good), `{"context_bytes":`, `{ "context_bytes":`, 1), "header is not in canonical form"},
		{"key order", strings.Replace(string(good), first, `{"id":"a","answer":"eA==","prefix":"eA=="}`+"\n", 1), "not in canonical form"},
		{"unknown key", strings.Replace(string(good), first, `{"answer":"eA==","id":"a","prefix":"eA==","x":1}`+"\n", 1), "unknown field"},
		{"bad base64", strings.Replace(string(good), first, `{"answer":"eA","id":"a","prefix":"eA=="}`+"\n", 1), "not standard base64"},
		{"prefix too long", strings.Replace(string(good), first, `{"answer":"eA==","id":"a","prefix":"`+strings.Repeat("QUFB", 10)+`"}`+"\n", 1), "expected 1 to context_bytes"},
		{"duplicate id", strings.Replace(string(good), lines[2], first, 1), "duplicate id"},
		{"garbage", "\x00\x01\x02", "header"},
		{"long header", strings.Repeat("x", 100<<10), "header line is too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode("e", strings.NewReader(tc.data), "")
			var ie *InvalidExamError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Decode = %v, want *InvalidExamError containing %q", err, tc.msg)
			}
		})
	}
}

func TestWriteFileIsAtomic(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "exam.sealrun")
	if _, err := WriteFile(out, nil, 1024); err == nil {
		t.Fatal("WriteFile with no questions succeeded")
	}
	if _, err := WriteFile(out, []Question{{ID: "a", Prefix: []byte("x"), Answer: []byte("y")}}, 0); err == nil {
		t.Fatal("WriteFile with context 0 succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("a failed build left files: %v", entries)
	}
	// A failed build does not touch an existing exam.
	if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	WriteFile(out, nil, 1024)
	if b, _ := os.ReadFile(out); string(b) != "old" {
		t.Errorf("existing file changed to %q", b)
	}
}

func TestJCSStringMatchesReference(t *testing.T) {
	for _, s := range []string{"plain", "quo\"te", `back\slash`, "\x00\x01\x1f\x7f", "\b\t\n\f\r", "<>&", "\u2028\u2029", "é€😀", "/slash"} {
		got := appendJCSString(nil, s)
		want, err := jsoncanonicalizer.Transform([]byte(`[` + string(got) + `]`))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if "["+string(got)+"]" != string(want) {
			t.Errorf("%q: ours %s, reference %s", s, got, want)
		}
	}
}
