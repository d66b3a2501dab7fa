package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// sealrun export on a results directory: one trajectory per run, each as ATIF's rules have it;
// and every malformed input refused with the flag or the file named (e2e's TestDemo exports the
// demo's real runs and checks them with sealrun verify --export).
func TestExportVerb(t *testing.T) {
	results := t.TempDir()
	for i, id := range []string{"r-one", "r-two"} {
		r, err := transcripttest.New(filepath.Join(results, id), time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		if err := transcripttest.Conversation(r, 3+i, 500, 100, nil); err != nil {
			t.Fatal(err)
		}
		r.Close()
		tr, err := transcript.Build(r.Dir, transcript.Run{ID: id, Track: "ari", Agent: "openai/gpt-x", Seed: int64(i), State: "graded"}, transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := transcript.Write(r.Dir, tr); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	r := sealrun(t, "export", "--format", "atif", results, "--out", out)
	if r.code != 0 || strings.Count(r.stdout, "trajectory.json: ") != 2 {
		t.Fatalf("export: %+v", r)
	}
	for _, id := range []string{"r-one", "r-two"} {
		b, err := os.ReadFile(filepath.Join(out, id, "trajectory.json"))
		if err != nil {
			t.Fatal(err)
		}
		exporttest.ATIFRules(t, b)
	}
	r = sealrun(t, "export", "--format", "inspect", results, "--out", out)
	if r.code != 0 || !strings.Contains(r.stdout, "ari-openai_gpt-x.json: ") || !strings.Contains(r.stdout, "2 runs of ari by openai/gpt-x") {
		t.Fatalf("export --format inspect: %+v", r)
	}
	b, err := os.ReadFile(filepath.Join(out, "ari-openai_gpt-x.json"))
	if err != nil {
		t.Fatal(err)
	}
	exporttest.InspectRules(t, b)
	notJSON := t.TempDir()
	os.WriteFile(filepath.Join(notJSON, "transcript.json"), []byte("{\"format\":"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"another format", []string{"export", "--format", "csv", results, "--out", out}, `--format "csv": give atif or inspect`},
		{"no --out", []string{"export", results}, "give the directory to write into with --out"},
		{"no run", []string{"export", t.TempDir(), "--out", out}, "no transcript.json in it or in the directories below it"},
		{"a file", []string{"export", filepath.Join(out, "r-one", "trajectory.json"), "--out", out}, "not a directory"},
		{"a broken transcript", []string{"export", notJSON, "--out", out}, "not a transcript"},
		{"nothing", []string{"export", "--out", out}, "one or more run directories"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%+v; want exit 2 and %q", r, c.want)
			}
		})
	}
	// --export is recomputed from a checked transcript: without --transcript it is a usage error.
	r = sealrun(t, "verify", "x.att.json", "--key", "k.pub", "--export", filepath.Join(out, "r-one", "trajectory.json"))
	if r.code != 2 || !strings.Contains(r.stderr, "--export: is recomputed from the run's checked transcript (its run directory); give --transcript") {
		t.Errorf("verify --export without --transcript: %+v", r)
	}
}
