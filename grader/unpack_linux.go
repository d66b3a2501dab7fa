package grader

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Unpacked is a bundle unpacked on the host, ready to be mounted read-only at /bundle.
type Unpacked struct {
	Dir      string
	Manifest *Manifest
	Files    int
	RawBytes int64
}

// Unpack checks and unpacks the .tar.gz at file into dst (which must not exist) and reads its
// manifest. The rules are strict, whoever made the file: the file at most MaxGzipBytes; entries
// only regular files and directories (no links, devices, FIFOs or sparse entries); names clean,
// relative, without "." or ".." components, never repeated; sizes checked against MaxRawBytes
// before a byte is written and the decompressed stream capped (a gzip bomb stops at the cap);
// every file created beneath dst with O_EXCL|O_NOFOLLOW; modes 0644 or 0755, owned by the
// caller. It checks that the entrypoint's bundle files exist (and argv[0], when a bundle file,
// is executable). Errors are *BundleError naming the entry and the rule; dst is removed on error.
func Unpack(ctx context.Context, file, dst string, lim Limits) (*Unpacked, error) {
	return unpack(ctx, file, dst, lim, false)
}

// UnpackExport unpacks, by the same rules, a candidate made by PackExport: an AIRS submission's
// files, with no manifest (Manifest is nil).
func UnpackExport(ctx context.Context, file, dst string, lim Limits) (*Unpacked, error) {
	return unpack(ctx, file, dst, lim, true)
}

func unpack(ctx context.Context, file, dst string, lim Limits, export bool) (_ *Unpacked, err error) {
	lim = lim.withDefaults()
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, bundleErr("", "%s is not a regular file; give a .tar.gz bundle", file)
	case lim.MaxGzipBytes > 0 && st.Size() > lim.MaxGzipBytes:
		return nil, bundleErr("", "%s is %d bytes (%s), over the limit of %d bytes (%s)", file, st.Size(), iec(st.Size()), lim.MaxGzipBytes, iec(lim.MaxGzipBytes))
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, bundleErr("", "%s is not gzip data (%v); a bundle is a .tar.gz", file, err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return nil, fmt.Errorf("unpack bundle: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dst)
		}
	}()
	root, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)

	u := &unpacker{lim: lim, root: root, seen: map[string]bool{}}
	if err := u.stream(ctx, zr); err != nil {
		return nil, err
	}
	if export {
		return &Unpacked{Dir: dst, Files: u.files, RawBytes: u.raw}, nil
	}
	m, err := u.manifest(dst)
	if err != nil {
		return nil, err
	}
	return &Unpacked{Dir: dst, Manifest: m, Files: u.files, RawBytes: u.raw}, nil
}

