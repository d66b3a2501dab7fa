package airs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Limits on a raw data directory: data, unlike a task, may be large.
const (
	MaxDataFiles = 1_000_000
	MaxDataBytes = 1 << 40
)

// InstallTree copies the directory src into store/<hash>, where hash is its TreeHash, and
// returns the hash. The copy is checked file by file against the hash taken first (a file
// changed meanwhile is an error naming it), fsynced, and renamed into place whole: a crash
// leaves no half-copied tree under its hash. An existing store/<hash> is kept as it is.
// Directories become 0755 and files 0644 so that a container's unprivileged user can read a
// tree mounted read-only.
func InstallTree(src, store string, maxFiles int, maxBytes int64) (string, error) {
	files, hash, err := TreeHash(src, maxFiles, maxBytes)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(store, hash)
	if _, err := os.Stat(dst); err == nil {
		return hash, nil
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return "", err
	}
	var rb [8]byte
	rand.Read(rb[:])
	tmp := filepath.Join(store, ".tmp-"+hex.EncodeToString(rb[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	dirs := map[string]bool{tmp: true}
	for _, f := range files {
		to := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		for d := filepath.Dir(to); !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if err := copyChecked(filepath.Join(src, filepath.FromSlash(f.Path)), to, f.SHA256); err != nil {
			return "", err
		}
	}
	for d := range dirs {
		if err := syncPath(d); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return hash, nil // another install of the same tree won
		}
		return "", err
	}
	ok = true
	return hash, syncPath(store)
}

// copyChecked copies one regular file (never following a symlink), checking its SHA-256.
func copyChecked(from, to, want string) error {
	in, err := os.OpenFile(from, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s: no longer a regular file", from)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%s changed while it was copied (sha256 %s, then %s); copy it again once nothing writes it", from, want, got)
	}
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
