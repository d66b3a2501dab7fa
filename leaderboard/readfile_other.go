//go:build !unix

package leaderboard

import (
	"io"
	"os"
)

// readFileCapped reads the file at path whole, at most max+1 bytes (one more tells an oversized
// file). The error says which step failed and why.
func readFileCapped(path string, max int, _ []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, readError("cannot open", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, readError("cannot read", err)
	}
	return data, nil
}
