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
// for its shared GID). Each allocation is a file <dir>/<n> created with O_EXCL that names the
// sandbox host that made it (its tag) and its owner, so that allocations are atomic across
// processes, recorded, and found again by Reap. The directory is machine-wide (default
// DefaultRangesDir), shared by every sealrun on the machine whatever its state directory: two
// daemons, or a daemon and a test, never hand out the same IDs; each releases only its own.
type Ranges struct {
	dir   string
	tag   string
	count int // RangeCount; tests use fewer
}

// DefaultRangesDir is the machine-wide record of allocated ranges. It is volatile (a tmpfs):
// ranges guard live containers, and none outlives a reboot.
const DefaultRangesDir = "/run/sealrun-ranges"

// OpenRanges opens the allocation directory; tag names the allocating host (its run directory).
func OpenRanges(dir, tag string) (*Ranges, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("UID range records %s: %w", dir, err)
	}
	if tag == "" || strings.ContainsAny(tag, "\n\t") {
		return nil, fmt.Errorf("UID range records: bad tag %q", tag)
	}
	return &Ranges{dir: dir, tag: tag, count: RangeCount}, nil
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
		_, werr := f.WriteString(r.tag + "\t" + owner + "\n")
		cerr := f.Close()
		if werr != nil || cerr != nil {
			os.Remove(f.Name())
			return IDRange{}, fmt.Errorf("allocate UID range: %v %v", werr, cerr)
		}
		return IDRange{Base: uint32(RangeBase + n*RangeSize), Size: RangeSize}, nil
	}
	return IDRange{}, fmt.Errorf("%w (%d of %d); remove finished runs or reap leftovers (sealrun doctor)", ErrRangesExhausted, r.count, r.count)
}

// Release frees a range this host allocated. A range recorded by another host is left alone.
func (r *Ranges) Release(rg IDRange) error {
	n := (int(rg.Base) - RangeBase) / RangeSize
	if n < 0 || n >= RangeCount || rg.Base != uint32(RangeBase+n*RangeSize) {
		return fmt.Errorf("release UID range %+v: not a sealrun range", rg)
	}
	p := filepath.Join(r.dir, strconv.Itoa(n))
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release UID range %d: %w", rg.Base, err)
	}
	if tag, _, _ := strings.Cut(string(b), "\t"); tag != r.tag {
		return fmt.Errorf("release UID range %d: it belongs to another sealrun (%s), not to %s; left alone", rg.Base, tag, r.tag)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Owners lists this host's allocations: owner by range.
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
		tag, owner, _ := strings.Cut(strings.TrimSpace(string(b)), "\t")
		if tag == r.tag {
			out[IDRange{Base: uint32(RangeBase + n*RangeSize), Size: RangeSize}] = owner
		}
	}
	return out, nil
}
