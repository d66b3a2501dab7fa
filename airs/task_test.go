package airs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The paper's own example (appendix B.1.3) parses to what it says.
func TestPaperExample(t *testing.T) {
	task, err := Open("testdata/MathQuestionAnsweringSVAMPAccuracy")
	if err != nil {
		t.Fatal(err)
	}
	m := task.Meta
	if m.MetricLowerIsBetter || m.FileExportGlobs[0] != "submission.csv" || m.Info.Name != "MathQuestionAnsweringSVAMPAccuracy" || m.Info.Metric != "Accuracy" ||
		m.Info.SOTA.Score != 0.942 || m.Info.SOTA.Year != 2026 || *m.Info.OptimalScore != 1 || *m.Info.EstimatedWorstScore != 0 ||
		m.Info.ScoringColumns[0] != "Answer" || fmt.Sprint(m.Info.Shape) != "[300 1]" || !strings.HasPrefix(m.Info.SOTA.PaperTitle, "Achieving >97%") {
		t.Errorf("parsed %+v", m)
	}
	if len(task.Notes) != 0 || len(m.Unknown) != 0 {
		t.Errorf("notes %q unknown %v", task.Notes, m.Unknown)
	}
	// The hash is the documented shell recipe's.
	out, err := exec.Command("sh", "-c", `cd testdata/MathQuestionAnsweringSVAMPAccuracy && find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out))[0]; got != string(task.Hash) {
		t.Errorf("TreeHash %s; the shell recipe gives %s", task.Hash, got)
	}
}

// writeTask copies the example with metadata.yaml replaced and files removed.
func writeTask(t *testing.T, meta string, without ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "MathQuestionAnsweringSVAMPAccuracy")
	os.Mkdir(dir, 0o755)
	entries, _ := os.ReadDir("testdata/MathQuestionAnsweringSVAMPAccuracy")
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join("testdata/MathQuestionAnsweringSVAMPAccuracy", e.Name()))
		if e.Name() == MetadataFile && meta != "" {
			b = []byte(meta)
		}
		if !contains(without, e.Name()) {
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
	}
	return dir
}

func example(t *testing.T) string {
	b, err := os.ReadFile("testdata/MathQuestionAnsweringSVAMPAccuracy/metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every problem of a bad task is named with its file, line and field, all at once.
func TestEveryProblemNamed(t *testing.T) {
	meta := strings.NewReplacer(
		"metric_lower_is_better: false", "metric_lower_is_better: no-thanks",
		"  - submission.csv", "  - ../submission.csv",
		"      sota_score: 0.942", "      sota_score: high",
		"  sota_year: 2026", "  sota_year: 2026",
		"  metric: Accuracy\n", "",
		"  input_columns:\n    - question_concat", "  input_columns: question_concat",
		"  shape: 300,1", "  shape: [300, -1]",
	).Replace(example(t))
	dir := writeTask(t, meta, EvaluateFile)
	_, err := Open(dir)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v", err)
	}
	got := strings.Join(e.Problems, "\n")
	for _, want := range []string{
		filepath.Join(dir, "evaluate.py") + ": missing; a task directory holds metadata.yaml, project_description.md, prepare.py, evaluate_prepare.py, evaluate.py",
		"metadata.yaml:1:25: metric_lower_is_better: is the string \"no-thanks\"; want true or false",
		"logging_info.sota[0].sota_score: is the string \"high\"; want a number",
		"logging_info.metric: missing; the name of the metric evaluate.py reports",
		"logging_info.input_columns: is the string \"question_concat\"; want a list of text",
		"logging_info.shape: a list is not a shape; write a tuple or list of positive whole numbers",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing problem %q in:\n%s", want, got)
		}
	}
	if !strings.Contains(err.Error(), "problem(s)") {
		t.Errorf("error text: %v", err)
	}
}

// Rules between fields: the globs, the scores' order for the direction, the name.
func TestCrossFieldRules(t *testing.T) {
	for _, c := range []struct{ name, old, new, want string }{
		{"glob escapes", "  - submission.csv", "  - ../x.csv", `file_export_globs[0]: "../x.csv" is not a clean relative glob`},
		{"glob absolute", "  - submission.csv", "  - /x.csv", `file_export_globs[0]: "/x.csv" is not a clean relative glob`},
		{"glob syntax", "  - submission.csv", "  - '[x.csv'", `file_export_globs[0]: "[x.csv" is not a clean relative glob`},
		{"no globs", "file_export_globs:\n  - submission.csv", "file_export_globs: []", "file_export_globs: empty"},
		{"sota at optimum", "sota_score: 0.942", "sota_score: 1.0", "sota_score: 1 equals optimal_score"},
		{"no shape", "  shape: 300,1\n", "", "logging_info.shape: missing; a task whose submission is submission.csv"},
		{"shape a number", "shape: 300,1", "shape: '300'", "is not a shape"},
		{"shape parenthesised number", "shape: 300,1", "shape: '(300)'", "is not a shape"},
		{"shape zero", "shape: 300,1", "shape: '(0,)'", "is not a shape"},
		{"shape empty list", "shape: 300,1", "shape: []", "is not a shape"},
		{"shape float", "shape: 300,1", "shape: [300.5]", "is not a shape"},
		{"no category", "  category: Math\n", "", "logging_info.category: missing; the task's domain"},
		{"empty dataset", "dataset: ChilleD/SVAMP", "dataset: '  '", "logging_info.dataset: empty"},
		{"null config", "config: default", "config:", "logging_info.config: is empty (null); want text"},
		{"no requirements", "container_python_requirements:\n  - datasets==4.0.0\n", "", "container_python_requirements: missing"},
		{"bad requirement", "  - datasets==4.0.0\nevaluate", "  - 'datasets; rm -rf /'\nevaluate", "is not a requirement"},
		{"empty input columns", "  input_columns:\n    - question_concat", "  input_columns: []", "logging_info.input_columns: empty"},
		{"no sota url", "      sota_paper_url: https://arxiv.org/pdf/2404.14963v5\n", "", "logging_info.sota[0].sota_paper_url: missing"},
		{"paper's one-field sota entries", "      sota_paper_url:", "    - sota_paper_url:", "write each SOTA as one record"},
		{"empty sota", "  sota:\n", "  sota: []\n  old_sota:\n", "logging_info.sota: is a list; want a list of records"},
		{"sota past optimum", "sota_score: 0.942", "sota_score: 1.5", "sota_score: 1.5 is better than optimal_score 1"},
		{"direction", "metric_lower_is_better: false", "metric_lower_is_better: true", "is better than optimal_score"},
		{"worst above sota", "estimated_worst_score: 0.0", "estimated_worst_score: 0.95", "estimated_worst_score: 0.95 is not worse than sota_score 0.942"},
		{"name", "name: MathQuestionAnsweringSVAMPAccuracy", "name: ../evil", `logging_info.name: "../evil": a task name is letters`},
		{"duplicate", "  category: Math", "  category: Math\n  category: Maths", "logging_info.category: given twice"},
		{"nan", "optimal_score: 1.0", "optimal_score: .nan", "optimal_score: is .nan; want a finite number"},
		{"not a mapping", "", "- a\n- b\n", "is a list; want a mapping of fields"},
		{"two documents", "", "a: 1\n---\nb: 2\n", "more than one YAML document"},
		{"empty", "", " ", "empty; write the task's metadata"},
		{"syntax", "", "a: [1, 2\n", "not YAML"},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := strings.Replace(example(t), c.old, c.new, 1)
			if c.old == "" {
				meta = c.new
			}
			_, err := ParseMetadata("m.yaml", []byte(meta))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v; want %q", err, c.want)
			}
		})
	}
	big := strings.Repeat("#", MaxMetadataBytes+1)
	if _, err := ParseMetadata("m.yaml", []byte(big)); err == nil || !strings.Contains(err.Error(), "a metadata file is at most") {
		t.Errorf("oversized: %v", err)
	}
}

// Unknown fields, at any level, are kept with their line and reported; files the format does
// not name are kept and reported.
func TestUnknownKept(t *testing.T) {
	meta := strings.Replace(example(t), "logging_info:\n", "runtime_hint: gpu\nlogging_info:\n  license: CC-BY-4.0\n", 1)
	meta = strings.Replace(meta, "      sota_year: 2026", "      sota_year: 2026\n      sota_code: https://example.org/code", 1)
	dir := writeTask(t, meta)
	os.WriteFile(filepath.Join(dir, "README.txt"), []byte("x"), 0o644)
	task, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, u := range task.Meta.Unknown {
		paths = append(paths, u.Path)
	}
	if strings.Join(paths, " ") != "runtime_hint logging_info.license logging_info.sota[0].sota_code" || task.Meta.Unknown[0].Value != "gpu" || task.Meta.Unknown[0].Line != 8 {
		t.Errorf("unknown %+v", task.Meta.Unknown)
	}
	notes := strings.Join(task.Notes, "\n")
	for _, want := range []string{"metadata.yaml:8: runtime_hint: not a field this version knows; kept", "README.txt: not a file of the AIRS-Bench format; kept"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// A symlink in a task directory is refused by name; so are odd names.
func TestTreeHashRefusals(t *testing.T) {
	dir := writeTask(t, "")
	os.Symlink("/etc/passwd", filepath.Join(dir, "utils.py"))
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "utils.py: a symlink, not a regular file") {
		t.Errorf("symlink: %v", err)
	}
	dir = writeTask(t, "")
	os.WriteFile(filepath.Join(dir, "a\nb"), nil, 0o644)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "a name with a backslash, newline") {
		t.Errorf("newline name: %v", err)
	}
	if _, _, err := TreeHash("testdata/MathQuestionAnsweringSVAMPAccuracy", 2, 1<<20); err == nil || !strings.Contains(err.Error(), "over 2 files") {
		t.Errorf("file cap: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "metadata.yaml")); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file: %v", err)
	}
}

// A task's name is its directory's, as upstream's checker requires; a stored copy (named by its
// hash) is opened with OpenStored.
func TestNameIsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "svamp")
	os.Mkdir(dir, 0o755)
	entries, _ := os.ReadDir("testdata/MathQuestionAnsweringSVAMPAccuracy")
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join("testdata/MathQuestionAnsweringSVAMPAccuracy", e.Name()))
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), `logging_info.name: "MathQuestionAnsweringSVAMPAccuracy" is not the task directory's name "svamp"`) {
		t.Errorf("Open: %v", err)
	}
	if _, err := OpenStored(dir); err != nil {
		t.Errorf("OpenStored: %v", err)
	}
}