// stream applies the tar stream inside the gzip stream zr, its decompressed size capped.
func (u *unpacker) stream(ctx context.Context, zr io.Reader) error {
	// The decompressed stream is capped: file bytes plus tar headers and padding.
	capped := &io.LimitedReader{R: zr, N: u.lim.MaxRawBytes + int64(u.lim.MaxFiles+2)*2048 + 1}
	tr := tar.NewReader(capped)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if capped.N <= 0 {
				return bundleErr("", "decompresses to more than %d bytes; a bundle holds at most %s before compression", u.lim.MaxRawBytes, iec(u.lim.MaxRawBytes))
			}
			return bundleErr("", "is not a valid tar stream: %v", err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
	// Whatever follows the tar's end marker is bounded by the same cap and must not exist.
	if n, _ := io.Copy(io.Discard, capped); n > 0 {
		if capped.N <= 0 {
			return bundleErr("", "decompresses to more than %d bytes; a bundle holds at most %s before compression", u.lim.MaxRawBytes, iec(u.lim.MaxRawBytes))
		}
		if n > 10240 {
			return bundleErr("", "has %d bytes after the tar's end; a bundle is one tar stream", n)
		}
	}
	return nil
}

// manifest reads the bundle's manifest and checks that the entrypoint's bundle files exist (and
// argv[0], when a bundle file, is executable).
func (u *unpacker) manifest(dst string) (*Manifest, error) {
	if !u.seen[ManifestName] {
		return nil, bundleErr("", "has no %s at its top; add one naming the entrypoint (grader/PROTOCOL.md)", ManifestName)
	}
	mf, err := os.Open(filepath.Join(dst, ManifestName))
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(mf)
	mf.Close()
	if err != nil {
		return nil, err
	}
	for i, bf := range m.BundleFiles() {
		st, serr := os.Lstat(filepath.Join(dst, filepath.FromSlash(bf)))
		switch {
		case serr != nil || !u.seen[bf]:
			return nil, bundleErr(ManifestName, "the entrypoint names %s, which is not in the bundle; pack it or fix \"entrypoint\"", bf)
		case !st.Mode().IsRegular():
			return nil, bundleErr(ManifestName, "the entrypoint names %s, which is a directory, not a file", bf)
		case i == 0 && m.Program() == "" && st.Mode()&0o111 == 0:
			return nil, bundleErr(bf, "is the entrypoint but not executable; chmod +x it before packing, or run it through an interpreter ([\"python3\", %q])", bf)
		}
	}
	return m, nil
}

type unpacker struct {
	lim   Limits
	root  int
	seen  map[string]bool
	files int
	raw   int64
	count int
}

// entry applies one tar entry of a bundle under the bundle rules. It is long because it is one
// case per entry type, each with its refusal, kept together so the rules read as one table.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	if err := checkName(hdr.Name); err != nil {
		return err
	}
	// `tar -C dir -czf b.tar.gz .` writes "./" and "./name": the leading "./" is dropped and the
	// top directory itself skipped.
	full := strings.TrimPrefix(hdr.Name, "./")
	if full == "" && hdr.Typeflag == tar.TypeDir {
		return nil
	}
	name, dir := strings.CutSuffix(full, "/")
	switch {
	case name == "" || path.IsAbs(name) || path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "/../") || strings.HasSuffix(name, "/.."):
		return bundleErr(fmt.Sprintf("%q", hdr.Name), "is not a clean relative path (no leading /, no . or .. components, no doubled /)")
	case u.seen[name]:
		return bundleErr(name, "appears twice in the tar; each path once")
	}
	u.count++
	if u.count > u.lim.MaxFiles {
		return bundleErr("", "has more than %d files and directories", u.lim.MaxFiles)
	}
	if depth := strings.Count(name, "/"); depth > u.lim.MaxDepth {
		return bundleErr(name, "is nested %d directories deep; at most %d", depth, u.lim.MaxDepth)
	}
	u.seen[name] = true
	parent, base := path.Split(name)
	pfd, err := u.mkdirs(strings.TrimSuffix(parent, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return bundleErr(name, "cannot be created: %v", err)
		}
		return nil
	case tar.TypeReg:
		if dir {
			return bundleErr(name+"/", "is a file whose name ends in /")
		}
	default:
		return bundleErr(name, "is a %s entry; a bundle holds only regular files and directories", tarType(hdr.Typeflag))
	}
	if hdr.Size < 0 || hdr.Size > u.lim.MaxRawBytes-u.raw {
		return bundleErr(name, "is %d bytes; the bundle may hold at most %d bytes before compression (%s)", hdr.Size, u.lim.MaxRawBytes, iec(u.lim.MaxRawBytes))
	}
	mode := uint32(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return bundleErr(name, "cannot be created (%v); each path once, files and directories never share a name", err)
	}
	f := os.NewFile(uintptr(fd), name)
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return bundleErr(name, "cannot be unpacked: %v", err)
	}
	if n != hdr.Size {
		return bundleErr(name, "is cut short (%d of %d bytes); the tar is truncated", n, hdr.Size)
	}
	unix.Fchmodat(pfd, base, mode, 0) // exact mode, whatever the umask
	u.raw += n
	u.files++
	return nil
}

// mkdirs opens (creating as needed) the directory rel beneath the root, never following links.
func (u *unpacker) mkdirs(rel string) (int, error) {
	fd, err := unix.Openat(u.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	for _, c := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, bundleErr(rel, "cannot be created: %v", err)
		}
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, bundleErr(rel, "is a file, so it cannot also be a directory (%v)", err)
		}
		fd = next
	}
	return fd, nil
}

func tarType(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	case tar.TypeGNUSparse:
		return "sparse file"
	case tar.TypeCont:
		return "contiguous file"
	}
	return fmt.Sprintf("type %q", t)
}
