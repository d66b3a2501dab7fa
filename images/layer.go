package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Epoch is the modification time of every entry in a layer sealrun builds, so that the same
// rootfs always gives the same layer bytes (SOURCE_DATE_EPOCH style).
var Epoch = time.Unix(0, 0).UTC()

// WriteLayerTar writes dir as a reproducible tar layer: entries in lexical order, fixed
// modification times, numeric owners only, hard links as links, no device nodes, FIFOs or sockets.
// Paths for which skip returns true (relative, slash-separated) are left out, with everything under
// them. It is long because it is one case per file type, kept together so the layer's rules read as
// one table.
func WriteLayerTar(w io.Writer, dir string, skip func(rel string) bool) error {
	tw := tar.NewWriter(w)
	seen := map[[2]uint64]string{} // (dev, inode) of multiply linked files -> first path
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat information", p)
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeIrregular) != 0 {
			return nil
		}
		hdr := &tar.Header{
			Name:    rel,
			Mode:    int64(mode.Perm()),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: Epoch,
			Format:  tar.FormatPAX,
		}
		if mode&fs.ModeSetuid != 0 {
			hdr.Mode |= 04000
		}
		if mode&fs.ModeSetgid != 0 {
			hdr.Mode |= 02000
		}
		if mode&fs.ModeSticky != 0 {
			hdr.Mode |= 01000
		}
		switch {
		case mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, rel+"/"
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case mode.IsRegular():
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := seen[key]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				break
			}
			if st.Nlink > 1 {
				seen[key] = rel
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		default:
			return nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			n, err := io.CopyBuffer(tw, onlyReader{io.LimitReader(f, hdr.Size)}, buf)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if n != hdr.Size {
				return fmt.Errorf("%s changed size while being packed", rel)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
