package verify

import (
	"errors"
	"io/fs"

	"github.com/sealrun/sealrun/internal/fileio"
)

// maxWhole bounds a file the reader reads whole to compare it with what it makes again (a board,
// a page, publication.json, an export): sealrun writes none near it, and a hostile publication's
// file of gigabytes is named, never read into memory.
const maxWhole = 256 << 20

// readWhole reads a file whole, at most maxWhole bytes; missing says it is not there (err is then
// set too).
func readWhole(path string) (b []byte, missing bool, err error) {
	b, err = fileio.ReadBounded(path, "file", maxWhole)
	return b, errors.Is(err, fs.ErrNotExist), err
}
