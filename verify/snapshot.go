package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/sealrun/sealrun/internal/fileio"
)

// A publication's files are read once, by the files check, which hashes them: the bytes of each
// are kept (up to these bounds) and every later check reads them from memory. So each file is
// opened and read once however many checks look at it (a run's audit log: its attestation, its
// transcript, its page), and every check judges the very bytes that were hashed: a file changed
// on disk while the check runs cannot show one content to one check and another to the next.
// A file beyond the bounds is hashed as it streams past and read again by the check that needs
// it.
const (
	snapFileMax  = 64 << 20  // the largest file kept
	snapTotalMax = 768 << 20 // all the files kept, together (Options.MaxMemory's default)
)

// snapshot is the publication as the files check read it. It is an fs.FS of the publication
// (fs.Sub gives a run's directory) holding its regular files only: a link, a device or a folder
// is not a file of it.
type snapshot struct {
	dir   string
	kept  map[string][]byte // slash path -> its bytes
	files map[string]bool   // every regular file read, kept or not
}

// readAndHash reads and hashes the file rel of dir, keeping its bytes where the budget (shared by the
// calls of one files check) allows.
func readAndHash(dir, rel string, budget *atomic.Int64) (sum string, kept []byte, err error) {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	f, err := os.Open(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	// The file opened is the regular file the walk found at that path, not one a link put
	// there since (a check that opens through no link, on every system).
	if li, err := os.Lstat(p); err != nil || !li.Mode().IsRegular() || !os.SameFile(li, fi) {
		return "", nil, fmt.Errorf("%s: not a regular file of the publication (a link, or replaced while being read)", rel)
	}
	if n := fi.Size(); n <= snapFileMax && budget.Load() >= n && budget.Add(-n) >= 0 {
		// One read of a byte more than fstat gave: a file that grew meanwhile is refused rather
		// than hashed short, one that shrank rather than hashed with zeros.
		b := make([]byte, n+1)
		m, err := io.ReadAtLeast(f, b, int(n))
		if err != nil || int64(m) != n {
			return "", nil, fmt.Errorf("%s: it changed while being read (%d bytes, then %d read; %v)", rel, n, m, err)
		}
		s := sha256.Sum256(b[:n])
		return hex.EncodeToString(s[:]), b[:n:n], nil
	}
	sum, err = fileio.SHA256(p)
	return sum, nil, err
}

// Open opens a file of the publication by its slash path: from memory when it was kept, from
// disk (the same file the files check hashed, read again) when it was too large to keep.
func (s *snapshot) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := s.kept[name]; ok {
		return &memFile{name: path.Base(name), Reader: bytes.NewReader(b), size: int64(len(b))}, nil
	}
	if s.files[name] {
		return fileio.OpenRegular(filepath.Join(s.dir, filepath.FromSlash(name)), "file")
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// has says whether rel is a regular file of the publication.
func (s *snapshot) has(rel string) bool { return s.files[rel] }

// read reads the file rel whole, at most limit bytes (what names it in the error); missing
// says it is not a file of the publication (err is then set too).
func (s *snapshot) read(rel, what string, limit int64) (b []byte, missing bool, err error) {
	if b, ok := s.kept[rel]; ok {
		if int64(len(b)) > limit {
			return nil, false, fmt.Errorf("%d bytes, more than the %d a %s may have", len(b), limit, what)
		}
		return b, false, nil
	}
	if !s.files[rel] {
		return nil, true, &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
	}
	b, err = fileio.ReadBounded(filepath.Join(s.dir, filepath.FromSlash(rel)), what, limit)
	return b, errors.Is(err, fs.ErrNotExist), err
}

// memFile is a kept file, opened.
type memFile struct {
	name string
	*bytes.Reader
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return memInfo{f.name, f.size}, nil }
func (f *memFile) Close() error               { return nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

var _ fs.FS = (*snapshot)(nil)

// runFS is the run directory runs/id of the publication, as an fs.FS.
func (s *snapshot) runFS(id string) fs.FS {
	sub, err := fs.Sub(s, "runs/"+id)
	if err != nil { // id is a checked run id: never
		return s
	}
	return sub
}
