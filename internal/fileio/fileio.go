// Package fileio holds the file helpers every floor uses: opening only regular files with an
// error that names the file, reading with a size limit, hashing, writing a file atomically, and
// making directory entries durable.
package fileio

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"unicode/utf8"
)

// OpenRegular opens a file for reading and refuses directories and devices with a clear message.
func OpenRegular(path, what string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s %s does not exist", what, path)
		}
		return nil, fmt.Errorf("open %s %s: %w", what, path, errors.Unwrap(err))
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() && st.Mode()&os.ModeNamedPipe == 0 {
		f.Close()
		if st.IsDir() {
			return nil, fmt.Errorf("%s %s is a directory; give a file", what, path)
		}
		return nil, fmt.Errorf("%s %s is not a regular file", what, path)
	}
	return f, nil
}

// ReadLimited reads a file of at most limit bytes; a longer file is returned cut at limit+1
// bytes, so that the caller's own size check reports it.
func ReadLimited(path, what string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized once from the file's length (as os.ReadFile does), not grown by doubling from 512
	// bytes: a reader's check reads logs of megabytes, and the growth was most of the time.
	size := int64(512)
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		size = min(fi.Size(), limit) + 1
	}
	r := io.LimitReader(f, limit+1)
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s %s: %w", what, path, err)
		}
	}
}

// ReadBounded reads a file whole that is at most limit bytes, and refuses a larger one by its
// size, unread (a sparse file of gigabytes is never read into memory). A missing file's error is
// fs.ErrNotExist's.
func ReadBounded(path, what string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	tooLarge := fmt.Errorf("larger than %d MiB, more than sealrun writes; not read", limit>>20)
	if fi.Size() > limit {
		return nil, tooLarge
	}
	b, err := ReadLimited(path, what, limit)
	if err == nil && int64(len(b)) > limit { // it grew since
		return nil, tooLarge
	}
	return b, err
}

// SHA256 is the lowercase hex SHA-256 of a regular file's content.
func SHA256(path string) (string, error) {
	f, err := OpenRegular(path, "file")
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	// The file as a plain reader: *os.File's WriteTo would allocate a buffer of its own for
	// every file hashed.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyBuffers are SHA256's read buffers, reused: a publication's check hashes every file of it.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// Cause is err's cause without the path a *fs.PathError repeats ("no such file or directory"),
// for a message that names the path itself; any other error as it is.
func Cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// WriteAtomic writes path through write into a temporary file in the same directory, syncs it,
// gives it perm exactly (no umask) and renames it into place, then syncs the directory: readers
// see the old file or the whole new one, never a part; a failed write leaves no file (and the old
// one untouched); once it returns, a crash keeps the new file. The module's one atomic write: it
// works on every OS the verify path runs on (the rename replaces an existing file on Windows too,
// where a directory cannot be synced). Errors name path.
func WriteAtomic(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil && runtime.GOOS != "windows" {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// WriteFile is WriteAtomic of data.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// ErrTorn is in AppendSync's error where the part of a record a failed write left could not be
// cut off: the file may end in part of a record, and its writer must take no more.
var ErrTorn = errors.New("the part written could not be taken back")

// AppendSync writes record at end, the offset just past f's last whole record, and fsyncs:
// the append-only logs' one write (journal, audit log, witness state). A write that fails part
// way — a full disk takes only part of a record — or whose fsync fails is taken back: f is cut
// to end again, so that the next record never follows part of one. It returns the new end. The
// error names what went wrong; where even the cut fails it says so too (then what is on disk
// may end in part of a record, which the readers drop or refuse, and the caller must take no
// more).
//
// f is positioned at end (opened with O_APPEND, or seeked there): AppendSync keeps it there.
func AppendSync(f *os.File, end int64, record []byte) (int64, error) {
	n, err := f.Write(record)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		return end + int64(n), nil
	}
	cerr := f.Truncate(end)
	if cerr == nil {
		_, cerr = f.Seek(end, io.SeekStart)
	}
	if cerr == nil {
		cerr = f.Sync()
	}
	if cerr != nil {
		return end, fmt.Errorf("%w; and %w: %v", err, ErrTorn, cerr)
	}
	return end, err
}

// SyncDir fsyncs a directory, so that the entries made, renamed or removed in it are durable.
// Where the OS cannot sync a directory (Windows: the rename is what there is) it does nothing.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// SyncTree fsyncs every file and directory below dir (dir included).
func SyncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

// InvalidUTF8 is the offset of the first byte of b that is not valid UTF-8, or -1: where a text
// file an operator wrote (a track, an exam's input) stops being text, for the error to name.
func InvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// Beside is the file name in the directory of path when it is an executable regular file
// there, else "": how sealrun finds a companion program installed beside another (the calls'
// shim beside the runner binary, the hook's relay beside the hook).
func Beside(path, name string) string {
	p := filepath.Join(filepath.Dir(path), name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p
	}
	return ""
}
