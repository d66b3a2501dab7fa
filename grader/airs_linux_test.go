package grader

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
)

const digitsTask = "../airs/tasks/DigitsClassificationAccuracy"

// scriptLimit is the tests' limit for one task script, a bound on a hang, not a measure: under
// gVisor, beside two other packages' sandboxes on two cores, prepare.py's imports once took past
// a minute (alone, 24 s for the whole test).
const scriptLimit = 4 * time.Minute

// synthDigitsLabels writes a raw data directory in the digits format (1797 rows of 64 pixel counts
// and a label), synthetic: the real one comes from Debian's python3-sklearn, which tests may not
// fetch.
// It returns the test split's labels too (every fifth row's).
func synthDigitsLabels(t *testing.T) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	rng := rand.New(rand.NewPCG(7, 7))
	var labels []string
	for i := range 1797 {
		for range 64 {
			fmt.Fprintf(zw, "%d.0,", rng.IntN(17))
		}
		y := rng.IntN(10)
		fmt.Fprintf(zw, "%d\n", y)
		if i%5 == 0 {
			labels = append(labels, fmt.Sprint(y))
		}
	}
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "digits.csv.gz"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	return dir, labels
}

// The shipped task's scripts, each in its own sealed container, with upstream's arguments:
// prepare.py writes the agent's data without labels; evaluate_prepare.py then evaluate.py score a
// submission, and every way a submission yields no number is an invalid submission with the
// reason; a failing or silent prepare.py is an error naming it.
func TestAIRSTaskScripts(t *testing.T) {
	e := testEnv(t, 10*time.Second)
	ctx := context.Background()
	raw, want := synthDigitsLabels(t)
	base := t.TempDir()
	os.Chmod(base, 0o711)
	dataDir, work := filepath.Join(base, "task-data"), filepath.Join(base, "grading")
	os.Mkdir(work, 0o711)
	r, err := PrepareTask(ctx, e, digitsTask, raw, dataDir, scriptLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exit %d in %.2fs: %s", r.Script, r.Exit, r.Seconds, strings.TrimSpace(r.Stdout))
	test, _ := os.ReadFile(filepath.Join(dataDir, "test", "test.csv"))
	train, _ := os.ReadFile(filepath.Join(dataDir, "train", "train.csv"))
	if bytes.Count(test, []byte("\n")) != 361 || bytes.Count(train, []byte("\n")) != 1438 {
		t.Fatalf("rows: test %d, train %d", bytes.Count(test, []byte("\n")), bytes.Count(train, []byte("\n")))
	}
	if !strings.HasPrefix(string(test), "id,p0,") || strings.Contains(string(test), "label") {
		t.Errorf("the agent's test split has labels: %.80q", test)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "test_with_labels")); err == nil {
		t.Errorf("prepare.py wrote the labels into the agent's data")
	}
	sub := func(name, text string) string {
		d := filepath.Join(t.TempDir(), name)
		os.MkdirAll(d, 0o755)
		os.Chmod(filepath.Dir(d), 0o755)
		if text != "" {
			os.WriteFile(filepath.Join(d, "submission.csv"), []byte(text), 0o644)
		}
		return d
	}
	perfect := "label\n" + strings.Join(want, "\n") + "\n"
	ninety := strings.Split(perfect, "\n")
	for i := 1; i < len(ninety)-1; i += 10 {
		ninety[i] = fmt.Sprint((int(ninety[i][0]-'0') + 1) % 10)
	}
	for _, c := range []struct {
		name, text string
		value      float64
		invalid    string
	}{
		{"perfect", perfect, 1, ""},
		{"ninety", strings.Join(ninety, "\n"), 0.9, ""},
		{"short", "label\n1\n2\n", 0, "does not match test set size (360)"},
		{"header", "digit\n" + strings.Join(want, "\n"), 0, "the header must be the one column: label"},
		{"not numbers", "label\n" + strings.Repeat("x\n", 360), 0, "invalid literal for int()"},
		{"no submission", "", 0, "evaluate_prepare.py exited 1"},
	} {
		ev, err := EvaluateTask(ctx, e, digitsTask, raw, dataDir, sub(c.name, c.text), work, "Accuracy", scriptLimit)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.invalid == "" && (ev.Value == nil || *ev.Value < c.value-1e-9 || *ev.Value > c.value+1e-9):
			t.Errorf("%s: value %v (%s), want %v", c.name, ev.Value, ev.Invalid, c.value)
		case c.invalid != "" && (ev.Value != nil || !strings.Contains(ev.Invalid, c.invalid)):
			t.Errorf("%s: value %v invalid %q, want invalid %q", c.name, ev.Value, ev.Invalid, c.invalid)
		}
		t.Logf("%s: %.2fs, result %s %s", c.name, ev.Run.Seconds, ev.Result, ev.Invalid)
	}
	if ev, err := EvaluateTask(ctx, e, digitsTask, raw, dataDir, sub("metric", perfect), work, "F1", scriptLimit); err != nil || ev.Value != nil || !strings.Contains(ev.Invalid, `has no "F1"`) {
		t.Errorf("another metric: %v %+v", err, ev)
	}
	// The pristine data is untouched by evaluation (it worked on a copy).
	if _, err := os.Stat(filepath.Join(dataDir, "test_with_labels")); err == nil {
		t.Errorf("evaluation wrote into the pristine data directory")
	}

	// A task whose evaluate.py prints no result, or never ends; a prepare.py that fails, or
	// writes nothing.
	broken := t.TempDir()
	os.Chmod(broken, 0o755)
	for _, f := range []string{"prepare.py", "evaluate_prepare.py", "utils.py", "metadata.yaml", "project_description.md"} {
		b, _ := os.ReadFile(filepath.Join(digitsTask, f))
		os.WriteFile(filepath.Join(broken, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(broken, "evaluate.py"), []byte("import os, time\nif os.path.exists('./logs/slow'):\n    time.sleep(60)\nprint('Accuracy: 0.5')\n"), 0o644)
	if ev, err := EvaluateTask(ctx, e, broken, raw, dataDir, sub("quiet", perfect), work, "Accuracy", scriptLimit); err != nil || ev.Value != nil || !strings.Contains(ev.Invalid, "printed no result JSON") {
		t.Errorf("no result: %v %+v", err, ev)
	}
	slow := sub("slow", perfect)
	os.WriteFile(filepath.Join(slow, "slow"), nil, 0o644)
	if ev, err := EvaluateTask(ctx, e, broken, raw, dataDir, slow, work, "Accuracy", 6*time.Second); err != nil || ev.Value != nil || !strings.Contains(ev.Invalid, "ran past its") {
		t.Errorf("slow: %v %+v", err, ev)
	}
	os.WriteFile(filepath.Join(broken, "prepare.py"), []byte("print('nothing')\n"), 0o644)
	if _, err := PrepareTask(ctx, e, broken, raw, filepath.Join(base, "silent"), scriptLimit); err == nil || !strings.Contains(err.Error(), "wrote nothing into --agent-data-mount-dir") {
		t.Errorf("silent prepare: %v", err)
	}
	os.Remove(filepath.Join(raw, "digits.csv.gz"))
	if _, err := PrepareTask(ctx, e, digitsTask, raw, filepath.Join(base, "a2"), scriptLimit); err == nil || !strings.Contains(err.Error(), "the task's prepare.py exited 1; its stderr ends:") || !strings.Contains(err.Error(), "digits.csv.gz") {
		t.Errorf("prepare without data: %v", err)
	}
}

// The result JSON: after the marker (indented over lines, as the paper's scripts print it), or
// the last line that is an object.
func TestParseResult(t *testing.T) {
	for _, c := range []struct{ out, res, why string }{
		{"Loaded 3.\n\n--- EVALUATION RESULT ---\n{\n  \"Accuracy\": 0.5\n}\n", "{\n  \"Accuracy\": 0.5\n}", ""},
		{"noise\n{\"Accuracy\": 0.25}\n", `{"Accuracy": 0.25}`, ""},
		{"--- EVALUATION RESULT ---\nnope\n", "", "but no JSON object after it"},
		{"Accuracy 0.5\n", "", "printed no result JSON"},
		{"", "", "printed no result JSON"},
	} {
		res, why := parseResult(c.out)
		if res != c.res || !strings.Contains(why, c.why) || (c.why == "" && why != "") {
			t.Errorf("%q: %q %q; want %q %q", c.out, res, why, c.res, c.why)
		}
	}
}

// BenchmarkAIRSOverhead is what sealing adds to a task's own scripts: preparation (one fresh
// container) and evaluation (two: evaluate_prepare.py and evaluate.py), timed with scripts that do nothing but print a result
// (target ≤ 2 s each).
func BenchmarkAIRSOverhead(b *testing.B) {
	e := testEnv(b, 10*time.Second)
	ctx := context.Background()
	task := b.TempDir()
	os.Chmod(task, 0o755)
	noop := "import sys\nprint('{\"Accuracy\": 1.0}')\n"
	for _, f := range []string{"evaluate_prepare.py", "evaluate.py"} {
		os.WriteFile(filepath.Join(task, f), []byte(noop), 0o644)
	}
	os.WriteFile(filepath.Join(task, "prepare.py"), []byte("import sys, os\nd = sys.argv[sys.argv.index('--agent-data-mount-dir') + 1]\nos.makedirs(d + '/train')\n"), 0o644)
	base := b.TempDir()
	os.Chmod(base, 0o711)
	raw, sub := filepath.Join(base, "raw"), filepath.Join(base, "sub")
	os.Mkdir(raw, 0o755)
	os.Mkdir(sub, 0o755)
	work := filepath.Join(base, "work")
	os.Mkdir(work, 0o711)
	var prep, eval time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		data := filepath.Join(base, fmt.Sprint("a", i))
		if _, err := PrepareTask(ctx, e, task, raw, data, scriptLimit); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		ev, err := EvaluateTask(ctx, e, task, raw, data, sub, work, "Accuracy", scriptLimit)
		if err != nil || ev.Value == nil {
			b.Fatalf("%v %+v", err, ev)
		}
		prep, eval = prep+t1.Sub(t0), eval+time.Since(t1)
	}
	b.ReportMetric(prep.Seconds()/float64(b.N), "prepare-s")
	b.ReportMetric(eval.Seconds()/float64(b.N), "evaluate-s")
}

