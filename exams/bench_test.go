package exams

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkBuild: read 100,000 synthetic questions from documents and encode the exam.
func BenchmarkBuild(b *testing.B) {
	var docs bytes.Buffer
	if err := WriteDocuments(&docs, Synthesize(1, 100000)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		qs, err := ReadDocuments("d", bytes.NewReader(docs.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Encode(io.Discard, qs, DefaultContextBytes); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100000*b.N)/b.Elapsed().Seconds(), "questions/s")
}

// BenchmarkHashFile: streaming SHA-256 of a 64 MB file.
func BenchmarkHashFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "f")
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := HashFile(path); err != nil {
			b.Fatal(err)
		}
	}
}
