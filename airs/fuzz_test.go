package airs

import (
	"errors"
	"os"
	"testing"
)

// FuzzParseMetadata: any bytes give a parsed metadata or an *Error with problems; never a panic,
// and a parsed one is internally consistent.
func FuzzParseMetadata(f *testing.F) {
	b, err := os.ReadFile("testdata/MathQuestionAnsweringSVAMPAccuracy/metadata.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("logging_info: &a\n  x: *a\n"))
	f.Add([]byte("a: [1, 2\n"))
	f.Add([]byte("sota: {sota_score: 1e999}\n"))
	f.Add([]byte("- 1\n- 2\n"))
	f.Add([]byte("? [a]\n: b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMetadata("m.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			return
		}
		if m.Info.Name == "" || len(m.FileExportGlobs) == 0 || (m.Info.OptimalScore != nil && m.Info.SOTA.Score == *m.Info.OptimalScore) {
			t.Fatalf("accepted an inconsistent metadata: %+v", m)
		}
	})
}