// The shapes upstream writes are read as upstream's checker reads them.
func TestShapes(t *testing.T) {
	for in, want := range map[string]string{`300,1`: "[300 1]", `"(4906,)"`: "[4906]", `[1531]`: "[1531]", `"[15857, 2]"`: "[15857 2]", "\n    - 5000\n    - 5": "[5000 5]", `"(10_000,)"`: "[10000]", `"300,"`: "[300]"} {
		meta := strings.Replace(example(t), "shape: 300,1", "shape: "+strings.ReplaceAll(in, `\n`, "\n"), 1)
		m, err := ParseMetadata("m.yaml", []byte(meta))
		if err != nil || fmt.Sprint(m.Info.Shape) != want {
			t.Errorf("shape %s: %v %v; want %s", in, err, m, want)
		}
	}
}

// The shipped task validates.
func TestShippedTasks(t *testing.T) {
	entries, err := os.ReadDir("tasks")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no shipped tasks: %v", err)
	}
	for _, e := range entries {
		task, err := Open(filepath.Join("tasks", e.Name()))
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		if task.Meta.Info.Name != e.Name() || len(task.Notes) != 0 {
			t.Errorf("%s: named %q, notes %q", e.Name(), task.Meta.Info.Name, task.Notes)
		}
	}
}

