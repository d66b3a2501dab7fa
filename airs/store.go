package airs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/sealrun/sealrun/digest"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits on a raw data directory: data, unlike a task, may be large.
const (
	MaxDataFiles = 1_000_000
	MaxDataBytes = 1 << 40
)

// InstallTree copies the directory src into store/<hash>, where hash is its TreeHash, and
// returns the hash (InstallTreeWith, without progress).
func InstallTree(src, store string, maxFiles int, maxBytes int64) (string, error) {
	return InstallTreeWith(src, store, InstallOptions{MaxFiles: maxFiles, MaxBytes: maxBytes})
}

// InstallOptions configure InstallTreeWith.
type InstallOptions struct {
	MaxFiles int
	MaxBytes int64
	// Progress, when set, is called every ProgressEvery (default 2 s) while files are copied,
	// with the bytes copied so far and the total.
	Progress      func(copied, total int64)
	ProgressEvery time.Duration
}

// InstallTreeWith copies the directory src into store/<hash>, where hash is its TreeHash, and
// returns the hash. Each file is read once: copied and hashed together, by as many workers as
// there are CPUs; one whose size or modification time changed while it was copied is an error
// naming it. The copy is flushed to disk (syncfs) and renamed into place whole: a crash leaves
// no half-copied tree under its hash. An existing store/<hash> is kept as it is. Directories
// become 0755 and files 0644 so that a container's unprivileged user can read a tree mounted
// read-only.
func InstallTreeWith(src, store string, o InstallOptions) (string, error) {
	files, total, err := listTree(src, o.MaxFiles, o.MaxBytes)
	if err != nil {
		return "", err
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
	for _, f := range files {
		if err := os.MkdirAll(filepath.Join(tmp, filepath.Dir(filepath.FromSlash(f.Path))), 0o755); err != nil {
			return "", err
		}
	}
	var copied atomic.Int64
	if o.Progress != nil {
		defer reportProgress(o, &copied, total)()
	}
	if err := copyFiles(src, tmp, files, &copied); err != nil {
		return "", err
	}
	hash := hashList(files)
	dst := filepath.Join(store, string(hash))
	if _, err := os.Stat(dst); err == nil {
		return string(hash), nil // already stored (the deferred cleanup drops the copy)
	}
	if err := syncFS(tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return string(hash), nil // another install of the same tree won
		}
		return "", err
	}
	ok = true
	return string(hash), syncPath(store)
}

// reportProgress calls o.Progress with the bytes copied so far every o.ProgressEvery (default
// 2 s) until the returned stop is called; no call comes after stop returns.
func reportProgress(o InstallOptions, copied *atomic.Int64, total int64) (stop func()) {
	every := o.ProgressEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				o.Progress(copied.Load(), total)
			}
		}
	}()
	return func() { close(done); <-exited }
}

// copyFiles copies the listed files of src into dst (whose directories the caller made), hashing
// each as it is copied, by a few workers; the first error is returned.
func copyFiles(src, dst string, files []File, copied *atomic.Int64) error {
	jobs := make(chan int)
	errs := make(chan error, len(files)+1)
	var wg sync.WaitGroup
	for range max(2, min(2*runtime.NumCPU(), 8)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				f := &files[i]
				sum, err := copyHashed(filepath.Join(src, filepath.FromSlash(f.Path)), filepath.Join(dst, filepath.FromSlash(f.Path)), f.Size, copied)
				if err != nil {
					errs <- err
					continue
				}
				f.SHA256 = digest.Hex(sum)
			}
		}()
	}
	for i := range files {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// copyHashed copies one regular file (never following a symlink) and returns its SHA-256: the
// copy is the kernel's (copy_file_range, as cp does), the hash a read of the source from the
// page cache. A file whose size or modification time changed meanwhile is an error naming it.
func copyHashed(from, to string, size int64, copied *atomic.Int64) (string, error) {
	in, err := os.OpenFile(from, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer in.Close()
	before, err := in.Stat()
	if err != nil || !before.Mode().IsRegular() {
		return "", fmt.Errorf("%s: no longer a regular file", from)
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	// The hash reads the source beside the copy (both from the page cache).
	h := sha256.New()
	var m int64
	var herr error
	hashed := make(chan struct{})
	go func() {
		defer close(hashed)
		m, herr = io.CopyBuffer(h, io.NewSectionReader(in, 0, size+1), make([]byte, 1<<20))
	}()
	n, err := io.Copy(out, io.LimitReader(in, size+1)) // *os.File to *os.File: copy_file_range
	if err == nil {
		startWriteback(out)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	<-hashed
	if err == nil {
		err = herr
	}
	if err != nil {
		return "", err
	}
	copied.Add(n)
	after, err := in.Stat()
	if err != nil || n != size || m != size || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		return "", fmt.Errorf("%s changed while it was copied (%d bytes listed, %d copied, %d hashed); copy it again once nothing writes it", from, size, n, m)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
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
