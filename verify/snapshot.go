package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/publish"
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
	sums  map[string]string // slash path -> the SHA-256 the files check computed
}

// keepBytes says whether the files check keeps a file's bytes for the checks after it. A page
// (*.html) or an Inspect log is only compared, whole, with what a check makes again from the
// files it parses: it is read again then, and must hash as the files check hashed it (reread).
// Keeping them would hold most of a publication's bytes in memory at once (a thousand runs'
// pages are two thirds of it), and on a machine where fresh memory is dear that is most of
// the check's time.
func keepBytes(rel string) bool {
	return !strings.HasSuffix(rel, ".html") && !strings.HasPrefix(rel, publish.InspectDir+"/")
}

// reread reads a file of the publication that was not kept, whole, at most limit bytes (what
// names it in the error), and refuses it unless it hashes as the files check hashed it: every
// check judges the bytes that were hashed, kept or read again.
func (s *snapshot) reread(rel, what string, limit int64) ([]byte, error) {
	b, err := fileio.ReadBounded(filepath.Join(s.dir, filepath.FromSlash(rel)), what, limit)
	if err != nil {
		return nil, err
	}
	if sha256Hex(b) != s.sums[rel] {
		return nil, fmt.Errorf("%s: changed on disk while the publication was being checked (it no longer hashes as it did when the files were read); check it again once nothing writes to it", rel)
	}
	return b, nil
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
	return hashOpened(f, fi.Size(), rel, budget)
}

// hashOpened reads and hashes an opened regular file of n bytes (fstat's), from the descriptor
// already opened, never by its path again: its bytes kept where the budget (shared by the calls
// of one files check) allows, else streamed through a reused buffer.
func hashOpened(f io.Reader, n int64, rel string, budget *atomic.Int64) (sum string, kept []byte, err error) {
	if n <= snapFileMax && budget.Load() >= n && budget.Add(-n) >= 0 {
		// One read of a byte more than fstat gave: a file that grew meanwhile is refused rather
		// than hashed short, one that shrank rather than hashed with zeros.
		b := make([]byte, n+1)
		m, err := io.ReadAtLeast(f, b, int(n))
		if err != nil || int64(m) != n {
			return "", nil, fmt.Errorf("%s: it changed while being read (%d bytes, then %d read; %v)", rel, n, m, err)
		}
		return sha256Hex(b[:n]), b[:n:n], nil
	}
	h := sha256.New()
	buf := hashBuffers.Get().(*[]byte)
	defer hashBuffers.Put(buf)
	// f as a plain reader: *os.File's WriteTo would allocate a buffer of its own every time.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", nil, fmt.Errorf("hash %s: %w", rel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashBuffers are the read buffers of the files not kept, reused.
var hashBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

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
		p := filepath.Join(s.dir, filepath.FromSlash(name))
		if fi, err := os.Lstat(p); err != nil || fi.Size() <= snapFileMax {
			b, err := s.reread(name, "file", snapFileMax)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			return &memFile{name: path.Base(name), Reader: bytes.NewReader(b), size: int64(len(b))}, nil
		}
		// Beyond what is read whole: streamed, its hash checked at its end.
		f, err := fileio.OpenRegular(p, "file")
		if err != nil {
			return nil, err
		}
		return &hashedFile{File: f, rel: name, want: s.sums[name], h: sha256.New()}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// readUpTo reads the file rel: whole when it was kept, else its first max bytes.
func (s *snapshot) readUpTo(rel string, max int64) ([]byte, error) {
	if b, ok := s.kept[rel]; ok {
		return b, nil
	}
	f, err := s.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
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
	b, err = s.reread(rel, what, limit)
	return b, errors.Is(err, fs.ErrNotExist), err
}

// hashedFile is a file of the publication too large to read whole, streamed: at its end it
// fails unless it hashed as the files check hashed it.
type hashedFile struct {
	*os.File
	rel, want string
	h         hash.Hash
}

func (f *hashedFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.h.Write(p[:n])
	if err == io.EOF && hex.EncodeToString(f.h.Sum(nil)) != f.want {
		return n, fmt.Errorf("%s: changed on disk while the publication was being checked (it no longer hashes as it did when the files were read)", f.rel)
	}
	return n, err
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

// ReadFile reads a file of the publication whole (fs.ReadFileFS): a copy of a kept one (its
// caller may change it), or the bytes read again for it, once.
func (s *snapshot) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := s.kept[name]; ok {
		return bytes.Clone(b), nil
	}
	if !s.files[name] {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	b, err := s.reread(name, "file", snapFileMax)
	if err != nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: err}
	}
	return b, nil
}

// Stat says a file's size without reading it (fs.StatFS): a file not kept, as it is on disk
// now (what is read of it is checked against its hash all the same).
func (s *snapshot) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := s.kept[name]; ok {
		return memInfo{path.Base(name), int64(len(b))}, nil
	}
	if !s.files[name] {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	fi, err := os.Lstat(filepath.Join(s.dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	return memInfo{path.Base(name), fi.Size()}, nil
}

// runFS is the run directory runs/id of the publication, as an fs.FS (with ReadFile and Stat,
// which fs.Sub would answer by opening, so reading, the file).
func (s *snapshot) runFS(id string) fs.FS { return runDir{s, "runs/" + id + "/"} }

type runDir struct {
	s      *snapshot
	prefix string
}

func (d runDir) full(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return d.prefix + name, nil
}

func (d runDir) Open(name string) (fs.File, error) {
	p, err := d.full("open", name)
	if err != nil {
		return nil, err
	}
	return d.s.Open(p)
}

func (d runDir) ReadFile(name string) ([]byte, error) {
	p, err := d.full("readfile", name)
	if err != nil {
		return nil, err
	}
	return d.s.ReadFile(p)
}

// SHA256 is the digest the files check computed of a file of the run (transcript.DigestFS).
func (d runDir) SHA256(name string) (string, bool) {
	sum, ok := d.s.sums[d.prefix+name]
	return sum, ok && d.s.files[d.prefix+name]
}

// ReadDir lists the files of the run directory's folder name, as the files check found them.
func (d runDir) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := d.full("readdir", name)
	if err != nil {
		return nil, err
	}
	p += "/"
	var out []fs.DirEntry
	for f := range d.s.files {
		if rest, ok := strings.CutPrefix(f, p); ok && !strings.Contains(rest, "/") {
			out = append(out, fs.FileInfoToDirEntry(memInfo{rest, 0}))
		}
	}
	if len(out) == 0 {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

func (d runDir) Stat(name string) (fs.FileInfo, error) {
	p, err := d.full("stat", name)
	if err != nil {
		return nil, err
	}
	return d.s.Stat(p)
}
