package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestExamVerbs(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	docs, exam := p("d.jsonl"), p("exam.sealrun")

	if r := sealrun(t, "exam", "synth", "--seed", "7", "--count", "25", "--out", docs); r.code != 0 || !strings.Contains(r.stdout, "25 questions (seed 7)") {
		t.Fatalf("synth: %+v", r)
	}
	r := sealrun(t, "exam", "build", "--documents", docs, "--out", exam)
	if r.code != 0 || !strings.Contains(r.stdout, "25 questions, context 1024 bytes") {
		t.Fatalf("build: %+v", r)
	}
	hash := sealrun(t, "exam", "hash", exam)
	out, err := exec.Command("sha256sum", exam).Output()
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.TrimSpace(hash.stdout)
	if sum != strings.Fields(string(out))[0] || !strings.Contains(r.stdout, sum) {
		t.Fatalf("exam hash %q, sha256sum %q, build printed %q", sum, out, r.stdout)
	}
	wrong := strings.Repeat("ab", 32)
	bad := p("bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"id\":\"a\",\"prefix\":\"x\",\"answer\":\"\"}\n{\"id\":\"a\",\"prefix\":\"x\"\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := p("big.jsonl")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 100<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"verify ok", []string{"exam", "verify", exam, "--sha256", sum}, 0, "ok, 25 questions, context 1024 bytes", ""},
		{"verify mismatch", []string{"exam", "verify", exam, "--sha256", wrong}, 1, "", "has sha256 " + sum + ", but " + wrong + " was expected"},
		{"verify bad flag", []string{"exam", "verify", exam, "--sha256", "XYZ"}, 2, "", "not 64 lowercase hex"},
		{"verify no flag", []string{"exam", "verify", exam}, 2, "", "not 64 lowercase hex"},
		{"verify not an exam", []string{"exam", "verify", docs, "--sha256", sum}, 1, "", "not a valid sealrun-exam/v1 file"},
		{"show", []string{"exam", "show", exam}, 0, "syn-7-1/1\tprefix ", ""},
		{"show id", []string{"exam", "show", exam, "--id", "syn-7-1/2"}, 0, "id      syn-7-1/2\nprefix  ", ""},
		{"show missing id", []string{"exam", "show", exam, "--id", "nope"}, 1, "", `no question with id "nope"`},
		{"stats", []string{"exam", "stats", exam, "--documents", docs}, 0, "families\n  extraction ", ""},
		{"stats without input", []string{"exam", "stats", exam}, 0, "families       unknown", ""},
		{"build bad input", []string{"exam", "build", "--questions", bad, "--out", p("x.sealrun")}, 1, "", "bad.jsonl:1: answer is empty"},
		{"build all problems", []string{"exam", "build", "--questions", bad, "--out", p("x.sealrun")}, 1, "", "bad.jsonl:3: malformed JSON"},
		{"build 100 MB", []string{"exam", "build", "--questions", big, "--out", p("x.sealrun")}, 1, "", "big.jsonl:1: line is longer than"},
		{"build missing input", []string{"exam", "build", "--questions", p("nope.jsonl"), "--out", p("x.sealrun")}, 1, "", "does not exist"},
		{"build dir input", []string{"exam", "build", "--documents", dir, "--out", p("x.sealrun")}, 1, "", "is a directory"},
		{"build no out", []string{"exam", "build", "--documents", docs}, 2, "", "--out"},
		{"build no input", []string{"exam", "build", "--out", p("x.sealrun")}, 2, "", "--questions or --documents"},
		{"build both inputs", []string{"exam", "build", "--questions", docs, "--documents", docs, "--out", p("x.sealrun")}, 2, "", "not both"},
		{"build bad context", []string{"exam", "build", "--documents", docs, "--out", p("x.sealrun"), "--context-bytes", "0"}, 2, "", "--context-bytes 0 out of range"},
		{"hash dir", []string{"exam", "hash", dir}, 1, "", "is a directory"},
		{"hash missing", []string{"exam", "hash", p("nope")}, 1, "", "does not exist"},
		{"synth bad count", []string{"exam", "synth", "--count", "0", "--out", p("y")}, 2, "", "--count 0 out of range"},
		{"synth bad seed", []string{"exam", "synth", "--seed", "-1", "--count", "1", "--out", p("y")}, 2, "", "invalid argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sealrun(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ~ %q, stderr ~ %q", r.code, tc.code, r.stdout, r.stderr, tc.stdout, tc.stderr)
			}
		})
	}
	if _, err := os.Stat(p("x.sealrun")); !os.IsNotExist(err) {
		t.Errorf("a failed build left an output file: %v", err)
	}
	// Synthesis is deterministic from the CLI too.
	again := p("d2.jsonl")
	sealrun(t, "exam", "synth", "--seed", "7", "--count", "25", "--out", again)
	a, _ := os.ReadFile(docs)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("synth is not deterministic for a seed")
	}
}
