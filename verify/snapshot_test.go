package verify

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// The snapshot the files check keeps: a kept file is the bytes that were hashed (an edit on disk
// afterwards is not seen by the later checks), a file beyond the budget is read from disk, a file
// that is not one of the publication's (missing, a link, a path out of it) is not there.
func TestSnapshot(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "runs", "r1"), 0o755)
	files := map[string]string{"runs/r1/audit.jsonl": "line one\n", "runs/r1/big.bin": strings.Repeat("x", 100), "publication.json": "{}\n"}
	for rel, data := range files {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(rel)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/etc/passwd", filepath.Join(dir, "runs", "r1", "link"))
	var budget atomic.Int64
	budget.Store(20) // room for the small files, not for big.bin
	s := &snapshot{dir: dir, kept: map[string][]byte{}, files: map[string]bool{}, sums: map[string]string{}}
	for _, rel := range []string{"runs/r1/audit.jsonl", "publication.json", "runs/r1/big.bin"} {
		sum, kept, err := readAndHash(dir, rel, &budget)
		if err != nil || len(sum) != 64 {
			t.Fatalf("%s: %q %v", rel, sum, err)
		}
		s.files[rel], s.sums[rel] = true, sum
		if kept != nil {
			s.kept[rel] = kept
		}
	}
	if _, kept, err := readAndHash(dir, "runs/r1/link", &budget); err == nil || kept != nil {
		t.Errorf("a link was read as a file of the publication")
	}
	if len(s.kept) != 2 || s.kept["runs/r1/big.bin"] != nil {
		t.Fatalf("kept %d files; want the two small ones", len(s.kept))
	}
	// Edited on disk after the files check: the checks read what was hashed.
	os.WriteFile(filepath.Join(dir, "runs", "r1", "audit.jsonl"), []byte("forged\n"), 0o644)
	run := s.runFS("r1")
	if b, err := fs.ReadFile(run, "audit.jsonl"); err != nil || string(b) != "line one\n" {
		t.Errorf("audit.jsonl through the run's fs: %q %v", b, err)
	}
	if fi, err := fs.Stat(run, "audit.jsonl"); err != nil || fi.Size() != 9 || !fi.Mode().IsRegular() {
		t.Errorf("stat: %v %v", fi, err)
	}
	// Beyond the budget: from disk.
	if b, err := fs.ReadFile(run, "big.bin"); err != nil || len(b) != 100 {
		t.Errorf("big.bin from disk: %d bytes, %v", len(b), err)
	}
	if b, missing, err := s.read("runs/r1/big.bin", "file", 50); err == nil || missing || b != nil {
		t.Errorf("a file over the bound was read: %d bytes, missing %v, %v", len(b), missing, err)
	}
	if _, _, err := s.read("publication.json", "file", 2); err == nil || !strings.Contains(err.Error(), "more than the 2") {
		t.Errorf("a kept file over the bound: %v", err)
	}
	for _, name := range []string{"link", "nothing.json", "../r1/audit.jsonl", "/etc/passwd"} {
		_, err := run.Open(name)
		if err == nil {
			t.Errorf("%s opened", name)
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%s: %v; want not there, or not a path of the publication", name, err)
		}
	}
	if _, missing, _ := s.read("runs/r1/link", "file", 1<<20); !missing {
		t.Errorf("the link is a file of the publication")
	}
	// A file not kept, edited on disk after the files check hashed it: refused, named, by
	// every way a check reads it.
	os.WriteFile(filepath.Join(dir, "runs", "r1", "big.bin"), []byte(strings.Repeat("y", 100)), 0o644)
	if _, err := fs.ReadFile(run, "big.bin"); err == nil || !strings.Contains(err.Error(), "runs/r1/big.bin: changed on disk") {
		t.Errorf("an edited file not kept was read: %v", err)
	}
	if _, _, err := s.read("runs/r1/big.bin", "file", 1<<20); err == nil || !strings.Contains(err.Error(), "changed on disk") {
		t.Errorf("an edited file not kept was read: %v", err)
	}
	if f, err := run.Open("big.bin"); err == nil {
		t.Errorf("an edited file not kept opened")
		f.Close()
	}
}

// What the files check keeps: what a check parses, not the pages and Inspect logs it only
// compares with what it makes again.
func TestKeepBytes(t *testing.T) {
	for rel, want := range map[string]bool{"runs/r1/audit.jsonl": true, "runs/r1/transcript.json": true, "runs/r1/result.att.json": true,
		"runs/r1/transcript.html": false, "runs/r1/report.html": false, "leaderboard.html": false, "inspect/x.json": false, "publication.json": true} {
		if keepBytes(rel) != want {
			t.Errorf("keepBytes(%s) = %v, want %v", rel, !want, want)
		}
	}
}
