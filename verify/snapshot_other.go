//go:build !linux

package verify

import "sync/atomic"

// publicationReader reads the files of the publication at dir for the files check: each opened
// by its path, and refused unless the file opened is the regular file at that path (readAndHash).
func publicationReader(dir string) (read func(rel string, budget *atomic.Int64) (string, []byte, error), done func(), err error) {
	return func(rel string, budget *atomic.Int64) (string, []byte, error) { return readAndHash(dir, rel, budget) }, func() {}, nil
}
