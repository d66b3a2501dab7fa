package images

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"

	"github.com/BurntSushi/toml"

	"github.com/sealrun/sealrun/internal/fileio"
)

// Lock is an images.lock file: names (a tag as given to pin, or a local image key) mapped to
// references pinned by digest. Tracks copy their [images] pins from it.
type Lock map[string]string

// ReadLock reads a lock file; a missing file is an empty lock.
func ReadLock(path string) (Lock, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Lock{}, nil
	}
	if err != nil {
		return nil, err
	}
	var doc struct {
		Images map[string]string `toml:"images"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %v", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("lock file %s: unknown key %s; it holds only an [images] table", path, u[0])
	}
	for k, v := range doc.Images {
		if _, err := ParsePinned(v); err != nil {
			return nil, fmt.Errorf("lock file %s: images.%s: %v", path, k, err)
		}
	}
	if doc.Images == nil {
		doc.Images = map[string]string{}
	}
	return Lock(doc.Images), nil
}

// Write writes the lock atomically, sorted, with a header comment.
func (l Lock) Write(path string) error {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString("# images.lock: written by `sealrun images pin` and `sealrun images build-local`.\n# Every value is pinned by digest; copy them into a track's [images] table.\n\n[images]\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", strconv.Quote(k), strconv.Quote(l[k]))
	}
	return fileio.WriteFile(path, b.Bytes(), 0o644)
}

// UpdateLock sets entries in the lock file at path, keeping the others.
func UpdateLock(path string, set map[string]string) error {
	l, err := ReadLock(path)
	if err != nil {
		return err
	}
	for k, v := range set {
		l[k] = v
	}
	return l.Write(path)
}