// The judge of a task run: submit exports the globbed files with no validation, promote and
// finalize as for any run, and GradeTask scores the promoted submission with evaluate.py into
// report.json and the audit log; an unscorable submission is graded invalid, no promotion
// fails the run.
func TestTaskService(t *testing.T) {
	e := testEnv(t, 10*time.Second)
	ctx := context.Background()
	meta, err := airs.Open(digitsTask)
	if err != nil {
		t.Fatal(err)
	}
	tr := &policy.Track{ID: strings.Repeat("c", 64), Name: "airs-t", Version: "1",
		Budget:   policy.Budget{Wall: time.Hour, CallLimit: 20 * time.Minute, Reserve: 5 * time.Minute, Grading: 2 * time.Minute},
		Artifact: policy.Artifact{MaxGzipBytes: 1 << 20},
		Task:     &policy.Task{Kind: policy.TaskAIRS, Name: meta.Meta.Info.Name, SHA256: digest.Hex(meta.Hash), DataSHA256: digest.Hex(strings.Repeat("d", 64))}}
	base := t.TempDir()
	os.Chmod(base, 0o711)
	raw, preds := synthDigitsLabels(t)
	if _, err := PrepareTask(ctx, e, digitsTask, raw, filepath.Join(base, "data"), scriptLimit); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, submission string, promote bool) (*report.Task, string) {
		ws := t.TempDir()
		os.MkdirAll(filepath.Join(ws, "out"), 0o755)
		os.WriteFile(filepath.Join(ws, "out", "submission.csv"), []byte(submission), 0o644)
		os.WriteFile(filepath.Join(ws, "out", "model.bin"), []byte("not exported"), 0o644)
		runDir := filepath.Join(t.TempDir(), "run")
		os.MkdirAll(runDir, 0o700)
		log, err := audit.Open(filepath.Join(runDir, "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		svc, err := NewService(ServiceConfig{Env: e, Track: tr, Workspace: ws, Dir: runDir, Audit: log,
			Task: &TaskJudging{Meta: &meta.Meta, TaskDir: digitsTask, DataDir: filepath.Join(base, "data"), RawDir: raw}})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		answer, err := svc.Submit(ctx, filepath.Join(ws, "out"))
		if err != nil || !strings.Contains(answer, `1 files matching ["submission.csv"]) recorded`) || !strings.Contains(answer, "no validation feedback") {
			t.Fatalf("submit: %v %q", err, answer)
		}
		if promote {
			id := strings.Fields(answer)[1]
			if _, err := svc.Promote(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := svc.Finalize(ctx, ""); err != nil {
			t.Fatal(err)
		}
		rep, sum, err := svc.GradeTask(ctx, time.Now().Add(scriptLimit))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(runDir, "report.json"))
		if len(sum) != 64 || !strings.Contains(string(b), `"format": "sealrun-task-report/v1"`) {
			t.Errorf("report.json %s: %s", sum, b)
		}
		a, _ := os.ReadFile(filepath.Join(runDir, "audit.jsonl"))
		return rep, string(a)
	}
	rep, audit := run(t, "label\n"+strings.Join(preds, "\n")+"\n", true)
	if rep.Status != "graded" || !rep.Valid || rep.Value == nil || *rep.Value != 1 || rep.Metric != "Accuracy" || rep.Task.Name != "DigitsClassificationAccuracy" {
		t.Errorf("perfect: %+v", rep)
	}
	if !strings.Contains(audit, `"kind":"evaluated"`) || !strings.Contains(audit, `"value":1`) {
		t.Errorf("audit: %s", audit)
	}
	rep, _ = run(t, "label\n1\n", true)
	if rep.Status != "graded" || rep.Valid || rep.Value != nil || !strings.Contains(rep.Invalid, "does not match test set size") {
		t.Errorf("short: %+v", rep)
	}
	rep, _ = run(t, "label\n1\n", false)
	if rep.Status != "failed" || rep.Reason != "no candidate was promoted" {
		t.Errorf("no promotion: %+v", rep)
	}
}
