package fileio

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.txt")
	os.WriteFile(f, []byte("abc"), 0o644)
	if fh, err := OpenRegular(f, "report"); err != nil {
		t.Fatal(err)
	} else {
		fh.Close()
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "report " + filepath.Join(dir, "missing") + " does not exist"},
		{dir, "is a directory; give a file"},
		{os.DevNull, "is not a regular file"},
	} {
		if _, err := OpenRegular(c.path, "report"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenRegular(%s): %v, want %q", c.path, err, c.want)
		}
	}
}

func TestReadLimitedAndSHA256(t *testing.T) {
	f := filepath.Join(t.TempDir(), "a.txt")
	os.WriteFile(f, []byte("abc"), 0o644)
	if b, err := ReadLimited(f, "file", 3); err != nil || string(b) != "abc" {
		t.Errorf("ReadLimited at the limit: %q %v", b, err)
	}
	// Over the limit: cut at limit+1, so that the caller's own size check reports it.
	if b, err := ReadLimited(f, "file", 1); err != nil || string(b) != "ab" {
		t.Errorf("ReadLimited over the limit: %q %v", b, err)
	}
	if sum, err := SHA256(f); err != nil || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("SHA256: %s %v", sum, err)
	}
	if err := SyncDir(filepath.Dir(f)); err != nil {
		t.Errorf("SyncDir: %v", err)
	}
	if err := SyncDir(filepath.Join(filepath.Dir(f), "missing")); err == nil {
		t.Error("SyncDir of a missing directory: no error")
	}
}

func TestInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", -1}, {"plain", -1}, {"é ok", -1}, {"ab\xffcd", 2}, {"\xc3", 0}, {"ok\xe2\x82", 2}} {
		if got := InvalidUTF8([]byte(c.in)); got != c.want {
			t.Errorf("InvalidUTF8(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Beside finds only an executable regular file of that name in the same directory.
func TestBeside(t *testing.T) {
	dir := t.TempDir()
	main, other := filepath.Join(dir, "main"), filepath.Join(dir, "other")
	if got := Beside(main, "other"); got != "" {
		t.Errorf("nothing there: %q", got)
	}
	os.WriteFile(other, []byte("x"), 0o644)
	if got := Beside(main, "other"); got != "" {
		t.Errorf("not executable: %q", got)
	}
	os.Chmod(other, 0o755)
	if got := Beside(main, "other"); got != other {
		t.Errorf("executable: %q", got)
	}
	os.Remove(other)
	os.Mkdir(other, 0o755)
	if got := Beside(main, "other"); got != "" {
		t.Errorf("a directory: %q", got)
	}
}

// WriteAtomic: the whole new file with exactly its permissions, or, when the write fails, the old
// file untouched and no temporary file left; an error names the path.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "record.json")
	if err := WriteFile(p, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v; want 0644 exactly, whatever the umask", fi.Mode().Perm())
	}
	err := WriteAtomic(p, 0o644, func(w io.Writer) error {
		w.Write([]byte("half of a"))
		return errors.New("the writer failed")
	})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "the writer failed") {
		t.Errorf("a failed write: %v; want its cause and the path", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a failed write left files: %v", entries)
	}
	if err := WriteFile(filepath.Join(dir, "no-such-dir", "x"), nil, 0o644); err == nil || !strings.Contains(err.Error(), "no-such-dir") {
		t.Errorf("a write into a missing directory: %v", err)
	}
}
