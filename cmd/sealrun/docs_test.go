package main

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Every sealrun command the documentation shows in a shell block names a verb that exists and
// only flags that verb has: a renamed verb or flag fails here, not in a reader's terminal.
// (docs/OPERATOR.md's blocks are also run whole by e2e's TestOperatorWalkthrough.)
func TestDocumentedCommandsExist(t *testing.T) {
	files := []string{"../../README.md", "../../docs/OPERATOR.md", "../../docs/OPERATING.md", "../../docs/READER.md", "../../docs/INTERNALS.md",
		"../../docs/DEVELOPING.md", "../../docs/TRANSCRIPT.md", "../../attest/VERIFY.md", "../../controller/SCAFFOLD.md", "../../kits/KIT.md", "../../leaderboard/FORMAT.md"}
	checked := 0
	for _, file := range files {
		for _, c := range documentedCommands(t, file) {
			checked++
			root := newRootCmd(io.Discard, io.Discard)
			cmd, rest, err := root.Find(c.args[1:])
			if err != nil || cmd == root {
				t.Errorf("%s:%d: %q: not a sealrun command (%v)", file, c.line, c.text, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s:%d: %q: %v", file, c.line, c.text, err)
				continue
			}
			// A command with subcommands runs one of them, unless it takes arguments of its own
			// (sealrun amend RUN, beside sealrun amend review FILE) and is given them.
			if cmd.HasSubCommands() && len(cmd.Flags().Args()) == 0 {
				t.Errorf("%s:%d: %q: %q needs one of its subcommands", file, c.line, c.text, cmd.CommandPath())
			}
		}
	}
	t.Logf("%d documented sealrun commands checked", checked)
	if checked < 40 {
		t.Errorf("only %d documented sealrun commands found; the extraction is broken", checked)
	}
}

type docCommand struct {
	line int
	text string
	args []string
}

// documentedCommands returns the lines of a Markdown file's ```sh blocks that run sealrun (with
// their continuation lines joined and comments cut), split into words.
func documentedCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []docCommand
	in := false
	var pending string
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			in = strings.TrimPrefix(l, "```") == "sh" && !in
			pending = ""
			continue
		}
		if !in {
			continue
		}
		if pending == "" {
			start = n
		}
		pending += " " + strings.TrimSpace(l)
		if strings.HasSuffix(pending, "\\") {
			pending = strings.TrimSuffix(pending, "\\")
			continue
		}
		text := strings.TrimSpace(pending)
		pending = ""
		if i := strings.Index(text, " #"); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		// Only the command itself: up to a pipe, a redirection or a list operator.
		for _, sep := range []string{" | ", " > ", " >> ", " && ", " || ", "; "} {
			if i := strings.Index(text, sep); i >= 0 {
				text = text[:i]
			}
		}
		if strings.HasPrefix(text, "sealrun ") {
			out = append(out, docCommand{line: start, text: text, args: strings.Fields(text)})
		}
	}
	return out
}

// Every link between the project's documents resolves: a relative link names a file or directory
// of the repository, and an anchor (#...) a heading of the file it points into.
func TestDocLinksResolve(t *testing.T) {
	var docs []string
	filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			docs = append(docs, p)
		}
		return nil
	})
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := code.ReplaceAllString(string(b), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", strings.TrimPrefix(doc, "../../"), target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(headingAnchors(t, path), anchor) {
				t.Errorf("%s: link %q: %s has no heading #%s", strings.TrimPrefix(doc, "../../"), target, strings.TrimPrefix(path, "../../"), anchor)
			}
		}
	}
	t.Logf("%d links in %d documents checked", checked, len(docs))
	if checked < 100 {
		t.Errorf("only %d links found; the extraction is broken", checked)
	}
}

// headingAnchors are the anchors GitHub gives a Markdown file's headings: lower case, spaces to
// '-', punctuation other than '-' and '_' dropped.
func headingAnchors(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		h, ok := strings.CutPrefix(l, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		out = append(out, a.String())
	}
	return out
}
