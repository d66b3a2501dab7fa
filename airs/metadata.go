package airs

// metadata.yaml: upstream's task metadata, read strictly (every field's type, every problem
// named with its place and the fix, the keys upstream's harness reads) into Metadata.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

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
		"prepare_code_python_requirements":       func(n *yaml.Node, p string) { m.PrepareCodePythonRequirements = d.lenientList(n, p) },
		"logging_info":                           func(n *yaml.Node, p string) { d.info(n, p, &m.Info, m) },
	}, []string{"metric_lower_is_better", "file_export_globs", "container_python_requirements", "evaluate_container_python_requirements", "logging_info"})
	m.Unknown = d.unknown
	m.notes = d.notes
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
	file      string
	problems  []string
	unknown   []Field
	shapeSeen bool
	notes     []string
}

// lenientList reads a list of text that upstream's checker does not check: a lone string (one
// upstream task writes "-sktime", a list's dash inside the text) is read as one entry, noted.
func (d *decoder) lenientList(n *yaml.Node, p string) []string {
	r := resolve(n)
	if r.Kind == yaml.ScalarNode && r.ShortTag() == "!!str" {
		v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r.Value), "-"))
		d.notes = append(d.notes, fmt.Sprintf("%s:%d:%d: %s: the string %q, read as the list [%s]; write it as a YAML list", d.file, r.Line, r.Column, p, clip(r.Value), v))
		return []string{v}
	}
	return d.strings(n, p)
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
	"metric_lower_is_better":                 "true when a smaller metric is better (an error), false when larger is (an accuracy)",
	"file_export_globs":                      "the files of the agent's submission, for example [submission.csv]",
	"container_python_requirements":          "the Python packages the agent's compute needs, for example [datasets==4.0.0] ([] for none)",
	"evaluate_container_python_requirements": "the Python packages evaluate.py and the preparation scripts need, for example [datasets==4.0.0, pandas] ([] for none)",
	"category":                               "the task's domain, for example Math",
	"output_type":                            "what a prediction is, for example text-generation or regression",
	"config":                                 "the dataset's configuration (the HuggingFace config), for example default",
	"custom_gold_labels":                     "true when the task makes its gold labels itself (custom_labels.py), else false",
	"custom_rad_class":                       "true when the task needs its own harness class, else false",
	"dataset_paper_url":                      "the URL of the dataset's paper",
	"shape":                                  "the shape of submission.csv, for example (300,1) or [4906]",
	"sota_paper_url":                         "the URL of the paper the SOTA score comes from",
	"logging_info":                           "the task's description: name, research_problem, dataset, metric, splits, sota, worst and optimal scores",
	"name":                                   "the task's unique name, for example MathQuestionAnsweringSVAMPAccuracy",
	"research_problem":                       "the problem in a few words, for example Math Question Answering",
	"dataset":                                "the dataset's identifier, for example ChilleD/SVAMP",
	"metric":                                 "the name of the metric evaluate.py reports in its result JSON, for example Accuracy",
	"input_columns":                          "the columns the agent may use, for example [question_concat]",
	"scoring_column":                         "the column the submission is scored against, for example Answer",
	"train_split":                            "the train split's folder name, for example train",
	"test_split":                             "the test split's folder name, for example test",
	"sota":                                   "the state of the art: a list of records, each with sota_score (a number) and sota_paper_url",
	"sota_score":                             "the state-of-the-art value of the metric, a number",
	"estimated_worst_score":                  "a number: the score of a worthless submission (the floor of normalized scores while few runs exist)",
	"optimal_score":                          "a number: the best possible score (1.0 for an accuracy, 0.0 for an error)",
}

