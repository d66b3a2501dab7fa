package airs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
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

// Metadata is a task's metadata.yaml, as the AIRS-Bench paper (appendix B.1.3) writes it.
type Metadata struct {
	MetricLowerIsBetter                 bool     `json:"metric_lower_is_better"`
	FileExportGlobs                     []string `json:"file_export_globs"`
	ContainerPythonRequirements         []string `json:"container_python_requirements"`
	EvaluateContainerPythonRequirements []string `json:"evaluate_container_python_requirements"`
	Info                                Info     `json:"logging_info"`
	// Unknown are the fields this version does not know: kept, in file order, and reported.
	Unknown []Field `json:"unknown,omitempty"`
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
	ScoringColumns      []string `json:"scoring_column"`
	Shape               string   `json:"shape"`
	Config              string   `json:"config"`
	TrainSplit          string   `json:"train_split"`
	TestSplit           string   `json:"test_split"`
	CustomGoldLabels    bool     `json:"custom_gold_labels"`
	CustomRadClass      bool     `json:"custom_rad_class"`
	SOTA                SOTA     `json:"sota"`
	DatasetPaperURL     string   `json:"dataset_paper_url"`
	EstimatedWorstScore float64  `json:"estimated_worst_score"`
	OptimalScore        float64  `json:"optimal_score"`
}

