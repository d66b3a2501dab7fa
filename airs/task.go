package airs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealrun/sealrun/digest"
)

// The files of a task directory.
const (
	MetadataFile        = "metadata.yaml"
	DescriptionFile     = "project_description.md"
	PrepareFile         = "prepare.py"
	EvaluatePrepareFile = "evaluate_prepare.py"
	EvaluateFile        = "evaluate.py"
	UtilsFile           = "utils.py" // optional
)

// RequiredFiles are the files every task directory holds.
var RequiredFiles = []string{MetadataFile, DescriptionFile, PrepareFile, EvaluatePrepareFile, EvaluateFile}

// Limits on what a task directory may hold: a task is code and text, its data lives elsewhere.
const (
	MaxMetadataBytes = 1 << 20
	MaxTaskFiles     = 1000
	MaxTaskBytes     = 64 << 20
)

// Metadata is a task's metadata.yaml, as upstream's repository writes it (and its checker,
// airsbench/tasks/rad/test_task_folder.py, requires it).
type Metadata struct {
	MetricLowerIsBetter                 bool     `json:"metric_lower_is_better"`
	FileExportGlobs                     []string `json:"file_export_globs"`
	ContainerPythonRequirements         []string `json:"container_python_requirements"`
	EvaluateContainerPythonRequirements []string `json:"evaluate_container_python_requirements"`
	// PrepareCodePythonRequirements is what prepare.py needs beyond the evaluation image's
	// (two upstream tasks give it); optional.
	PrepareCodePythonRequirements []string `json:"prepare_code_python_requirements,omitempty"`
	Info                          Info     `json:"logging_info"`
	// Unknown are the fields this version does not know: kept, in file order, and reported.
	Unknown []Field `json:"unknown,omitempty"`
	notes   []string
}

// Info is metadata.yaml's logging_info.
type Info struct {
	Name            string   `json:"name"`
	Category        string   `json:"category"`
	ResearchProblem string   `json:"research_problem"`
	OutputType      string   `json:"output_type"`
	Dataset         string   `json:"dataset"`
	Metric          string   `json:"metric"`
	InputColumns    []string `json:"input_columns"`
	// ScoringColumns is scoring_column: one name, or a list of them.
	ScoringColumns []string `json:"scoring_column"`
	// Shape is the submission's shape: upstream writes it as a tuple's text ("(4906,)",
	// "300,1") or a YAML list ([5000, 5]); here it is the dimensions.
	Shape            []int  `json:"shape,omitempty"`
	Config           string `json:"config"`
	TrainSplit       string `json:"train_split"`
	TestSplit        string `json:"test_split"`
	CustomGoldLabels bool   `json:"custom_gold_labels"`
	CustomRadClass   bool   `json:"custom_rad_class"`
	// SOTA is the first entry of logging_info.sota, the one the published analysis uses;
	// SOTAs are all of them.
	SOTA            SOTA   `json:"sota"`
	SOTAs           []SOTA `json:"sotas,omitempty"`
	DatasetPaperURL string `json:"dataset_paper_url"`
	// EstimatedWorstScore and OptimalScore are optional (upstream's checker does not require
	// them, and its analysis uses neither: see score.go); nil when absent.
	EstimatedWorstScore *float64 `json:"estimated_worst_score,omitempty"`
	OptimalScore        *float64 `json:"optimal_score,omitempty"`
}

// SOTA is one entry of logging_info.sota: a list of records, each with at least
// sota_paper_url and sota_score.
type SOTA struct {
	PaperTitle string  `json:"sota_paper_title"`
	PaperURL   string  `json:"sota_paper_url"`
	Score      float64 `json:"sota_score"`
	Notes      string  `json:"sota_notes"`
	Year       int     `json:"sota_year"`
	Venue      string  `json:"sota_venue"`
}

// Field is an unknown field: its dotted path, its line and its value as YAML decodes it.
type Field struct {
	Path  string `json:"path"`
	Line  int    `json:"line"`
	Value any    `json:"value"`
}

// File is one file of a task directory.
type File struct {
	Path   string     `json:"path"`
	Size   int64      `json:"size"`
	SHA256 digest.Hex `json:"sha256"`
}

// Task is a validated task directory.
type Task struct {
	Dir   string
	Meta  Metadata
	Files []File
	// Hash is the directory's hash (TreeHash): what a track pins.
	Hash digest.Hex
	// Notes are what validation kept but reports: unknown fields, files the format does not name.
	Notes []string
}

