package main

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
)

// Every sealrun command the documentation shows in a shell block names a verb that exists and
// only flags that verb has: a renamed verb or flag fails here, not in a reader's terminal.
// (docs/OPERATOR.md's blocks are also run whole by e2e's TestOperatorWalkthrough.)
func TestDocumentedCommandsExist(t *testing.T) {
	files := []string{"../../README.md", "../../docs/OPERATOR.md", "../../attest/VERIFY.md", "../../controller/SCAFFOLD.md", "../../kits/KIT.md", "../../leaderboard/FORMAT.md"}
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
			if cmd.HasSubCommands() {
				t.Errorf("%s:%d: %q: %q needs one of its subcommands", file, c.line, c.text, cmd.CommandPath())
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s:%d: %q: %v", file, c.line, c.text, err)
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