// SOTA is logging_info.sota: the paper writes it as a list of one-key maps; a plain map is
// accepted too.
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
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Task is a validated task directory.
type Task struct {
	Dir   string
	Meta  Metadata
	Files []File
	// Hash is the directory's hash (TreeHash): what a track pins.
	Hash string
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

// Open validates the task directory dir and returns it, or an *Error naming every problem.
func Open(dir string) (*Task, error) {
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

// nameRE is what a task name may be: it names tracks and directories.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ParseMetadata parses and checks metadata.yaml. The error is an *Error with every problem as
// file:line:column: field: what; fix.
func ParseMetadata(file string, data []byte) (*Metadata, error) {
	if len(data) > MaxMetadataBytes {
		return nil, &Error{Dir: filepath.Dir(file), Problems: []string{fmt.Sprintf("%s: %d bytes; a metadata file is at most %d", file, len(data), MaxMetadataBytes)}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		msg := "empty; write the task's metadata (see the AIRS-Bench paper, appendix B.1.3)"
		if !errors.Is(err, io.EOF) {
			msg = "not YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
		}
		return nil, &Error{Dir: filepath.Dir(file), Problems: []string{file + ": " + msg}}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &Error{Dir: filepath.Dir(file), Problems: []string{file + ": more than one YAML document; write one"}}
	}
	d := &decoder{file: file}
	m := &Metadata{}
	root := doc.Content[0]
	d.fields(root, "", map[string]func(*yaml.Node, string){
		"metric_lower_is_better":                 func(n *yaml.Node, p string) { m.MetricLowerIsBetter = d.boolean(n, p) },
		"file_export_globs":                      func(n *yaml.Node, p string) { m.FileExportGlobs = d.strings(n, p) },
		"container_python_requirements":          func(n *yaml.Node, p string) { m.ContainerPythonRequirements = d.strings(n, p) },
		"evaluate_container_python_requirements": func(n *yaml.Node, p string) { m.EvaluateContainerPythonRequirements = d.strings(n, p) },
		"logging_info":                           func(n *yaml.Node, p string) { d.info(n, p, &m.Info) },
	}, []string{"metric_lower_is_better", "file_export_globs", "logging_info"})
	m.Unknown = d.unknown
	if len(d.problems) == 0 {
		d.check(root, m)
	}
	if len(d.problems) > 0 {
		return nil, &Error{Dir: filepath.Dir(file), Problems: d.problems}
	}
	return m, nil
}

// decoder walks the YAML nodes, collecting every problem and every unknown field.
type decoder struct {
	file     string
	problems []string
	unknown  []Field
}

func (d *decoder) bad(n *yaml.Node, field, format string, args ...any) {
	at := d.file
	if n != nil {
		at = fmt.Sprintf("%s:%d:%d", d.file, n.Line, n.Column)
	}
	if field != "" {
		at += ": " + field
	}
	d.problems = append(d.problems, at+": "+fmt.Sprintf(format, args...))
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// fields decodes a mapping: each known key by its function, each unknown kept; required keys
// missing are problems.
func (d *decoder) fields(n *yaml.Node, prefix string, known map[string]func(*yaml.Node, string), required []string) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.bad(n, prefix, "is %s; want a mapping of fields", describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		p := join(prefix, key)
		if k.Kind != yaml.ScalarNode {
			d.bad(k, prefix, "a key is %s; keys are names", describe(k))
			continue
		}
		if seen[key] {
			d.bad(k, p, "given twice; give each field once")
			continue
		}
		seen[key] = true
		if f, ok := known[key]; ok {
			f(v, p)
			continue
		}
		var val any
		if err := v.Decode(&val); err != nil {
			val = v.Value
		}
		d.unknown = append(d.unknown, Field{Path: p, Line: k.Line, Value: val})
	}
	for _, r := range required {
		if !seen[r] {
			d.bad(n, join(prefix, r), "missing; %s", hints[r])
		}
	}
}

// hints say what a missing required field is.
var hints = map[string]string{
	"metric_lower_is_better": "true when a smaller metric is better (an error), false when larger is (an accuracy)",
	"file_export_globs":      "the files of the agent's submission, for example [submission.csv]",
	"logging_info":           "the task's description: name, research_problem, dataset, metric, splits, sota, worst and optimal scores",
	"name":                   "the task's unique name, for example MathQuestionAnsweringSVAMPAccuracy",
	"research_problem":       "the problem in a few words, for example Math Question Answering",
	"dataset":                "the dataset's identifier, for example ChilleD/SVAMP",
	"metric":                 "the name of the metric evaluate.py reports in its result JSON, for example Accuracy",
	"input_columns":          "the columns the agent may use, for example [question_concat]",
	"scoring_column":         "the column the submission is scored against, for example Answer",
	"train_split":            "the train split's folder name, for example train",
	"test_split":             "the test split's folder name, for example test",
	"sota":                   "the state of the art: sota_score (a number) and the paper it comes from",
	"sota_score":             "the state-of-the-art value of the metric, a number",
	"estimated_worst_score":  "a number: the score of a worthless submission (the floor of normalized scores while few runs exist)",
	"optimal_score":          "a number: the best possible score (1.0 for an accuracy, 0.0 for an error)",
}

func (d *decoder) info(n *yaml.Node, prefix string, in *Info) {
	str := func(dst *string) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) { *dst = d.str(n, p) }
	}
	d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"name":             str(&in.Name),
		"category":         str(&in.Category),
		"research_problem": str(&in.ResearchProblem),
		"output_type":      str(&in.OutputType),
		"dataset":          str(&in.Dataset),
		"metric":           str(&in.Metric),
		"input_columns":    func(n *yaml.Node, p string) { in.InputColumns = d.strings(n, p) },
		"scoring_column": func(n *yaml.Node, p string) {
			if resolve(n).Kind == yaml.SequenceNode {
				in.ScoringColumns = d.strings(n, p)
			} else {
				in.ScoringColumns = []string{d.str(n, p)}
			}
		},
		"shape":                 str(&in.Shape),
		"config":                str(&in.Config),
		"train_split":           str(&in.TrainSplit),
		"test_split":            str(&in.TestSplit),
		"custom_gold_labels":    func(n *yaml.Node, p string) { in.CustomGoldLabels = d.boolean(n, p) },
		"custom_rad_class":      func(n *yaml.Node, p string) { in.CustomRadClass = d.boolean(n, p) },
		"sota":                  func(n *yaml.Node, p string) { d.sota(n, p, &in.SOTA) },
		"dataset_paper_url":     str(&in.DatasetPaperURL),
		"estimated_worst_score": func(n *yaml.Node, p string) { in.EstimatedWorstScore = d.number(n, p) },
		"optimal_score":         func(n *yaml.Node, p string) { in.OptimalScore = d.number(n, p) },
	}, []string{"name", "research_problem", "dataset", "metric", "input_columns", "scoring_column", "train_split", "test_split", "sota", "estimated_worst_score", "optimal_score"})
}

