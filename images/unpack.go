package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/sealrun/sealrun/internal/opt"
)

// Defaults for the decompression-bomb caps of Unpack.
const (
	DefaultMaxUnpackBytes = 32 << 30 // 32 GiB of file content
	DefaultMaxFiles       = 2000000  // entries
)

// Rules an entry can break. Unpack's errors and reports name them.
const (
	RuleAbsolutePath     = "absolute path"                       // /etc/passwd: refused
	RuleDotDot           = "path leaves the rootfs"              // ../../etc/passwd: refused
	RuleBadName          = "malformed entry name"                // empty, NUL byte
	RuleSymlinkEscape    = "symlink target leaves the rootfs"    // a -> ../../../etc: refused
	RuleHardlinkEscape   = "hard link target outside the rootfs" // link to a path we did not write: refused
	RuleThroughSymlink   = "write through a symlink"             // entry under a planted link that leaves the rootfs: refused
	RuleDevice           = "device node or FIFO"                 // skipped (the runtime makes /dev): neutralised
	RuleSetuid           = "setuid/setgid bit"                   // stripped: neutralised
	RuleTooManyBytes     = "too many bytes"                      // --max-unpack-bytes
	RuleTooManyFiles     = "too many entries"                    // --max-files
	RuleUnsupportedEntry = "unsupported entry type"              // sparse files and other exotic types: refused
	RuleOwnerRange       = "owner outside the user-namespace range"
)

// UnpackError says which entry of which layer broke which rule.
type UnpackError struct {
	Image string // reference or digest of the image
	Layer string // digest of the layer blob
	Entry string // the entry's name as it is in the tar
	Rule  string
	Err   error
}

func (e *UnpackError) Error() string {
	msg := fmt.Sprintf("image %s: layer %s: entry %q: %s", e.Image, e.Layer, e.Entry, e.Rule)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *UnpackError) Unwrap() error { return e.Err }

// UnpackOptions bound and shape an unpack.
type UnpackOptions struct {
	MaxBytes int64 // total file content; 0 means DefaultMaxUnpackBytes
	MaxFiles int64 // total entries; 0 means DefaultMaxFiles
	// UIDShift and GIDShift are added to every numeric owner, to map container root to an
	// unprivileged host range. Owners must stay below RangeSize. Chown needs root.
	UIDShift, GIDShift int
	RangeSize          int // 0 means 65536
	// Chown sets ownership (requires CAP_CHOWN). Off, files belong to the unpacking user.
	Chown bool
}

// UnpackReport says what an unpack did, including what it neutralised.
type UnpackReport struct {
	Files, Bytes   int64
	SkippedDevices []string // device nodes and FIFOs not created (first 20)
	StrippedSetuid []string // entries whose setuid/setgid bits were cleared (first 20)
	Whiteouts      int
}

func (r *UnpackReport) note(list *[]string, name string) {
	if len(*list) < 20 {
		*list = append(*list, name)
	}
}

// Layer is one layer to unpack: its digest (for errors) and a way to open its uncompressed tar.
type Layer struct {
	Digest string
	Open   func() (io.ReadCloser, error)
}

// Unpack applies layers in order to the directory dst (which must exist and should be empty),
// writing only through an os.Root on dst: no entry, link or later write through a planted link
// can create or change anything outside dst. Whiteouts and opaque whiteouts remove what lower
// layers wrote. Entries that break a rule stop the unpack with an *UnpackError; device nodes,
// FIFOs and setuid/setgid bits are neutralised and reported.
func Unpack(ctx context.Context, image string, layers []Layer, dst string, opts UnpackOptions) (*UnpackReport, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxUnpackBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.RangeSize <= 0 {
		opts.RangeSize = 65536
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("unpack %s: %w", image, err)
	}
	defer root.Close()
	u := &unpacker{image: image, root: root, opts: opts, report: &UnpackReport{}, buf: make([]byte, 1<<20), dirModes: map[string]fs.FileMode{}, dirRoots: map[string]*os.Root{}}
	defer u.dropDirs()
	for _, l := range layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := u.layer(l); err != nil {
			return nil, err
		}
	}
	for name, mode := range u.dirModes {
		fi, err := root.Lstat(name)
		if err != nil || !fi.IsDir() {
			continue // removed or replaced by a later entry
		}
		if err := root.Chmod(name, mode); err != nil {
			return nil, fmt.Errorf("image %s: chmod %s: %w", image, name, err)
		}
	}
	return u.report, nil
}