// Error lists every problem of a task directory, each as "place: what; fix".
type Error struct {
	Dir      string
	Problems []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("task %s: %d problem(s):\n  %s", e.Dir, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Open validates the task directory dir and returns it, or an *Error naming every problem. As
// upstream's checker does, it requires logging_info.name to be the directory's own name.
func Open(dir string) (*Task, error) { return open(dir, true) }

// OpenStored validates a task directory kept under another name (the content store keeps one
// under its hash; its name was checked when it was added, and the hash pins it).
func OpenStored(dir string) (*Task, error) { return open(dir, false) }

func open(dir string, nameIsDir bool) (*Task, error) {
	t := &Task{Dir: dir}
	var problems []string
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		if _, err := os.Lstat(filepath.Join(dir, MetadataFile)); err != nil {
			// Not a task directory at all: say so before walking whatever it is.
			return nil, &Error{Dir: dir, Problems: []string{fmt.Sprintf("%s: no %s; a task directory holds %s (and %s optionally)", dir, MetadataFile, strings.Join(RequiredFiles, ", "), UtilsFile)}}
		}
	}
	files, hash, err := TreeHash(dir, MaxTaskFiles, MaxTaskBytes)
	if err != nil {
		return nil, &Error{Dir: dir, Problems: []string{err.Error()}}
	}
	t.Files, t.Hash = files, hash
	have := map[string]bool{}
	for _, f := range files {
		have[f.Path] = true
	}
	for _, name := range RequiredFiles {
		if !have[name] {
			problems = append(problems, fmt.Sprintf("%s: missing; a task directory holds %s (and %s optionally)", filepath.Join(dir, name), strings.Join(RequiredFiles, ", "), UtilsFile))
		}
	}
	for _, f := range files {
		if f.Path == UtilsFile || contains(RequiredFiles, f.Path) {
			continue
		}
		t.Notes = append(t.Notes, fmt.Sprintf("%s: not a file of the AIRS-Bench format; kept (it is hashed with the task)", filepath.Join(dir, f.Path)))
	}
	if have[MetadataFile] {
		b, err := os.ReadFile(filepath.Join(dir, MetadataFile))
		if err != nil {
			problems = append(problems, err.Error())
		} else {
			m, err := ParseMetadata(filepath.Join(dir, MetadataFile), b)
			if err != nil {
				var pe *Error
				if errors.As(err, &pe) {
					problems = append(problems, pe.Problems...)
				} else {
					problems = append(problems, err.Error())
				}
			} else {
				t.Meta = *m
				if base := filepath.Base(filepath.Clean(dir)); nameIsDir && m.Info.Name != base {
					problems = append(problems, fmt.Sprintf("%s: logging_info.name: %q is not the task directory's name %q; a task directory is named after its task (rename the directory, or fix the name)", filepath.Join(dir, MetadataFile), m.Info.Name, base))
				}
				t.Notes = append(t.Notes, m.notes...)
				for _, u := range m.Unknown {
					t.Notes = append(t.Notes, fmt.Sprintf("%s:%d: %s: not a field this version knows; kept as written and reported", filepath.Join(dir, MetadataFile), u.Line, u.Path))
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, &Error{Dir: dir, Problems: problems}
	}
	return t, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DirectionOptimum is the optimum the published analysis takes for a metric: 0 when lower is
// better, 1 when higher is.
func DirectionOptimum(lowerIsBetter bool) float64 {
	if lowerIsBetter {
		return 0
	}
	return 1
}

// AgentFiles are the task's files an agent gets beside its data, as upstream's harness gives
// them: project_description.md, evaluate.py, and the task's other top-level Python modules
// (utils.py, testing_util.py …) that evaluate.py may import. Never the preparation scripts, a
// custom_labels.py, or anything named gold_*: those hold or make the labels.
func (t *Task) AgentFiles() []string {
	out := []string{DescriptionFile, EvaluateFile}
	for _, f := range t.Files {
		p := f.Path
		if strings.Contains(p, "/") || !strings.HasSuffix(p, ".py") || strings.HasPrefix(p, "gold_") {
			continue
		}
		switch p {
		case EvaluateFile, PrepareFile, EvaluatePrepareFile, "custom_labels.py":
			continue
		}
		out = append(out, p)
	}
	return out
}