// sota decodes the paper's list of one-key maps into one mapping, or a mapping as it is.
func (d *decoder) sota(n *yaml.Node, prefix string, s *SOTA) {
	n = resolve(n)
	if n.Kind == yaml.SequenceNode {
		merged := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
		for _, item := range n.Content {
			item = resolve(item)
			if item.Kind != yaml.MappingNode {
				d.bad(item, prefix, "an entry is %s; write the sota list as one-field maps (- sota_score: 0.94)", describe(item))
				continue
			}
			merged.Content = append(merged.Content, item.Content...)
		}
		n = merged
	}
	d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"sota_paper_title": func(n *yaml.Node, p string) { s.PaperTitle = d.str(n, p) },
		"sota_paper_url":   func(n *yaml.Node, p string) { s.PaperURL = d.str(n, p) },
		"sota_score":       func(n *yaml.Node, p string) { s.Score = d.number(n, p) },
		"sota_notes":       func(n *yaml.Node, p string) { s.Notes = d.str(n, p) },
		"sota_year":        func(n *yaml.Node, p string) { s.Year = d.integer(n, p) },
		"sota_venue":       func(n *yaml.Node, p string) { s.Venue = d.str(n, p) },
	}, []string{"sota_score"})
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return resolve(n.Content[0])
	}
	return n
}

// describe names what a node is, for problems.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		case "!!int", "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return "the boolean " + n.Value
		case "!!null":
			return "empty (null)"
		}
		return fmt.Sprintf("%q (%s)", clip(n.Value), n.ShortTag())
	}
	return "not a value"
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

func (d *decoder) str(n *yaml.Node, p string) string {
	n = resolve(n)
	// Numbers and booleans read as text where text is asked (a year, a config "default").
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" || n.ShortTag() == "!!binary" {
		d.bad(n, p, "is %s; want text", describe(n))
		return ""
	}
	if strings.ContainsRune(n.Value, 0) || len(n.Value) > 64<<10 {
		d.bad(n, p, "holds a NUL byte or over 64 KiB; want plain text")
		return ""
	}
	return n.Value
}

func (d *decoder) strings(n *yaml.Node, p string) []string {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		d.bad(n, p, "is %s; want a list of text, for example [a, b]", describe(n))
		return nil
	}
	out := []string{}
	for i, c := range n.Content {
		out = append(out, d.str(c, fmt.Sprintf("%s[%d]", p, i)))
	}
	return out
}

func (d *decoder) boolean(n *yaml.Node, p string) bool {
	n = resolve(n)
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		d.bad(n, p, "is %s; want true or false", describe(n))
	}
	return b
}

func (d *decoder) number(n *yaml.Node, p string) float64 {
	n = resolve(n)
	var f float64
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&f) != nil {
		d.bad(n, p, "is %s; want a number", describe(n))
		return 0
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		d.bad(n, p, "is %s; want a finite number", n.Value)
	}
	return f
}

func (d *decoder) integer(n *yaml.Node, p string) int {
	n = resolve(n)
	var i int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		d.bad(n, p, "is %s; want a whole number", describe(n))
	}
	return i
}

