package airs

// Tree hashing: a task or data directory's hash, as sha256sum would make it from the
// directory's SHA256SUMS (package digest), with its rules for what a tree may hold.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/digest"
)

// TreeHash hashes a directory the way this shell recipe does, and lists its files:
//
//	cd DIR && find . -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum
//
// Only regular files and directories are allowed (a symlink, device or socket is an error naming
// it), names must be printable without escapes (sha256sum would escape them), and the counts are
// capped.
func TreeHash(dir string, maxFiles int, maxBytes int64) ([]File, digest.Hex, error) {
	files, _, err := listTree(dir, maxFiles, maxBytes)
	if err != nil {
		return nil, "", err
	}
	for i := range files {
		sum, n, err := hashFile(filepath.Join(dir, filepath.FromSlash(files[i].Path)))
		if err != nil {
			return nil, "", err
		}
		if n != files[i].Size {
			return nil, "", fmt.Errorf("%s changed while it was hashed; hash it again once nothing writes it", filepath.Join(dir, files[i].Path))
		}
		files[i].SHA256 = digest.Hex(sum)
	}
	return files, hashList(files), nil
}

// hashList is the tree hash of files sorted by path with their sums: the SHA-256 of their
// SHA256SUMS.
func hashList(files []File) digest.Hex {
	sums := make([]digest.Sum, len(files))
	for i, f := range files {
		sums[i] = digest.Sum{Path: f.Path, SHA256: f.SHA256}
	}
	return digest.HashSums(sums)
}

// listTree lists dir's regular files (sorted by path, with sizes; not hashed) under the rules
// and caps of TreeHash, and their total size.
func listTree(dir string, maxFiles int, maxBytes int64) ([]File, int64, error) {
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, 0, err
	}
	if !st.IsDir() {
		return nil, 0, fmt.Errorf("%s is not a directory", dir)
	}
	var files []File
	var total int64
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if strings.ContainsAny(rel, "\\\n\r") || !isPrintable(rel) {
			return fmt.Errorf("%s: a name with a backslash, newline or unprintable byte; rename it", p)
		}
		switch {
		case e.IsDir():
			return nil
		case !e.Type().IsRegular():
			return fmt.Errorf("%s: %s, not a regular file; a task or data directory holds files and directories only (copy the file in its place)", p, typeName(e.Type()))
		}
		if len(files) >= maxFiles {
			return fmt.Errorf("%s: over %d files", dir, maxFiles)
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if total += info.Size(); total > maxBytes {
			return fmt.Errorf("%s: over %d bytes of files", dir, maxBytes)
		}
		files = append(files, File{Path: rel, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, total, nil
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

func hashFile(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