func (d *decoder) info(n *yaml.Node, prefix string, in *Info, m *Metadata) {
	str := func(dst *string) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) { *dst = d.text(n, p) }
	}
	optNumber := func(dst **float64) func(*yaml.Node, string) {
		return func(n *yaml.Node, p string) { v := d.number(n, p); *dst = &v }
	}
	// What upstream's checker requires in logging_info, each non-empty; shape too when the
	// submission is submission.csv (checked in check, once file_export_globs is known).
	d.fields(n, prefix, map[string]func(*yaml.Node, string){
		"name":             str(&in.Name),
		"category":         str(&in.Category),
		"research_problem": str(&in.ResearchProblem),
		"output_type":      str(&in.OutputType),
		"dataset":          str(&in.Dataset),
		"metric":           str(&in.Metric),
		"input_columns": func(n *yaml.Node, p string) {
			in.InputColumns = d.strings(n, p)
			if resolve(n).Kind == yaml.SequenceNode && len(in.InputColumns) == 0 {
				d.bad(n, p, "empty; %s", hints["input_columns"])
			}
		},
		"scoring_column": func(n *yaml.Node, p string) {
			if resolve(n).Kind == yaml.SequenceNode {
				in.ScoringColumns = d.strings(n, p)
				if len(in.ScoringColumns) == 0 {
					d.bad(n, p, "empty; %s", hints["scoring_column"])
				}
			} else {
				in.ScoringColumns = []string{d.text(n, p)}
			}
		},
		"shape":                 func(n *yaml.Node, p string) { in.Shape = d.shape(n, p) },
		"config":                str(&in.Config),
		"train_split":           str(&in.TrainSplit),
		"test_split":            str(&in.TestSplit),
		"custom_gold_labels":    func(n *yaml.Node, p string) { in.CustomGoldLabels = d.boolean(n, p) },
		"custom_rad_class":      func(n *yaml.Node, p string) { in.CustomRadClass = d.boolean(n, p) },
		"sota":                  func(n *yaml.Node, p string) { in.SOTAs = d.sotas(n, p) },
		"dataset_paper_url":     str(&in.DatasetPaperURL),
		"estimated_worst_score": optNumber(&in.EstimatedWorstScore),
		"optimal_score":         optNumber(&in.OptimalScore),
	}, []string{"name", "dataset", "category", "research_problem", "output_type", "config", "train_split", "test_split", "input_columns", "scoring_column", "custom_gold_labels", "custom_rad_class", "metric", "sota", "dataset_paper_url"})
	if len(in.SOTAs) > 0 {
		in.SOTA = in.SOTAs[0]
	}
	d.shapeSeen = resolve(n).Kind == yaml.MappingNode && hasKey(resolve(n), "shape")
}

func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return true
		}
	}
	return false
}

// sotas decodes logging_info.sota: a list of records (upstream writes one), each with at least
// sota_paper_url and sota_score. The paper's appendix prints the record as one-field entries;
// upstream's checker refuses that form, and so does this one, saying how to write it.
func (d *decoder) sotas(n *yaml.Node, prefix string) []SOTA {
	n = resolve(n)
	if n.Kind == yaml.MappingNode {
		n = &yaml.Node{Kind: yaml.SequenceNode, Line: n.Line, Column: n.Column, Content: []*yaml.Node{n}}
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		d.bad(n, prefix, "is %s; want a list of records, for example\n      - sota_paper_url: https://…\n        sota_score: 0.94", describe(n))
		return nil
	}
	var out []SOTA
	for i, item := range n.Content {
		item = resolve(item)
		p := fmt.Sprintf("%s[%d]", prefix, i)
		if item.Kind != yaml.MappingNode {
			d.bad(item, p, "is %s; want a record with sota_paper_url and sota_score", describe(item))
			continue
		}
		if len(item.Content) == 2 && len(n.Content) > 1 && !hasKey(item, "sota_paper_url") {
			d.bad(item, p, "holds only %s: write each SOTA as one record (- sota_paper_url: …, then sota_score: … indented under it, without a dash), not one field per entry as the paper's appendix prints it", item.Content[0].Value)
			continue
		}
		var s SOTA
		d.fields(item, p, map[string]func(*yaml.Node, string){
			"sota_paper_title": func(n *yaml.Node, p string) { s.PaperTitle = d.str(n, p) },
			"sota_paper_url":   func(n *yaml.Node, p string) { s.PaperURL = d.text(n, p) },
			"sota_score":       func(n *yaml.Node, p string) { s.Score = d.number(n, p) },
			"sota_notes":       func(n *yaml.Node, p string) { s.Notes = d.str(n, p) },
			"sota_year":        func(n *yaml.Node, p string) { s.Year = d.integer(n, p) },
			"sota_venue":       func(n *yaml.Node, p string) { s.Venue = d.str(n, p) },
		}, []string{"sota_paper_url", "sota_score"})
		out = append(out, s)
	}
	return out
}

// shapeItemRE is one dimension of a shape written as text: a Python int literal.
var shapeItemRE = regexp.MustCompile(`^[0-9](_?[0-9])*$`)

