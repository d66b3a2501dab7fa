//go:build linux

package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// publicationReader reads the files of the publication at dir for the files check. On Linux each
// is opened beneath the publication's root with no link anywhere on its path (openat2's
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS: one system call where a link check needs a second,
// and a directory swapped for a link meanwhile is refused too), then read with its descriptor
// alone: four system calls a file, against six through *os.File. A kernel without openat2 (before
// 5.6) gets the portable reader.
func publicationReader(dir string) (read func(rel string, budget *atomic.Int64) (string, []byte, error), done func(), err error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	probe, perr := unix.Openat2(root, ".", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH})
	if perr != nil {
		unix.Close(root)
		if errors.Is(perr, unix.ENOSYS) || errors.Is(perr, unix.EPERM) { // no openat2, or a filter refusing it
			return func(rel string, budget *atomic.Int64) (string, []byte, error) { return readAndHash(dir, rel, budget) }, func() {}, nil
		}
		return nil, nil, &os.PathError{Op: "openat2", Path: dir, Err: perr}
	}
	unix.Close(probe)
	read = func(rel string, budget *atomic.Int64) (string, []byte, error) { return readBeneath(root, rel, budget) }
	return read, func() { unix.Close(root) }, nil
}

// readBeneath reads and hashes the file rel beneath root, keeping its bytes where the budget
// allows (readAndHash's contract).
func readBeneath(root int, rel string, budget *atomic.Int64) (sum string, kept []byte, err error) {
	var fd int
	// EAGAIN: a rename under the publication raced the lookup; a few tries, not forever (a
	// publication renamed without end is refused, named, below).
	for range 8 {
		// O_NONBLOCK: a FIFO put in a file's place meanwhile fails the type check below
		// rather than blocking the open.
		fd, err = unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
		return "", nil, fmt.Errorf("%s: not a regular file of the publication (a link on its path, or replaced while being read)", rel)
	case err != nil:
		return "", nil, &os.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", nil, &os.PathError{Op: "stat", Path: rel, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil, fmt.Errorf("%s: not a regular file of the publication (a link, or replaced while being read)", rel)
	}
	return hashOpened(fdReader(fd), st.Size, rel, budget)
}

// fdReader reads a descriptor with read(2), no *os.File around it.
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
