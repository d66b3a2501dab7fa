package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrRunDirInUse: another process holds the run directory a host was given.
var ErrRunDirInUse = errors.New("run directory in use by another process")

// runDirLocks are the run directories this process holds, by path. A process may open several
// hosts on one run directory (a daemon restarted in the same test process, say); another process
// may not: its Reap would take this one's containers, cgroups and UID ranges for a crash's
// leftovers and remove them while they run.
var runDirLocks struct {
	sync.Mutex
	held map[string]*os.File
}

// lockRunDir takes the run directory for this process, for its lifetime: an exclusive flock on
// <dir>/.lock, holding this process's pid for the message of whoever finds it taken.
func lockRunDir(dir string) error {
	runDirLocks.Lock()
	defer runDirLocks.Unlock()
	if _, ok := runDirLocks.held[dir]; ok {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sandbox run directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		holder := strings.TrimSpace(string(b[:n]))
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s is held by sealrun process %s; each sealrun process needs a run directory of its own (sealrund: run_dir in sealrun.toml; the CLI makes a private one unless given --run-dir)", ErrRunDirInUse, dir, holder)
		}
		return fmt.Errorf("sandbox run directory %s: lock: %w", dir, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	if runDirLocks.held == nil {
		runDirLocks.held = map[string]*os.File{}
	}
	runDirLocks.held[dir] = f
	return nil
}

// releaseRunDir lets the run directory go (its lock closed): for a directory reaped and removed.
func releaseRunDir(dir string) {
	runDirLocks.Lock()
	defer runDirLocks.Unlock()
	if f, ok := runDirLocks.held[dir]; ok {
		f.Close()
		delete(runDirLocks.held, dir)
	}
}

// RunDirHeld reports whether a live process holds the run directory dir (its lock).
func RunDirHeld(dir string) bool {
	runDirLocks.Lock()
	_, mine := runDirLocks.held[dir]
	runDirLocks.Unlock()
	if mine {
		return true
	}
	f, err := os.Open(filepath.Join(dir, ".lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