// A tree is installed under its hash, whole, readable by others; a second install keeps it; a
// symlink in it is refused and nothing is left.
func TestInstallTree(t *testing.T) {
	store := filepath.Join(t.TempDir(), "tree")
	h, err := InstallTree("testdata/MathQuestionAnsweringSVAMPAccuracy", store, MaxTaskFiles, MaxTaskBytes)
	if err != nil {
		t.Fatal(err)
	}
	files, again, err := TreeHash(filepath.Join(store, h), MaxTaskFiles, MaxTaskBytes)
	if err != nil || string(again) != h || len(files) != 5 {
		t.Fatalf("installed tree: %v %s %d files", err, again, len(files))
	}
	if st, _ := os.Stat(filepath.Join(store, h, "evaluate.py")); st.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v", st.Mode())
	}
	if h2, err := InstallTree("testdata/MathQuestionAnsweringSVAMPAccuracy", store, MaxTaskFiles, MaxTaskBytes); err != nil || h2 != h {
		t.Errorf("second install: %v %s", err, h2)
	}
	bad := writeTask(t, "")
	os.Symlink("/etc/shadow", filepath.Join(bad, "utils.py"))
	if _, err := InstallTree(bad, store, MaxTaskFiles, MaxTaskBytes); err == nil || !strings.Contains(err.Error(), "a symlink") {
		t.Errorf("symlink: %v", err)
	}
	entries, _ := os.ReadDir(store)
	if len(entries) != 1 {
		t.Errorf("the store holds %d entries; want the one tree", len(entries))
	}
}