// check applies the rules between fields, once every field decoded.
func (d *decoder) check(root *yaml.Node, m *Metadata) {
	in := &m.Info
	if !nameRE.MatchString(in.Name) {
		d.bad(root, "logging_info.name", "%q: a task name is letters, digits, '_', '.', '-' (at most 128), starting with a letter or digit", clip(in.Name))
	}
	if in.Metric == "" {
		d.bad(root, "logging_info.metric", "empty; %s", hints["metric"])
	}
	if len(m.FileExportGlobs) == 0 {
		d.bad(root, "file_export_globs", "empty; %s", hints["file_export_globs"])
	}
	for i, g := range m.FileExportGlobs {
		if _, err := path.Match(g, ""); err != nil || g == "" || path.IsAbs(g) || g != path.Clean(g) || strings.HasPrefix(g, "..") || strings.ContainsAny(g, "\\\n") {
			d.bad(root, fmt.Sprintf("file_export_globs[%d]", i), "%q is not a clean relative glob (path.Match syntax, '/' separated, no '..'); for example submission.csv or preds/*.csv", g)
		}
	}
	for _, reqs := range []struct {
		name string
		list []string
	}{{"container_python_requirements", m.ContainerPythonRequirements}, {"evaluate_container_python_requirements", m.EvaluateContainerPythonRequirements}} {
		for i, r := range reqs.list {
			if strings.TrimSpace(r) == "" || strings.ContainsAny(r, "\n\r") {
				d.bad(root, fmt.Sprintf("%s[%d]", reqs.name, i), "%q is not a requirement; write one per entry, for example datasets==4.0.0", r)
			}
		}
	}
	if in.Shape != "" && !regexp.MustCompile(`^[0-9]+(,[0-9]+)*$`).MatchString(strings.ReplaceAll(in.Shape, " ", "")) {
		d.bad(root, "logging_info.shape", "%q is not a shape; write rows,columns, for example 300,1", in.Shape)
	}
	// The scores must be ordered as the direction says, and the SOTA short of the optimum: the
	// march of 9s measures the distance to the optimum, and the SOTA's is the unit.
	opt, sota, worst := in.OptimalScore, in.SOTA.Score, in.EstimatedWorstScore
	better := func(a, b float64) bool { // a strictly better than b
		if m.MetricLowerIsBetter {
			return a < b
		}
		return a > b
	}
	dir := "higher"
	if m.MetricLowerIsBetter {
		dir = "lower"
	}
	switch {
	case sota == opt:
		d.bad(root, "logging_info.sota.sota_score", "%v equals optimal_score: normalized scores measure the distance to the optimum in units of the SOTA's, so the SOTA must fall short of it", sota)
	case better(sota, opt):
		d.bad(root, "logging_info.sota.sota_score", "%v is better than optimal_score %v (metric_lower_is_better is %v: %s is better); check both and the direction", sota, opt, m.MetricLowerIsBetter, dir)
	}
	if !better(sota, worst) {
		d.bad(root, "logging_info.estimated_worst_score", "%v is not worse than sota_score %v (%s is better); the worst score is a worthless submission's", worst, sota, dir)
	}
}

// TreeHash hashes a directory the way this shell recipe does, and lists its files:
//
//	cd DIR && find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
//
// Only regular files and directories are allowed (a symlink, device or socket is an error naming
// it), names must be printable without escapes (sha256sum would escape them), and the counts are
// capped.
func TreeHash(dir string, maxFiles int, maxBytes int64) ([]File, string, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, "", err
	}
	if !st.IsDir() {
		return nil, "", fmt.Errorf("%s is not a directory", dir)
	}
	var files []File
	var total int64
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if strings.ContainsAny(rel, "\\\n\r") || !isPrintable(rel) {
			return fmt.Errorf("%s: a name with a backslash, newline or unprintable byte; rename it", p)
		}
		switch {
		case e.IsDir():
			return nil
		case !e.Type().IsRegular():
			return fmt.Errorf("%s: %s, not a regular file; a task or data directory holds files and directories only (copy the file in its place)", p, typeName(e.Type()))
		}
		if len(files) >= maxFiles {
			return fmt.Errorf("%s: over %d files", dir, maxFiles)
		}
		sum, n, err := hashFile(p)
		if err != nil {
			return err
		}
		if total += n; total > maxBytes {
			return fmt.Errorf("%s: over %d bytes of files", dir, maxBytes)
		}
		files = append(files, File{Path: rel, Size: n, SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s  %s\n", f.SHA256, f.Path)
	}
	return files, hex.EncodeToString(h.Sum(nil)), nil
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