// shape reads logging_info.shape as upstream's checker does (ast.literal_eval of a string, or
// the YAML list): a tuple or list of at least one positive whole number. "300,1", "(4906,)",
// "[1531]" and a YAML list [5000, 5] are shapes; "300", "(300)", "(0,)" and "[]" are not.
func (d *decoder) shape(n *yaml.Node, p string) []int {
	n = resolve(n)
	bad := func() []int {
		d.bad(n, p, "%s is not a shape; write a tuple or list of positive whole numbers, for example (300,1), \"(4906,)\" or [5000, 5]", describe(n))
		return nil
	}
	var items []string
	switch {
	case n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			c = resolve(c)
			if c.Kind != yaml.ScalarNode || c.ShortTag() != "!!int" {
				return bad()
			}
			items = append(items, c.Value)
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str":
		v := strings.TrimSpace(n.Value)
		tuple := true
		switch {
		case strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]"):
			v, tuple = v[1:len(v)-1], false
		case strings.HasPrefix(v, "(") && strings.HasSuffix(v, ")"):
			v = v[1 : len(v)-1]
		}
		if tuple && !strings.Contains(v, ",") {
			return bad() // (300) and 300 are numbers, not tuples
		}
		v = strings.TrimSpace(v)
		v = strings.TrimSuffix(v, ",")
		if strings.TrimSpace(v) == "" {
			return bad()
		}
		items = strings.Split(v, ",")
	default:
		return bad()
	}
	if len(items) == 0 {
		return bad()
	}
	var dims []int
	for _, it := range items {
		it = strings.TrimSpace(it)
		if !shapeItemRE.MatchString(it) || (len(it) > 1 && it[0] == '0') {
			return bad()
		}
		var v int
		if _, err := fmt.Sscan(strings.ReplaceAll(it, "_", ""), &v); err != nil || v <= 0 || v > 1<<40 {
			return bad()
		}
		dims = append(dims, v)
	}
	return dims
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

// text is str for a field upstream requires non-empty.
func (d *decoder) text(n *yaml.Node, p string) string {
	v := d.str(n, p)
	if resolve(n).Kind == yaml.ScalarNode && resolve(n).ShortTag() != "!!null" && strings.TrimSpace(v) == "" {
		d.bad(n, p, "empty; %s", hints[p[strings.LastIndex(p, ".")+1:]])
	}
	return v
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
	if len(m.FileExportGlobs) == 0 {
		d.bad(root, "file_export_globs", "empty; %s", hints["file_export_globs"])
	}
	for i, g := range m.FileExportGlobs {
		if _, err := path.Match(g, ""); err != nil || g == "" || path.IsAbs(g) || g != path.Clean(g) || strings.HasPrefix(g, "..") || strings.ContainsAny(g, "\\\n") {
			d.bad(root, fmt.Sprintf("file_export_globs[%d]", i), "%q is not a clean relative glob (path.Match syntax, '/' separated, no '..'); for example submission.csv or preds/*.csv", g)
		}
	}
	if contains(m.FileExportGlobs, "submission.csv") && !d.shapeSeen {
		d.bad(root, "logging_info.shape", "missing; a task whose submission is submission.csv gives its shape, for example (300,1)")
	}
	for _, reqs := range []struct {
		name string
		list []string
	}{{"container_python_requirements", m.ContainerPythonRequirements}, {"evaluate_container_python_requirements", m.EvaluateContainerPythonRequirements}, {"prepare_code_python_requirements", m.PrepareCodePythonRequirements}} {
		for i, r := range reqs.list {
			if _, err := ParseRequirement(r); err != nil {
				d.bad(root, fmt.Sprintf("%s[%d]", reqs.name, i), "%v", err)
			}
		}
	}
	// The scores, where given, must be ordered as the direction says, and the SOTA short of the
	// optimum: the march of 9s measures the distance to the optimum, and the SOTA's is the unit.
	sota := in.SOTA.Score
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
	if w := in.EstimatedWorstScore; w != nil && !better(sota, *w) {
		d.bad(root, "logging_info.estimated_worst_score", "%v is not worse than sota_score %v (%s is better); the worst score is a worthless submission's", *w, sota, dir)
	}
	if in.OptimalScore == nil {
		return
	}
	opt, optField := *in.OptimalScore, "optimal_score"
	switch {
	case sota == opt:
		d.bad(root, "logging_info.sota[0].sota_score", "%v equals %s %v: normalized scores measure the distance to the optimum in units of the SOTA's, so the SOTA must fall short of it", sota, optField, opt)
	case better(sota, opt):
		d.bad(root, "logging_info.sota[0].sota_score", "%v is better than %s %v (metric_lower_is_better is %v: %s is better); check both and the direction", sota, optField, opt, m.MetricLowerIsBetter, dir)
	}
}
