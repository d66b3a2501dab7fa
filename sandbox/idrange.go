package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The host ID space sealrun hands out: ranges of 65536 IDs from 1,000,000 up, far above any
// regular user or system account (and the /etc/subuid ranges distributions give users, which
// start at 100000 and are 65536 wide per user).
const (
	RangeBase  = 1000000
	RangeSize  = 65536
	RangeCount = 4096 // up to 4096 live containers and runs
)

// ErrRangesExhausted: every UID range is in use.
var ErrRangesExhausted = errors.New("all UID ranges are in use")

// Ranges allocates non-overlapping host UID/GID ranges, one per live container (and one per run
// for its shared GID). Each allocation is a file <dir>/<n> created with O_EXCL that names its
// owner, so that allocations are atomic across processes, recorded, and found again by Reap.
type Ranges struct {
	dir   string
	count int // RangeCount; tests use fewer
}

// OpenRanges opens the allocation directory.
func OpenRanges(dir string) (*Ranges, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("UID range records %s: %w", dir, err)
	}
	return &Ranges{dir: dir, count: RangeCount}, nil
}

// Allocate reserves a free range for owner (a container or run id).
func (r *Ranges) Allocate(owner string) (IDRange, error) {
	used := map[int]bool{}
	if entries, err := os.ReadDir(r.dir); err == nil {
		for _, e := range entries {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				used[n] = true
			}
		}
	}
	for n := 0; n < r.count; n++ {
		if used[n] {
			continue // O_EXCL below still settles races with other processes
		}
		f, err := os.OpenFile(filepath.Join(r.dir, strconv.Itoa(n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return IDRange{}, fmt.Errorf("allocate UID range: %w", err)
		}
		_, werr := f.WriteString(owner + "\n")
		cerr := f.Close()
		if werr != nil || cerr != nil {
			os.Remove(f.Name())
			return IDRange{}, fmt.Errorf("allocate UID range: %v %v", werr, cerr)
		}
		return IDRange{Base: uint32(RangeBase + n*RangeSize), Size: RangeSize}, nil
	}
	return IDRange{}, fmt.Errorf("%w (%d of %d); remove finished runs or reap leftovers (sealrun doctor)", ErrRangesExhausted, r.count, r.count)
}

// Release frees a range.
func (r *Ranges) Release(rg IDRange) error {
	n := (int(rg.Base) - RangeBase) / RangeSize
	if n < 0 || n >= RangeCount || rg.Base != uint32(RangeBase+n*RangeSize) {
		return fmt.Errorf("release UID range %+v: not a sealrun range", rg)
	}
	if err := os.Remove(filepath.Join(r.dir, strconv.Itoa(n))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Owners lists allocations: owner by range.
func (r *Ranges) Owners() (map[IDRange]string, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	out := map[IDRange]string{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(r.dir, e.Name()))
		out[IDRange{Base: uint32(RangeBase + n*RangeSize), Size: RangeSize}] = strings.TrimSpace(string(b))
	}
	return out, nil
}
