package airs

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the filesystem holding path to disk (syncfs(2)): one call for a whole tree
// instead of an fsync per file.
func syncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// startWriteback asks the kernel to start writing f's dirty pages now (sync_file_range, no
// wait), so that the final syncfs finds most of a large tree on disk already.
func startWriteback(f *os.File) {
	unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
