package trackpin

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sealrun/sealrun/policy"
)

// trackText edits a track file's values in place, line by line, so its comments and layout stay
// as the author wrote them. It knows the subset of TOML track files use: [table] headers and
// key = value lines with an optional trailing comment.
type trackText struct {
	lines []string
}

var (
	tableLine = regexp.MustCompile(`^\s*\[([A-Za-z0-9_.-]+)\]\s*(#.*)?$`)
	valueLine = regexp.MustCompile(`^(\s*)([A-Za-z0-9_-]+)(\s*=\s*)("(?:[^"\\]|\\.)*"|[^\s#]+)(\s*)(#.*)?$`)
	// A comment that says the value is not real yet; it goes when the value is pinned.
	placeholderNote = regexp.MustCompile(`(?i)placeholder|machine-specific`)
)

func newTrackText(s string) *trackText { return &trackText{lines: strings.Split(s, "\n")} }

func (t *trackText) String() string { return strings.Join(t.lines, "\n") }

// set gives table.key the TOML value lit (already quoted if a string). A trailing comment that
// calls the old value a placeholder is replaced by note; other comments stay. A key the table
// lacks is added after its last line; a missing table is an error (the track's author chose the
// tables, pin only fills them).
func (t *trackText) set(table, key, lit, note string) error {
	cur, last := "", -1
	for i, l := range t.lines {
		if m := tableLine.FindStringSubmatch(l); m != nil {
			cur = m[1]
			if cur == table {
				last = i
			}
			continue
		}
		if cur != table {
			continue
		}
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(strings.TrimSpace(l), "#") {
			last = i
		}
		m := valueLine.FindStringSubmatch(l)
		if m == nil || m[2] != key {
			continue
		}
		comment := m[6]
		if comment == "" || placeholderNote.MatchString(comment) {
			comment = note
		}
		line := m[1] + m[2] + m[3] + lit
		if comment != "" {
			line += "  " + comment
		}
		t.lines[i] = line
		return nil
	}
	if last < 0 {
		return fmt.Errorf("the track file has no [%s] table; add one (docs/OPERATING.md, \"Tracks\")", table)
	}
	line := key + " = " + lit
	if note != "" {
		line += "  " + note
	}
	t.lines = append(t.lines[:last+1], append([]string{line}, t.lines[last+1:]...)...)
	return nil
}

// placeholderPin says whether a pinned value is one of the well-formed stand-ins track files
// ship with: a hash of one repeated digit, or an image on registry.example.
func placeholderPin(v string) bool {
	if v == "" {
		return true
	}
	if strings.HasPrefix(v, "registry.example/") {
		return true
	}
	if i := strings.LastIndex(v, ":"); i >= 0 {
		v = v[i+1:]
	}
	return len(v) == 64 && strings.Count(v, v[:1]) == 64
}

// Placeholder is one value of a track that a pin sets: its table.key and the option of Pins that sets
// it (cmd's `sealrun track pin` has a flag for each).
type Placeholder struct{ Key, Option string }

// Unpinned lists the pins of t that are still placeholders.
func Unpinned(t *policy.Track) []Placeholder {
	var out []Placeholder
	add := func(v, key, option string) {
		if placeholderPin(v) {
			out = append(out, Placeholder{Key: key, Option: option})
		}
	}
	if t.Task != nil {
		add(string(t.Task.SHA256), "task.sha256", "Task")
		add(string(t.Task.DataSHA256), "task.data_sha256", "TaskData")
	} else {
		add(string(t.Exam.SHA256), "exam.sha256", "Exam")
		add(string(t.Exam.ValidationSHA256), "exam.validation_sha256", "Kit")
		add(string(t.Kit.SHA256), "kit.sha256", "Kit")
	}
	add(t.Images.Controller.String(), "images.controller", "Controller")
	add(t.Images.Runner.String(), "images.runner", "Runner")
	add(t.Images.Grader.String(), "images.grader", "Grader")
	add(string(t.Scaffold.ConfigSHA256), "scaffold.config_sha256", "Controller")
	return out
}
