package grader

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/fileio"
)

// Limits bound a bundle while it is packed and unpacked.
type Limits struct {
	MaxGzipBytes int64 // the track's artifact limit, on the recomputed .tar.gz
	MaxRawBytes  int64 // file bytes before compression (default 1 GiB)
	MaxFiles     int   // files and directories (default 10,000)
	MaxDepth     int   // directory nesting (default 32)
}

// DefaultLimits are the raw caps of every bundle; MaxGzipBytes comes from the track.
func DefaultLimits(maxGzip int64) Limits {
	return Limits{MaxGzipBytes: maxGzip, MaxRawBytes: 1 << 30, MaxFiles: 10000, MaxDepth: 32}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits(l.MaxGzipBytes)
	if l.MaxRawBytes <= 0 {
		l.MaxRawBytes = d.MaxRawBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// Candidate is a packed bundle, stored content-addressed.
type Candidate struct {
	ID       string // lowercase hex SHA-256 of the .tar.gz
	Size     int64  // bytes of the .tar.gz, recomputed here
	RawBytes int64  // file bytes in the bundle
	Files    int    // regular files in the bundle
	Path     string // <dir>/<ID>.tar.gz
}

// Digest is the candidate as attestations name it: "sha256:<hex>".
func (c *Candidate) Digest() string { return "sha256:" + c.ID }

// epoch is every entry's modification time: packing never depends on when files were written.
var epoch = time.Unix(0, 0).UTC()

// entry is one file or directory of a bundle, found by the walk.
type entry struct {
	name string // slash-separated, relative to the bundle; directories end in "/"
	dir  bool
	exec bool
	size int64
}

// Pack packs the directory rel (slash-separated, relative to workspace, "." for the workspace
// itself) into dir/<sha256>.tar.gz and returns the candidate. Every path is resolved one
// component at a time from a descriptor of the workspace with O_NOFOLLOW, so no symlink — in rel
// or in the bundle — is followed and nothing outside the directory is read; only regular files
// (with one link) and directories are packed. The tar is deterministic: entries sorted by name,
// owners 0, mtimes the epoch, modes 0644/0755. Sizes are capped before any byte is read (a sparse
// terabyte file is refused at once) and again while reading; FIFOs and devices are never opened
// for reading. A bundle over a rule is a *BundleError naming the file and the rule; over the
// artifact limit the message gives both sizes.
func Pack(ctx context.Context, workspace, rel, dir string, lim Limits) (*Candidate, error) {
	return pack(ctx, workspace, rel, dir, lim, nil)
}

// PackExport packs, like Pack, the files under rel that match one of globs (path.Match on the
// path relative to rel: an AIRS task's file_export_globs) and nothing else: a submission is the
// files the task names, and no manifest is needed. What matches is checked as Pack checks every
// file; what does not is skipped, whatever it is. No match at all is a BundleError naming the
// globs.
func PackExport(ctx context.Context, workspace, rel, dir string, lim Limits, globs []string) (*Candidate, error) {
	if len(globs) == 0 {
		return nil, errors.New("pack export: no globs")
	}
	return pack(ctx, workspace, rel, dir, lim, globs)
}

func pack(ctx context.Context, workspace, rel, dir string, lim Limits, globs []string) (*Candidate, error) {
	lim = lim.withDefaults()
	wfd, err := unix.Open(workspace, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	defer unix.Close(wfd)
	root, err := openBeneath(wfd, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)

	w := &walker{ctx: ctx, lim: lim, globs: globs}
	if err := w.walk(root, "", 0); err != nil {
		return nil, err
	}
	sort.Slice(w.entries, func(i, j int) bool { return w.entries[i].name < w.entries[j].name })
	if globs != nil && w.files == 0 {
		return nil, bundleErr("", "has no file matching the task's file_export_globs %q; write the submission there (for example submission.csv) and submit the directory holding it", globs)
	}
	if globs == nil && !w.hasManifest {
		return nil, bundleErr("", "has no %s at its top; add one naming the entrypoint (grader/PROTOCOL.md)", ManifestName)
	}

	return w.write(root, dir)
}

// write packs the walked entries (beneath root) into a deterministic .tar.gz in dir, named by its
// SHA-256 and made durable there, refusing it over the artifact limit.
func (w *walker) write(root int, dir string) (*Candidate, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("candidates directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".pack-*")
	if err != nil {
		return nil, fmt.Errorf("candidates directory: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	h := sha256.New()
	out := &cappedWriter{w: io.MultiWriter(tmp, h), max: w.lim.MaxGzipBytes}
	zw, _ := gzip.NewWriterLevel(out, gzip.DefaultCompression)
	tw := tar.NewWriter(zw)
	for _, e := range w.entries {
		if err := w.ctx.Err(); err != nil {
			return nil, err
		}
		if err := w.writeEntry(tw, root, e); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if out.err != nil {
		return nil, fmt.Errorf("write candidate: %w", out.err)
	}
	if out.n > w.lim.MaxGzipBytes {
		return nil, bundleErr("", "is %d bytes gzipped (%s), over the track's limit of %d bytes (%s); make it smaller (fewer or smaller weights)", out.n, iec(out.n), w.lim.MaxGzipBytes, iec(w.lim.MaxGzipBytes))
	}
	id := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(dir, id+".tar.gz")
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("write candidate: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return nil, fmt.Errorf("store candidate: %w", err)
	}
	if err := fileio.SyncDir(dir); err != nil {
		return nil, err
	}
	return &Candidate{ID: id, Size: out.n, RawBytes: w.raw, Files: w.files, Path: final}, nil
}

// openBeneath opens the directory rel under the directory fd dirfd, one component at a time,
// never following a symlink and never leaving dirfd ("..", absolute paths refused).
func openBeneath(dirfd int, rel string) (int, error) {
	rel = path.Clean(strings.TrimPrefix(rel, "./"))
	if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, bundleErr(rel, "is not inside the workspace")
	}
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." {
		return fd, nil
	}
	walked := ""
	for _, c := range strings.Split(rel, "/") {
		walked = path.Join(walked, c)
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			var st unix.Stat_t
			switch {
			case errors.Is(err, unix.ENOENT):
				return -1, bundleErr(walked, "does not exist; submit a directory inside the workspace")
			case errors.Is(err, unix.ELOOP) || (unix.Fstatat(dirfd, walked, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK):
				return -1, bundleErr(walked, "is a symlink; submit the real directory (symlinks are never followed)")
			case errors.Is(err, unix.ENOTDIR):
				return -1, bundleErr(walked, "is not a directory; submit the directory holding %s", ManifestName)
			}
			return -1, fmt.Errorf("open %s in the workspace: %w", walked, err)
		}
		fd = next
	}
	return fd, nil
}

type walker struct {
	ctx         context.Context
	lim         Limits
	entries     []entry
	raw         int64
	files       int
	hasManifest bool
	globs       []string // PackExport: only files matching one are packed
	seen        int      // names walked, packed or not
}

// skip reports whether name is left out of an export (nil globs: nothing is).
func (w *walker) skip(name string) bool {
	if w.globs == nil {
		return false
	}
	for _, g := range w.globs {
		if ok, _ := path.Match(g, name); ok {
			return false
		}
	}
	return true
}

// walk lists the directory fd (the bundle's prefix dir) and recurses into subdirectories. It is
// long because it is one case per file type, the bundle rules as one table.
func (w *walker) walk(fd int, prefix string, depth int) error {
	if depth > w.lim.MaxDepth {
		return bundleErr(prefix, "is nested %d directories deep; at most %d", depth, w.lim.MaxDepth)
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), prefix)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("read bundle directory %q: %w", prefix, err)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		name := prefix + n
		if err := checkName(name); err != nil {
			return err
		}
		if w.seen++; w.seen > w.lim.MaxFiles {
			return bundleErr("", "has more than %d files and directories; pack fewer files", w.lim.MaxFiles)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("stat bundle file %s: %w", name, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if w.globs == nil { // an export holds files only; unpacking makes their directories
				w.entries = append(w.entries, entry{name: name + "/", dir: true})
			}
			sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return bundleErr(name, "changed while packing or cannot be opened (%v); submit again", err)
			}
			err = w.walk(sub, name+"/", depth+1)
			unix.Close(sub)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if w.skip(name) {
				continue
			}
			if st.Nlink > 1 {
				return bundleErr(name, "is a hard link (%d links); only plain files are packed, copy it (cp) instead", st.Nlink)
			}
			if st.Size > w.lim.MaxRawBytes-w.raw {
				return bundleErr(name, "is %d bytes; the bundle may hold at most %d bytes before compression (%s)", st.Size, w.lim.MaxRawBytes, iec(w.lim.MaxRawBytes))
			}
			w.raw += st.Size
			w.files++
			w.entries = append(w.entries, entry{name: name, size: st.Size, exec: st.Mode&0o111 != 0})
			if name == ManifestName {
				w.hasManifest = true
			}
		case unix.S_IFLNK:
			if w.skip(name) {
				continue
			}
			return bundleErr(name, "is a symlink; a bundle holds only regular files and directories (copy the target in)")
		default:
			if w.skip(name) {
				continue
			}
			return bundleErr(name, "is a %s; a bundle holds only regular files and directories", fileKind(st.Mode))
		}
	}
	return nil
}

// writeEntry writes one entry; a file is opened beneath the bundle with O_NOFOLLOW|O_NONBLOCK
// and checked again on its descriptor (a file swapped for a FIFO, symlink or link after the walk
// is refused, never read).
func (w *walker) writeEntry(tw *tar.Writer, root int, e entry) error {
	hdr := &tar.Header{Name: e.name, ModTime: epoch}
	if e.dir {
		hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		return tw.WriteHeader(hdr)
	}
	dirName, base := path.Split(e.name)
	dfd := root
	if dirName != "" {
		var err error
		if dfd, err = openBeneath(root, strings.TrimSuffix(dirName, "/")); err != nil {
			return bundleErr(e.name, "changed while packing (%v); submit again", err)
		}
		defer unix.Close(dfd)
	}
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return bundleErr(e.name, "changed while packing (%v); submit again", err)
	}
	f := os.NewFile(uintptr(fd), e.name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink > 1 || st.Size != e.size {
		return bundleErr(e.name, "changed while packing (now a %s of %d bytes, %d links); stop writing to the bundle and submit again", fileKind(st.Mode), st.Size, st.Nlink)
	}
	hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, e.size
	if e.exec {
		hdr.Mode = 0o755
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(f, e.size))
	if err != nil {
		return fmt.Errorf("read bundle file %s: %w", e.name, err)
	}
	if n != e.size {
		return bundleErr(e.name, "shrank while packing (%d of %d bytes); stop writing to the bundle and submit again", n, e.size)
	}
	return nil
}

// checkName refuses names a tar, a report or a terminal could misread.
func checkName(name string) error {
	if !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return bundleErr(fmt.Sprintf("%q", name), "has a name that is not UTF-8 or holds control characters; rename it")
	}
	if len(name) > 1024 {
		return bundleErr(name[:64]+"…", "has a path of %d bytes; at most 1024", len(name))
	}
	return nil
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	}
	return "special file"
}

// cappedWriter writes to w until max bytes, then only counts: the size over the limit is still
// known for the message, and the host never stores more than the limit.
type cappedWriter struct {
	w   io.Writer
	max int64
	n   int64
	err error
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if room := c.max - c.n; room > 0 && c.err == nil {
		q := p
		if int64(len(q)) > room {
			q = q[:room]
		}
		if _, err := c.w.Write(q); err != nil {
			c.err = err
		}
	}
	c.n += int64(len(p))
	return len(p), nil
}

// iec formats a byte count for messages: "4.2 MiB".
func iec(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
