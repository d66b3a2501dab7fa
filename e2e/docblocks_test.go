package e2e

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A shell block of the documentation that a reader is told to run is marked, on the line before
// its ```sh, with <!-- runnable: NAME -->, and a test runs it as written (runDocBlock), with only
// its placeholders filled. runnableBlocks names each marked block and the test that runs it;
// docs/OPERATOR.md's blocks are run whole by TestOperatorWalkthrough (their own markers).
var runnableBlocks = map[string]string{
	"reader":   "TestDemo (README.md: verify a publication and one run's transcript)",
	"kit-hash": "TestDemo (kits/KIT.md: the kit hash with coreutils)",
}

var runnableMark = regexp.MustCompile(`^<!-- runnable: ([a-z0-9-]+) -->$`)

// docBlocks reads a Markdown file's marked runnable blocks: name -> the block's text.
func docBlocks(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[string]string{}
	name, in := "", false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case in && l == "```":
			in, name = false, ""
		case in:
			blocks[name] += l + "\n"
		case name != "" && l == "```sh":
			if _, dup := blocks[name]; dup {
				t.Fatalf("%s:%d: a second block marked runnable: %s", path, n, name)
			}
			in, blocks[name] = true, ""
		case name != "":
			t.Fatalf("%s:%d: <!-- runnable: %s --> is not followed by a ```sh block", path, n, name)
		case runnableMark.MatchString(l):
			name = runnableMark.FindStringSubmatch(l)[1]
		}
	}
	return blocks
}

// runDocBlock runs the block marked name in the Markdown file path with sh -e in dir, the
// directory binDir first on PATH, each placeholder (pairs: PLACEHOLDER, value) replaced, and
// returns its output; it fails the test when the block fails.
func runDocBlock(t testing.TB, path, name, dir, binDir string, pairs ...string) string {
	t.Helper()
	block, ok := docBlocks(t, path)[name]
	if !ok {
		t.Fatalf("%s has no block marked <!-- runnable: %s -->", path, name)
	}
	block = strings.NewReplacer(pairs...).Replace(block)
	cmd := exec.Command("sh", "-ec", block)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s, the block marked runnable: %s, failed: %v\n%s\n%s", path, name, err, block, out)
	}
	return string(out)
}

// Every block marked runnable in the repository's documentation is one a test runs, and every
// block a test runs is still marked where it was: a marker without its test, or a renamed one,
// fails here without root.
func TestRunnableBlocksAreRun(t *testing.T) {
	found := map[string][]string{}
	filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || p == filepath.Join("..", "docs", "cli")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			for name := range docBlocks(t, p) {
				found[name] = append(found[name], p)
			}
		}
		return nil
	})
	for name, files := range found {
		if _, ok := runnableBlocks[name]; !ok {
			t.Errorf("%v: a block marked <!-- runnable: %s --> that no test runs: run it in a test and name it in runnableBlocks", files, name)
		}
		if len(files) > 1 {
			t.Errorf("<!-- runnable: %s --> marks blocks in %v: a name marks one block", name, files)
		}
	}
	for name, test := range runnableBlocks {
		if _, ok := found[name]; !ok {
			t.Errorf("no block is marked <!-- runnable: %s --> any more, which %s runs", name, test)
		}
	}
}