// Upstream's task directories validate unchanged. They are not in this repository (their
// licence forbids copying them here): set SEALRUN_AIRS_BENCH to a checkout's
// airsbench/tasks/rad (git clone https://github.com/facebookresearch/airs-bench) to run it.
func TestUpstreamTasks(t *testing.T) {
	root := os.Getenv("SEALRUN_AIRS_BENCH")
	if root == "" {
		t.Skip("SEALRUN_AIRS_BENCH is not set: point it at airs-bench's airsbench/tasks/rad to validate upstream's tasks")
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		task, err := Open(filepath.Join(root, e.Name()))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		t.Logf("%s: %s, shape %v, SOTA %v, %d note(s)", e.Name(), task.Hash[:12], task.Meta.Info.Shape, task.Meta.Info.SOTA.Score, len(task.Notes))
	}
	if n == 0 {
		t.Fatalf("no task directories in %s", root)
	}
}

// A large tree's install says how far it is; the stored copy hashes to what was printed.
func TestInstallTreeProgress(t *testing.T) {
	src := filepath.Join(t.TempDir(), "raw")
	os.MkdirAll(filepath.Join(src, "ChilleD", "SVAMP", "default"), 0o755)
	big := make([]byte, 48<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	os.WriteFile(filepath.Join(src, "ChilleD", "SVAMP", "default", "data-00000-of-00001.arrow"), big, 0o644)
	os.WriteFile(filepath.Join(src, "ChilleD", "SVAMP", "dataset_dict.json"), []byte(`{"splits": ["train", "test"]}`), 0o644)
	var calls []int64
	store := filepath.Join(t.TempDir(), "tree")
	h, err := InstallTreeWith(src, store, InstallOptions{MaxFiles: 10, MaxBytes: 1 << 30, ProgressEvery: time.Millisecond,
		Progress: func(copied, total int64) {
			if total != int64(len(big))+29 {
				t.Errorf("total %d", total)
			}
			calls = append(calls, copied)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, again, _ := TreeHash(src, 10, 1<<30); string(again) != h {
		t.Errorf("installed as %s; the tree hashes to %s", h, again)
	}
	if _, again, _ := TreeHash(filepath.Join(store, h), 10, 1<<30); string(again) != h {
		t.Errorf("the stored copy hashes to %s", again)
	}
	if len(calls) == 0 {
		t.Error("no progress reported")
	}
	if _, err := InstallTreeWith(src, store, InstallOptions{MaxFiles: 1, MaxBytes: 1 << 30}); err == nil || !strings.Contains(err.Error(), "over 1 files") {
		t.Errorf("file cap: %v", err)
	}
}
