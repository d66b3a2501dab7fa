//go:build unix

package client

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// LockGather takes the gather lock of run id in the results directory dir: an flock on the hidden
// file .<id>.gather, which goes when the lock is let go. locked is false where the file system
// has no locks (ENOLCK, EOPNOTSUPP): the gather then goes on unlocked, as before locks.
func LockGather(ctx context.Context, dir, id string) (unlock func(), locked bool, err error) {
	p := filepath.Join(dir, "."+id+".gather")
	for {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, false, fmt.Errorf("results directory %s: the gather lock %s: %w; give the jobs' user write access to it", dir, p, err)
		}
		for {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err != unix.EWOULDBLOCK && err != unix.EINTR {
				break
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, false, fmt.Errorf("run %s: waiting for another gather of it into %s: %w", id, dir, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err == unix.ENOLCK || err == unix.EOPNOTSUPP {
			f.Close()
			return func() {}, false, nil
		}
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("results directory %s: lock %s: %w", dir, p, err)
		}
		// The lock is this path's only while the path is this file: the holder before may
		// have removed it between our open and our lock.
		held, err1 := f.Stat()
		now, err2 := os.Stat(p)
		if err1 == nil && err2 == nil && os.SameFile(held, now) {
			return func() { os.Remove(p); f.Close() }, true, nil
		}
		f.Close()
	}
}