type unpacker struct {
	image   string
	root    *os.Root
	opts    UnpackOptions
	report  *UnpackReport
	buf     []byte
	layerID string
	created map[string]bool // entries written by the current layer (for opaque whiteouts)
	dirs    map[string]bool // directories known to exist (this unpack), to skip MkdirAll
	// dirModes are the modes directory entries asked for, set once everything is written.
	dirModes map[string]fs.FileMode
	// dirRoots are directories of the rootfs kept open (dirRoot), dropped at any removal.
	dirRoots map[string]*os.Root
}

// dirRoot is the rootfs's directory dir, opened below the root (os.Root: nothing resolves out of
// it): an entry's operations then resolve one name, not its whole path, component by component.
// A few are kept open, since a layer's entries come directory by directory; every removal drops
// them (dropDirs), so that none outlives what it opened.
func (u *unpacker) dirRoot(dir string) (*os.Root, error) {
	if dir == "." || dir == "" {
		return u.root, nil
	}
	if r, ok := u.dirRoots[dir]; ok {
		return r, nil
	}
	r, err := u.root.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if len(u.dirRoots) >= 16 {
		u.dropDirs()
	}
	u.dirRoots[dir] = r
	return r, nil
}

// dropDirs closes the directories dirRoot kept open.
func (u *unpacker) dropDirs() {
	for k, r := range u.dirRoots {
		r.Close()
		delete(u.dirRoots, k)
	}
}

func (u *unpacker) fail(entry, rule string, err error) error {
	return &UnpackError{Image: u.image, Layer: u.layerID, Entry: entry, Rule: rule, Err: err}
}

// maxLayerTail bounds what a layer may hold after its tar archive ends (tar pads to its record
// size, 10 KiB by default).
const maxLayerTail = 1 << 20

