package verify

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sealrun/sealrun/internal/fileio"
)

// maxWhole bounds a file the reader reads whole to compare it with what it makes again (a board,
// a page, publication.json, an export): sealrun writes none near it, and a hostile publication's
// file of gigabytes is named, never read into memory.
const maxWhole = 256 << 20

// readWhole reads a file whole, at most maxWhole bytes; missing says it is not there (err is then
// set too).
func readWhole(path string) (b []byte, missing bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, err
	}
	tooLarge := fmt.Errorf("larger than %d MiB, more than sealrun writes; not read", maxWhole>>20)
	if err == nil && fi.Size() > maxWhole {
		return nil, false, tooLarge
	}
	b, err = fileio.ReadLimited(path, "file", maxWhole)
	if err == nil && len(b) > maxWhole { // it grew since
		return nil, false, tooLarge
	}
	return b, false, err
}
