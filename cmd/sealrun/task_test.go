package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/policy"
)

// sealrun task validate and show: a good task, a bad one (every problem named, exit 1), usage
// errors (exit 2).
func TestTaskCommands(t *testing.T) {
	good := "../../airs/testdata/MathQuestionAnsweringSVAMPAccuracy"
	r := sealrun(t, "task", "validate", good)
	if r.code != 0 || !strings.Contains(r.stdout, "ok (task MathQuestionAnsweringSVAMPAccuracy, 5 files, hash ") {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = sealrun(t, "task", "show", good)
	for _, want := range []string{"metric                   Accuracy (higher is better)", "SOTA                     0.942 — Achieving", "optimum                  1", "worst (estimated)        0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	if r = sealrun(t, "task", "show", "--json", good); r.code != 0 || !strings.Contains(r.stdout, `"sota_score": 0.942`) {
		t.Errorf("show --json: exit %d\n%s", r.code, r.stdout)
	}

	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "metadata.yaml"), []byte("metric_lower_is_better: maybe\nlogging_info: {}\nextra: 1\n"), 0o644)
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr []string
	}{
		{"bad task", []string{"task", "validate", good, bad}, 1, []string{"metadata.yaml:1:25: metric_lower_is_better: is the string \"maybe\"; want true or false",
			"file_export_globs: missing", "logging_info.metric: missing", "evaluate.py: missing", bad + ": "}},
		{"not a task", []string{"task", "show", t.TempDir()}, 1, []string{"no metadata.yaml; a task directory holds"}},
		{"no such dir", []string{"task", "validate", filepath.Join(bad, "nope")}, 1, []string{"no such file or directory"}},
		{"bare task", []string{"task"}, 2, []string{"missing subcommand: validate, show or requirements"}},
		{"show two", []string{"task", "show", good, good}, 2, []string{"one task directory"}},
		{"validate none", []string{"task", "validate"}, 2, []string{"one or more task directories"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			for _, want := range c.stderr {
				if r.code != c.code || !strings.Contains(r.stderr, want) {
					t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, c.code, want)
				}
			}
		})
	}
}

// tracks/airs-digits.toml pins the shipped task as it is.
func TestAIRSTrackPinsTheShippedTask(t *testing.T) {
	tr, err := policy.Load("../../tracks/airs-digits.toml")
	if err != nil {
		t.Fatal(err)
	}
	task, err := airs.Open("../../airs/tasks/" + tr.Task.Name)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Task.SHA256 != task.Hash {
		t.Errorf("tracks/airs-digits.toml pins task sha256 %s; the shipped task's hash is %s (sealrun task validate airs/tasks/%s): update the pin, and the track's version", tr.Task.SHA256, task.Hash, tr.Task.Name)
	}
}

// content add stores task and raw data directories by tree hash; an invalid task is refused
// with its problems and nothing is stored.
func TestContentAddTrees(t *testing.T) {
	state := t.TempDir()
	raw := t.TempDir()
	os.WriteFile(filepath.Join(raw, "digits.csv.gz"), []byte("data"), 0o644)
	r := sealrun(t, "--state-dir", state, "content", "add", "../../airs/testdata/MathQuestionAnsweringSVAMPAccuracy", raw)
	if r.code != 0 || !strings.Contains(r.stdout, "dfc540226da3b9fe34f0eb219c7ae6cb517731269eef6e4e34fe2321d4175e10  ../../airs/testdata/MathQuestionAnsweringSVAMPAccuracy (AIRS task MathQuestionAnsweringSVAMPAccuracy)") ||
		!strings.Contains(r.stdout, raw+" (raw data directory)") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "metadata.yaml"), []byte("logging_info: 1\n"), 0o644)
	if r := sealrun(t, "--state-dir", state, "content", "add", bad); r.code != 1 || !strings.Contains(r.stderr, "logging_info: is the number 1; want a mapping of fields") {
		t.Errorf("bad task: exit %d %s", r.code, r.stderr)
	}
	entries, _ := os.ReadDir(filepath.Join(state, "content", "tree"))
	if len(entries) != 2 {
		t.Errorf("the store holds %d trees; want 2", len(entries))
	}
}