func (u *unpacker) layer(l Layer) error {
	u.layerID, u.created = l.Digest, map[string]bool{}
	if u.dirs == nil {
		u.dirs = map[string]bool{".": true}
	}
	rc, err := l.Open()
	if err != nil {
		return fmt.Errorf("image %s: layer %s: open: %w", u.image, l.Digest, err)
	}
	defer rc.Close()
	ra := newReadAhead(rc)
	defer ra.Close()
	tr := tar.NewReader(ra)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			// The archive's end: what follows is padding, read through so that a diff id check
			// below hashes the whole stream, and bounded.
			if n, err := io.Copy(io.Discard, io.LimitReader(ra, maxLayerTail+1)); err != nil {
				return fmt.Errorf("image %s: layer %s: read after the tar archive's end: %w (truncated or corrupt layer)", u.image, l.Digest, err)
			} else if n > maxLayerTail {
				return fmt.Errorf("image %s: layer %s: more than 1 MiB after its tar archive ends (a corrupt layer; rebuild or re-pull the image)", u.image, l.Digest)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("image %s: layer %s: read tar: %w (truncated or corrupt layer)", u.image, l.Digest, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// cleanName turns a tar entry name into a path relative to the rootfs, or says which rule it breaks.
func cleanName(name string) (string, string) {
	switch {
	case name == "" || strings.ContainsRune(name, 0):
		return "", RuleBadName
	case strings.HasPrefix(name, "/"):
		return "", RuleAbsolutePath
	}
	p := path.Clean(name)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", RuleDotDot
	}
	return p, ""
}

// symlinkEscapes reports whether a relative link target, taken from the link's directory,
// climbs above the rootfs. Absolute targets are resolved inside the container's root, so they
// stay inside; sealrun itself never follows them on the host (os.Root refuses).
func symlinkEscapes(linkPath, target string) bool {
	if strings.HasPrefix(target, "/") {
		return false
	}
	p := path.Join(path.Dir(linkPath), target)
	return p == ".." || strings.HasPrefix(p, "../")
}

// entry applies one tar entry of a layer to the rootfs under the layer rules. It is long because
// it is one case per entry type (whiteouts, directories, files, links, devices), kept together so
// the rules read as one table.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	name, rule := cleanName(hdr.Name)
	if rule != "" {
		return u.fail(hdr.Name, rule, nil)
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if name == "." {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the rootfs itself; its mode is ours
		}
		return u.fail(hdr.Name, RuleBadName, errors.New("only a directory may name the root"))
	}
	u.report.Files++
	if u.report.Files > u.opts.MaxFiles {
		return u.fail(hdr.Name, RuleTooManyFiles, opt.New("images.UnpackOptions", "MaxFiles", fmt.Sprintf("more than %d entries; raise it if the image is genuine", u.opts.MaxFiles)))
	}
	dir, base := path.Split(name)
	dir = path.Clean(dir)
	if base == ".wh..wh..opq" {
		u.report.Whiteouts++
		return u.opaque(hdr.Name, dir)
	}
	if strings.HasPrefix(base, ".wh.") {
		u.report.Whiteouts++
		target := path.Join(dir, strings.TrimPrefix(base, ".wh."))
		if err := u.root.RemoveAll(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return u.fail(hdr.Name, RuleThroughSymlink, err)
		}
		u.forget(target)
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.report.note(&u.report.SkippedDevices, name)
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink: // the reader maps the old TypeRegA to TypeReg
	default:
		return u.fail(hdr.Name, RuleUnsupportedEntry, fmt.Errorf("type %q", hdr.Typeflag))
	}
	if err := u.parents(hdr.Name, dir); err != nil {
		return err
	}
	uid, gid := hdr.Uid+u.opts.UIDShift, hdr.Gid+u.opts.GIDShift
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid >= u.opts.RangeSize || hdr.Gid >= u.opts.RangeSize {
		return u.fail(hdr.Name, RuleOwnerRange, fmt.Errorf("uid %d gid %d; owners must be below %d", hdr.Uid, hdr.Gid, u.opts.RangeSize))
	}
	mode := fs.FileMode(hdr.Mode).Perm()
	if hdr.Mode&(04000|02000) != 0 {
		u.report.note(&u.report.StrippedSetuid, name)
	}
	if hdr.Mode&01000 != 0 {
		mode |= fs.ModeSticky
	}
	u.created[name] = true
	dr, err := u.dirRoot(dir)
	if err != nil {
		return u.fail(hdr.Name, RuleThroughSymlink, err)
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		if fi, err := dr.Lstat(base); err == nil && !fi.IsDir() {
			if err := dr.RemoveAll(base); err != nil {
				return u.fail(hdr.Name, RuleThroughSymlink, err)
			}
			// A symlink some open directory may have been reached through.
			if dr, err = u.reopen(dir); err != nil {
				return u.fail(hdr.Name, RuleThroughSymlink, err)
			}
		}
		if err := dr.Mkdir(base, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return u.fail(hdr.Name, RuleThroughSymlink, err)
		}
		u.dirs[name] = true
		u.dirModes[name] = mode // applied after every entry, so a read-only directory can still be filled
	case tar.TypeReg:
		u.report.Bytes += hdr.Size
		if u.report.Bytes > u.opts.MaxBytes {
			return u.fail(hdr.Name, RuleTooManyBytes, opt.New("images.UnpackOptions", "MaxBytes", fmt.Sprintf("more than %d bytes of files; raise it if the image is genuine", u.opts.MaxBytes)))
		}
		if dr, err = u.replace(hdr.Name, dr, dir, base, name); err != nil {
			return err
		}
		f, err := dr.OpenFile(base, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return u.fail(hdr.Name, RuleThroughSymlink, err)
		}
		n, err := io.CopyBuffer(f, io.LimitReader(r, hdr.Size), u.buf)
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("short file: %d of %d bytes (truncated layer)", n, hdr.Size)
		}
		// Owner, mode and times through the open file: no path is resolved again.
		if err == nil && u.opts.Chown {
			if err = f.Chown(uid, gid); err != nil {
				err = fmt.Errorf("chown %d:%d: %w", uid, gid, err)
			}
		}
		if err == nil {
			err = f.Chmod(mode)
		}
		if err == nil && !hdr.ModTime.IsZero() {
			tv := syscall.NsecToTimeval(hdr.ModTime.UnixNano())
			_ = syscall.Futimes(int(f.Fd()), []syscall.Timeval{tv, tv})
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("image %s: layer %s: entry %q: write: %w", u.image, u.layerID, hdr.Name, err)
		}
		return nil
	case tar.TypeSymlink:
		if symlinkEscapes(name, hdr.Linkname) {
			return u.fail(hdr.Name, RuleSymlinkEscape, fmt.Errorf("target %q", hdr.Linkname))
		}
		if dr, err = u.replace(hdr.Name, dr, dir, base, name); err != nil {
			return err
		}
		if err := dr.Symlink(hdr.Linkname, base); err != nil {
			return u.fail(hdr.Name, RuleThroughSymlink, err)
		}
	case tar.TypeLink:
		target, rule := cleanName(hdr.Linkname)
		if rule != "" {
			return u.fail(hdr.Name, RuleHardlinkEscape, fmt.Errorf("target %q: %s", hdr.Linkname, rule))
		}
		fi, err := u.root.Lstat(target)
		if err != nil || !fi.Mode().IsRegular() {
			return u.fail(hdr.Name, RuleHardlinkEscape, fmt.Errorf("target %q is not a regular file written by this image", hdr.Linkname))
		}
		if _, err := u.replace(hdr.Name, dr, dir, base, name); err != nil {
			return err
		}
		if err := u.root.Link(target, name); err != nil {
			return u.fail(hdr.Name, RuleHardlinkEscape, err)
		}
		return nil // a hard link shares the target's owner and mode
	}
	if u.opts.Chown {
		if err := dr.Lchown(base, uid, gid); err != nil {
			return fmt.Errorf("image %s: layer %s: entry %q: chown %d:%d: %w", u.image, u.layerID, hdr.Name, uid, gid, err)
		}
	}
	return nil
}

