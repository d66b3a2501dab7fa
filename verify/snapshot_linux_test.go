//go:build linux

package verify

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

func mkfifo(t *testing.T, path string) {
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The files check's reader on this system: a file behind a linked directory, a link, a FIFO
// put where a file was, a path out of the publication are each refused, named; a file is read
// and kept as the budget allows.
func TestPublicationReader(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "runs", "r1"), 0o755)
	os.WriteFile(filepath.Join(dir, "runs", "r1", "a.json"), []byte("{}\n"), 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "b.json"), []byte("{}\n"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "runs", "r2"))
	os.Symlink(filepath.Join(dir, "runs", "r1", "a.json"), filepath.Join(dir, "runs", "r1", "l.json"))
	fifo := filepath.Join(dir, "runs", "r1", "f.json")
	mkfifo(t, fifo)
	read, done, err := publicationReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	var budget atomic.Int64
	budget.Store(1 << 20)
	if sum, kept, err := read("runs/r1/a.json", &budget); err != nil || string(kept) != "{}\n" || sum != "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356" {
		t.Errorf("a.json: %s %q %v", sum, kept, err)
	}
	for _, rel := range []string{"runs/r2/b.json", "runs/r1/l.json", "runs/r1/f.json", "../x.json"} {
		if _, kept, err := read(rel, &budget); err == nil || kept != nil {
			t.Errorf("%s was read as a file of the publication", rel)
		} else if !strings.Contains(err.Error(), rel) {
			t.Errorf("%s: the error does not name it: %v", rel, err)
		}
	}
}
