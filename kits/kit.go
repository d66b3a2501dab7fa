// Package kits builds, hashes, verifies and seeds task kits: everything a run's workspace starts
// with (the brief, the starter code, the training text, the public validation set). A built kit
// is a directory of regular files with a SHA256SUMS manifest; its hash is the SHA-256 of that
// manifest, which anyone can recompute with coreutils (KIT.md). A track pins the hash.
//
// The kits' sources are embedded (Sources): ari/ is the ARI kit's recipe and starter code,
// demo-agent/ the scripted demo scaffold that the demo controller image carries.
package kits

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
)

// ManifestName is the manifest of a built kit: `sha256sum` lines of every other file.
const ManifestName = digest.SumsFile

// Limits of a kit, checked before anything is hashed or copied.
const (
	MaxFileBytes  = 64 << 20  // one file
	MaxTotalBytes = 256 << 20 // all files
	MaxFiles      = 4096
	MaxPathBytes  = 255
)

// Required files every kit has.
var Required = []string{"BRIEF.md"}

// pathRE is what a kit path may be: portable names joined by '/', so that `sha256sum` prints
// them unescaped and every shell handles them.
var pathRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$`)

// File is one file of a kit.
type File struct {
	Path   string
	SHA256 digest.Hex
	Size   int64
}

// Kit is a verified built kit.
type Kit struct {
	Dir   string
	Hash  digest.Hex // sha256 of SHA256SUMS: the kit hash a track pins
	Files []File     // sorted by path, SHA256SUMS excluded
	Bytes int64
}

// File returns the kit's file at path, if it has one.
func (k *Kit) File(path string) (File, bool) {
	i := sort.Search(len(k.Files), func(i int) bool { return k.Files[i].Path >= path })
	if i < len(k.Files) && k.Files[i].Path == path {
		return k.Files[i], true
	}
	return File{}, false
}

// Error is a refused kit: the kit, the file and what is wrong with it, and the fix.
type Error struct {
	Dir, File, Problem, Fix string
}

func (e *Error) Error() string {
	where := "kit " + e.Dir
	if e.File != "" {
		where += ": " + e.File
	}
	s := where + ": " + e.Problem
	if e.Fix != "" {
		s += "; " + e.Fix
	}
	return s
}

const rebuild = "rebuild it with sealrun kit build"

// Open verifies a built kit and returns it: only regular files and directories, every path
// portable, within the limits, and exactly the files SHA256SUMS lists with those hashes. The
// error names the file and the fix.
func Open(dir string) (*Kit, error) {
	found, err := scanKit(dir)
	if err != nil {
		return nil, err
	}
	k := &Kit{Dir: dir}
	if _, ok := found[ManifestName]; !ok {
		return nil, &Error{Dir: dir, File: ManifestName, Problem: "missing: this is not a built kit", Fix: "build one with sealrun kit build SRC --out DIR"}
	}
	manifest, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, &Error{Dir: dir, File: ManifestName, Problem: err.Error()}
	}
	listed, err := parseManifest(manifest)
	if err != nil {
		return nil, &Error{Dir: dir, File: ManifestName, Problem: err.Error(), Fix: rebuild}
	}
	delete(found, ManifestName)
	for _, f := range listed {
		size, ok := found[f.Path]
		if !ok {
			return nil, &Error{Dir: dir, File: f.Path, Problem: "listed in SHA256SUMS but missing", Fix: "restore it or " + rebuild}
		}
		delete(found, f.Path)
		sum, err := fileio.SHA256(filepath.Join(dir, f.Path))
		if err != nil {
			return nil, &Error{Dir: dir, File: f.Path, Problem: err.Error()}
		}
		if sum != string(f.SHA256) {
			return nil, &Error{Dir: dir, File: f.Path, Problem: fmt.Sprintf("has sha256 %s, SHA256SUMS says %s: it was changed after the kit was built", sum, f.SHA256), Fix: rebuild}
		}
		k.Files = append(k.Files, File{Path: f.Path, SHA256: digest.Hex(sum), Size: size})
		k.Bytes += size
	}
	if len(found) > 0 {
		extra := make([]string, 0, len(found))
		for p := range found {
			extra = append(extra, p)
		}
		sort.Strings(extra)
		return nil, &Error{Dir: dir, File: extra[0], Problem: fmt.Sprintf("is not listed in SHA256SUMS (%d unlisted file(s): %s)", len(extra), strings.Join(extra, ", ")), Fix: "remove it or " + rebuild}
	}
	for _, r := range Required {
		if _, ok := k.File(r); !ok {
			return nil, &Error{Dir: dir, File: r, Problem: "missing: every kit has one", Fix: "add it to the kit's recipe and " + rebuild}
		}
	}
	sum := sha256.Sum256(manifest)
	k.Hash = digest.HexOf(sum[:])
	return k, nil
}

// scanKit lists a kit directory's regular files with their sizes, refusing what a kit may not
// hold (links, special files, unportable names) and what is over its limits.
func scanKit(dir string) (map[string]int64, error) {
	found := map[string]int64{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if err != nil {
			return &Error{Dir: dir, File: rel, Problem: err.Error()}
		}
		if rel == "." {
			if !d.IsDir() {
				return &Error{Dir: dir, Problem: "not a directory", Fix: "give the directory sealrun kit build wrote"}
			}
			return nil
		}
		if len(rel) > MaxPathBytes || !pathRE.MatchString(rel) {
			return &Error{Dir: dir, File: rel, Problem: "the name is not portable (letters, digits, '.', '_', '-' and '/', not starting with '.' or '-', at most 255 bytes)", Fix: "rename it"}
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			return &Error{Dir: dir, File: rel, Problem: fmt.Sprintf("is a symbolic link (to %s); a kit holds regular files and directories only", target), Fix: "copy the file in instead of linking it"}
		case d.IsDir():
			return nil
		case !t.IsRegular():
			return &Error{Dir: dir, File: rel, Problem: fmt.Sprintf("is a %s, not a regular file", t.Type()), Fix: "remove it"}
		}
		info, err := d.Info()
		if err != nil {
			return &Error{Dir: dir, File: rel, Problem: err.Error()}
		}
		if info.Size() > MaxFileBytes {
			return &Error{Dir: dir, File: rel, Problem: fmt.Sprintf("is %d bytes, over the kit's limit of %d bytes per file", info.Size(), MaxFileBytes), Fix: "make it smaller or leave it out"}
		}
		if total += info.Size(); total > MaxTotalBytes {
			return &Error{Dir: dir, File: rel, Problem: fmt.Sprintf("brings the kit over its limit of %d bytes in all", MaxTotalBytes), Fix: "leave files out"}
		}
		if len(found) >= MaxFiles {
			return &Error{Dir: dir, File: rel, Problem: fmt.Sprintf("is past the kit's limit of %d files", MaxFiles), Fix: "leave files out"}
		}
		found[rel] = info.Size()
		return nil
	})
	if err != nil {
		var ke *Error
		if errors.As(err, &ke) {
			return nil, ke
		}
		return nil, &Error{Dir: dir, Problem: err.Error()}
	}
	return found, nil
}

// Check compares the kit's hash with the one a track pins.
func (k *Kit) Check(want digest.Hex, track string) error {
	if k.Hash != want {
		return &Error{Dir: k.Dir, File: ManifestName, Problem: fmt.Sprintf("the kit hash is %s, track %s pins %s", k.Hash, track, want),
			Fix: "use the kit the track was made with, or a track that pins this kit ([kit] sha256)"}
	}
	return nil
}

// parseManifest reads SHA256SUMS: `<64 hex>  <path>` lines, sorted by path bytes, no duplicates,
// each path a kit path.
func parseManifest(b []byte) ([]File, error) {
	sums, err := digest.ParseSums(b, digest.SumsRules{Sorted: true, MaxLines: MaxFiles, MaxLineBytes: 4096, Path: func(p string) string {
		if !pathRE.MatchString(p) || len(p) > MaxPathBytes || p == ManifestName {
			return "is not a kit's file: portable names joined by '/', at most 255 bytes, not SHA256SUMS itself"
		}
		return ""
	}})
	if err != nil {
		return nil, err
	}
	out := make([]File, len(sums))
	for i, s := range sums {
		out[i] = File{Path: s.Path, SHA256: s.SHA256}
	}
	return out, nil
}

// manifestBytes is the canonical SHA256SUMS of files (sorted by path).
func manifestBytes(files []File) []byte {
	sums := make([]digest.Sum, len(files))
	for i, f := range files {
		sums[i] = digest.Sum{Path: f.Path, SHA256: f.SHA256}
	}
	return digest.FormatSums(sums)
}

// Seed copies the kit into a run's workspace: every listed file (SHA256SUMS too), hashed again
// while it is copied (a kit damaged since Open is refused), with modes 0664 and directories
// 0775, whatever the kit's own modes: the hash binds contents, not modes. Existing files are
// never overwritten.
func (k *Kit) Seed(ws string) error {
	files := append(append([]File(nil), k.Files...), File{Path: ManifestName})
	for _, f := range files {
		dst := filepath.Join(ws, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o775); err != nil {
			return err
		}
		if err := copyChecked(filepath.Join(k.Dir, f.Path), dst, string(f.SHA256)); err != nil {
			return &Error{Dir: k.Dir, File: f.Path, Problem: err.Error(), Fix: "add the kit again (sealrun content add DIR)"}
		}
	}
	return nil
}

func copyChecked(src, dst, want string) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscallNoFollow, 0o664)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, MaxFileBytes+1)); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); want != "" && got != want {
		os.Remove(dst)
		return fmt.Errorf("has sha256 %s while being copied, not %s: the stored kit is damaged", got, want)
	}
	return os.Chmod(dst, 0o664)
}

// Install verifies the kit in src and copies it to kitsDir/<hash>, atomically (a temporary
// directory renamed into place, then verified again). Installing a kit already there is a no-op.
func Install(src, kitsDir string) (*Kit, error) {
	k, err := Open(src)
	if err != nil {
		return nil, err
	}
	final := filepath.Join(kitsDir, string(k.Hash))
	if have, err := Open(final); err == nil {
		return have, nil
	}
	if err := os.MkdirAll(kitsDir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(kitsDir, ".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := k.Seed(tmp); err != nil {
		return nil, err
	}
	if err := fileio.SyncTree(tmp); err != nil {
		return nil, err
	}
	os.RemoveAll(final) // a damaged earlier copy
	if err := os.Rename(tmp, final); err != nil {
		return nil, err
	}
	if d, err := os.Open(kitsDir); err == nil {
		d.Sync()
		d.Close()
	}
	return Open(final)
}