// parents makes sure the entry's parent directories exist, creating missing ones 0755.
func (u *unpacker) parents(entry, dir string) error {
	if u.dirs[dir] {
		return nil
	}
	if err := u.root.MkdirAll(dir, 0o755); err != nil {
		return u.fail(entry, RuleThroughSymlink, err)
	}
	if fi, err := u.root.Lstat(dir); err != nil || !fi.IsDir() {
		// The parent is a symlink (to a directory inside the rootfs): allowed, but not cached.
		return nil
	}
	u.dirs[dir] = true
	return nil
}

// replace removes what is at name (base in its directory dr, the rootfs's dir), from a lower layer
// or earlier in this one, unless it is a directory that the entry would keep. It returns the
// directory to go on in: reopened where the removal dropped the open ones.
func (u *unpacker) replace(entry string, dr *os.Root, dir, base, name string) (*os.Root, error) {
	fi, err := dr.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return dr, nil
	}
	if err != nil {
		return nil, u.fail(entry, RuleThroughSymlink, err)
	}
	if fi.Mode().IsRegular() {
		if err := dr.Remove(base); err != nil {
			return nil, u.fail(entry, RuleThroughSymlink, err)
		}
		return dr, nil
	}
	// A directory, or a symlink some open directory may have been reached through.
	if fi.IsDir() {
		err = dr.RemoveAll(base)
	} else {
		err = dr.Remove(base)
	}
	if err != nil {
		return nil, u.fail(entry, RuleThroughSymlink, err)
	}
	u.forget(name)
	if dr, err = u.reopen(dir); err != nil {
		return nil, u.fail(entry, RuleThroughSymlink, err)
	}
	return dr, nil
}

// reopen drops the open directories and opens dir again.
func (u *unpacker) reopen(dir string) (*os.Root, error) {
	u.dropDirs()
	return u.dirRoot(dir)
}

// opaque removes every child of dir that the current layer did not write.
func (u *unpacker) opaque(entry, dir string) error {
	d, err := u.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return u.fail(entry, RuleThroughSymlink, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return u.fail(entry, RuleThroughSymlink, err)
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if u.created[p] {
			continue
		}
		if err := u.root.RemoveAll(p); err != nil {
			return u.fail(entry, RuleThroughSymlink, err)
		}
		u.forget(p)
	}
	return nil
}

// forget drops cached directories at or under p after a removal, and the open ones.
func (u *unpacker) forget(p string) {
	u.dropDirs()
	for d := range u.dirs {
		if d == p || strings.HasPrefix(d, p+"/") {
			delete(u.dirs, d)
		}
	}
}
