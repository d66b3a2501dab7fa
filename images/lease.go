package images

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// ErrInUse: the image is leased by a run and cannot be removed.
var ErrInUse = errors.New("image in use")

// Leases keep images in use from being removed, as containerd's leases keep content from being
// collected. A run takes a lease on each image it uses before its first container starts and
// releases it when it ends; Remove refuses a leased image and names the holders. A lease is a
// file images/leases/<hex>/<holder>: it survives a daemon crash, and the daemon's recovery
// releases the leases of the runs it reconciles (ReleaseHolder).
//
// Lease and Remove serialise on an exclusive lock of images/.lock, so an image is never removed
// between a lease's check and its creation.

// Lease is one holder's hold on one image.
type Lease struct {
	path string
}

// Release ends the lease. Releasing twice is harmless.
func (l *Lease) Release() error {
	if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("release image lease %s: %w", l.path, err)
	}
	os.Remove(filepath.Dir(l.path)) // the image's lease directory, once empty
	return nil
}

var holderRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Lease takes a lease on a stored image for holder (a run id).
func (s *Store) Lease(digest, holder string) (*Lease, error) {
	if !holderRE.MatchString(holder) {
		return nil, fmt.Errorf("image lease holder %q: use letters, digits, dot, dash and underscore (a run id)", holder)
	}
	unlock, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := s.Get(digest); err != nil {
		return nil, err
	}
	dir := filepath.Join(s.dir, "leases", strings.TrimPrefix(digest, "sha256:"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("image lease: %w", err)
	}
	p := filepath.Join(dir, holder)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return nil, fmt.Errorf("image lease: %w", err)
	}
	return &Lease{path: p}, nil
}

// Holders lists who holds leases on an image.
func (s *Store) Holders(digest string) []string {
	entries, _ := os.ReadDir(filepath.Join(s.dir, "leases", strings.TrimPrefix(digest, "sha256:")))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// ReleaseHolder releases every lease of holder (a run the daemon reconciled after a crash).
func (s *Store) ReleaseHolder(holder string) error {
	if !holderRE.MatchString(holder) {
		return fmt.Errorf("image lease holder %q is not valid", holder)
	}
	dirs, _ := os.ReadDir(filepath.Join(s.dir, "leases"))
	var errs []error
	for _, d := range dirs {
		l := &Lease{path: filepath.Join(s.dir, "leases", d.Name(), holder)}
		errs = append(errs, l.Release())
	}
	return errors.Join(errs...)
}

// lock takes the store's exclusive lock (flock on images/.lock).
func (s *Store) lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("image store lock: %w", err)
	}
	return func() { f.Close() }, nil
}
