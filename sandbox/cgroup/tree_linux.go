package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// Mode names the host's cgroup setup.
func Mode() string {
	switch cgroups.Mode() {
	case cgroups.Legacy:
		return "v1"
	case cgroups.Hybrid:
		return "hybrid"
	case cgroups.Unified:
		return "v2"
	}
	return "unavailable"
}

// Stats is what a container or run used. Read from the container's wrapper cgroup (see
// Container), they stay exact after the container exited: the kernel carries a removed child's
// CPU time, memory peak and OOM kills into its parent.
type Stats struct {
	CPUNanos   uint64 // CPU time
	MemoryPeak uint64 // bytes
	Pids       uint64 // tasks now
	OOMKills   uint64 // OOM kills
}

// Tree drives one cgroup subtree, on v1/hybrid (through containerd/cgroups) or v2.
type Tree struct {
	Path string // "<root>/<run>", "<root>/<run>/<container>" or its runtime leaf
}

// Unified reports whether the host has only the unified (v2) hierarchy.
func Unified() bool { return cgroups.Mode() == cgroups.Unified }

func (t Tree) Dir() string { return filepath.Join(Mountpoint, t.Path) }

// Create makes the cgroup (and its parents) with no limits of its own. On v2 it creates it
// below base (the highest cgroup sealrun changes) and enables the controllers on the way and in
// itself, so that its children have them.
func (t Tree) Create(base string) error {
	if Unified() {
		if err := mkdirCgroupV2(base, t.Path); err != nil {
			return wrapCgroup("create", t.Path, err)
		}
		return wrapCgroup("create", t.Path, enableControllers(t.Path))
	}
	var err error
	// Another run's teardown may remove the empty /sealrun parent between our mkdirs: retry.
	for try := 0; try < 3; try++ {
		if _, err = cgroup1.New(cgroup1.StaticPath(t.Path), &specs.LinuxResources{}); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return wrapCgroup("create", t.Path, err)
}

func wrapCgroup(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cgroup %s %s: %w", op, path, err)
}

// Stats reads CPU time, memory peak, tasks and OOM kills (v2: every one hierarchical; v1: the
// OOM kills of this cgroup alone, which the v1 memory cgroup does not carry up).
func (t Tree) Stats() (Stats, error) {
	if Unified() {
		dir := t.Dir()
		var out Stats
		cpu, err := readKV(filepath.Join(dir, "cpu.stat"), "usage_usec")
		if err != nil {
			return Stats{}, wrapCgroup("stat", t.Path, err)
		}
		out.CPUNanos = cpu * 1000
		if out.MemoryPeak, err = readUint(filepath.Join(dir, "memory.peak")); err != nil {
			out.MemoryPeak, _ = readUint(filepath.Join(dir, "memory.current")) // before Linux 5.19
		}
		out.Pids, _ = readUint(filepath.Join(dir, "pids.current"))
		out.OOMKills, _ = readKV(filepath.Join(dir, "memory.events"), "oom_kill")
		return out, nil
	}
	// v1: the handful of files the stats need, read directly (the library's Stat reads every
	// subsystem's every file, blkio included: milliseconds per sample).
	v1 := func(subsys, file string) (uint64, bool) {
		n, err := readUint(filepath.Join("/sys/fs/cgroup", subsys, t.Path, file))
		return n, err == nil
	}
	out := Stats{}
	var ok bool
	if out.CPUNanos, ok = v1("cpuacct", "cpuacct.usage"); !ok {
		if out.CPUNanos, ok = v1("cpu,cpuacct", "cpuacct.usage"); !ok {
			return Stats{}, wrapCgroup("stat", t.Path, fs.ErrNotExist)
		}
	}
	out.MemoryPeak, _ = v1("memory", "memory.max_usage_in_bytes")
	out.Pids, _ = v1("pids", "pids.current")
	out.OOMKills = readOOMKills(t.Path)
	return out, nil
}

// PidsFile is the cgroup's pids control file name on v1 or v2.
func (t Tree) PidsFile(name string) string {
	if Unified() {
		return filepath.Join(t.Dir(), name)
	}
	return filepath.Join("/sys/fs/cgroup/pids", t.Path, name)
}

// SetPidsMax limits the tasks of the cgroup and everything below it; on v1 it creates the
// cgroup in the pids hierarchy first if it is not there.
func (t Tree) SetPidsMax(n int64) error {
	if !Unified() {
		if err := os.Mkdir(filepath.Dir(t.PidsFile("pids.max")), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return wrapCgroup("create", t.Path, err)
		}
	}
	return wrapCgroup("limit pids of", t.Path, os.WriteFile(t.PidsFile("pids.max"), []byte(strconv.FormatInt(n, 10)), 0))
}

// pidsLimitHits is pids.events' "max": on v1 the forks refused to tasks of this cgroup, on v2
// the forks refused at this cgroup's limit or one below it.
func (t Tree) PidsLimitHits() uint64 {
	n, _ := readKV(t.PidsFile("pids.events"), "max")
	return n
}

// readUint reads a file holding one number ("max" reads as 0).
func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

// readKV reads key's value from a flat-keyed cgroup file (cpu.stat, memory.events).
func readKV(p, key string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no %s", p, key)
}

// readOOMKills reads memory.oom_control's oom_kill counter (v1).
func readOOMKills(path string) uint64 {
	f, err := os.Open(filepath.Join("/sys/fs/cgroup/memory", path, "memory.oom_control"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == "oom_kill" {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}

// FreezeTimeout bounds a freeze: the kernel does not freeze a task stuck in uninterruptible sleep,
// and one that is execing waits there for its other threads to die, which a frozen thread never
// does (seen: runc's init frozen mid-exec, a test hung 15 minutes in the library's unbounded
// wait). After it the cgroup is left freezing; KillAll kills and thaws it all the same.
const FreezeTimeout = 2 * time.Second

// Freeze stops every task of the subtree, waiting (up to FreezeTimeout) until the kernel says
// they are all frozen.
func (t Tree) Freeze() error {
	file, want, done := filepath.Join("/sys/fs/cgroup/freezer", t.Path, "freezer.state"), "FROZEN", func(b []byte) bool { return bytes.HasPrefix(b, []byte("FROZEN")) }
	if Unified() {
		events := filepath.Join(t.Dir(), "cgroup.events")
		file, want = filepath.Join(t.Dir(), "cgroup.freeze"), "1"
		done = func([]byte) bool {
			b, err := os.ReadFile(events)
			return err == nil && bytes.Contains(b, []byte("frozen 1"))
		}
	}
	deadline := time.Now().Add(FreezeTimeout)
	for {
		// Written again each time, as runc does: a v1 freeze that raced a fork stays FREEZING
		// until asked again.
		if err := os.WriteFile(file, []byte(want), 0); err != nil {
			return wrapCgroup("freeze", t.Path, err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return wrapCgroup("freeze", t.Path, err)
		}
		if done(b) {
			return nil
		}
		if time.Now().After(deadline) {
			return wrapCgroup("freeze", t.Path, fmt.Errorf("not frozen after %s: a task is stuck in the kernel (for example mid-exec, waiting for a thread the freeze stopped); left freezing", FreezeTimeout))
		}
		time.Sleep(time.Millisecond)
	}
}

// Thaw lets every task of the cgroup run again (the kernel thaws at once; nothing to wait for).
func (t Tree) Thaw() error {
	file, thawed := filepath.Join("/sys/fs/cgroup/freezer", t.Path, "freezer.state"), "THAWED"
	if Unified() {
		file, thawed = filepath.Join(t.Dir(), "cgroup.freeze"), "0"
	}
	return wrapCgroup("thaw", t.Path, os.WriteFile(file, []byte(thawed), 0))
}

// pids lists every task in the subtree.
func (t Tree) Pids() ([]int, error) {
	if Unified() {
		m, err := cgroup2.Load(t.Path)
		if err != nil {
			return nil, err
		}
		ps, err := m.Procs(true)
		out := make([]int, len(ps))
		for i, p := range ps {
			out[i] = int(p)
		}
		return out, err
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(t.Path))
	if err != nil {
		return nil, err
	}
	ps, err := cg.Processes(cgroup1.Pids, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Pid
	}
	return out, err
}

// KillAll freezes the subtree so that nothing can fork, SIGKILLs every task, thaws it, and
// waits (up to timeout) until it is empty.
func (t Tree) KillAll(timeout time.Duration) error {
	// Nothing left is the common case (the container's init exited, its pid namespace with
	// it): a file read or two, not a freeze, which on v1 costs 10 ms or more. Nothing can enter
	// an empty cgroup but through its cgroup.procs, which only the host's root writes.
	if !t.Exists() || t.Empty() {
		return nil
	}
	// cgroup v2 (Linux 5.14+) kills a whole subtree in one write, forks racing it included.
	if Unified() && os.WriteFile(filepath.Join(t.Dir(), "cgroup.kill"), []byte("1"), 0) == nil {
		return t.waitEmpty(timeout)
	}
	// Frozen, nothing forks between the listing and the kills. A freeze that does not complete
	// (FreezeTimeout) still stopped what it could: kill what is listed and thaw all the same;
	// waitEmpty kills again whatever is left.
	t.Freeze()
	ps, err := t.Pids()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Thaw()
		return wrapCgroup("list tasks of", t.Path, err)
	}
	for _, p := range ps {
		syscall.Kill(p, syscall.SIGKILL)
	}
	t.Thaw()
	t.ThawDescendants()
	return t.waitEmpty(timeout)
}

// empty reports whether no task is left in the subtree (or it is gone): v2's cgroup.events
// says so of the whole subtree; on v1 every cgroup.procs of the freezer hierarchy's subtree is
// read (cheaper than loading the cgroup in every hierarchy).
func (t Tree) Empty() bool {
	if Unified() {
		b, err := os.ReadFile(filepath.Join(t.Dir(), "cgroup.events"))
		return errors.Is(err, fs.ErrNotExist) || err == nil && bytes.Contains(b, []byte("populated 0"))
	}
	empty := true
	err := filepath.WalkDir(filepath.Join("/sys/fs/cgroup/freezer", t.Path), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "cgroup.procs" {
			if b, err := os.ReadFile(p); err != nil || len(bytes.TrimSpace(b)) > 0 {
				empty = false
				return fs.SkipAll
			}
		}
		return nil
	})
	return errors.Is(err, fs.ErrNotExist) || err == nil && empty
}

// thawDescendants thaws every cgroup below t that is frozen of its own (a process
// killed between its Freeze and Thaw leaves one so): a frozen task never dies of SIGKILL, and
// thawing the parent does not thaw a child frozen of its own.
func (t Tree) ThawDescendants() {
	root, file, thawed := filepath.Join("/sys/fs/cgroup/freezer", t.Path), "freezer.state", "THAWED"
	if Unified() {
		root, file, thawed = t.Dir(), "cgroup.freeze", "0"
	}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == file {
			if b, err := os.ReadFile(p); err == nil && !bytes.HasPrefix(b, []byte(thawed)) {
				os.WriteFile(p, []byte(thawed), 0)
			}
		}
		return nil
	})
}

// waitEmpty waits (up to timeout) until no task is left in the subtree, killing again what is.
func (t Tree) waitEmpty(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ps, _ := t.Pids()
		if len(ps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d tasks survived SIGKILL for %s (stuck in the kernel, for example in D state on a GPU driver); run sealrun doctor", t.Path, len(ps), timeout)
		}
		for _, p := range ps {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exists reports whether the cgroup is in any hierarchy.
func (t Tree) Exists() bool {
	for _, m := range Mounts() {
		if _, err := os.Stat(filepath.Join(m, t.Path)); err == nil {
			return true
		}
	}
	return false
}

// Remove deletes the cgroup and everything below it from every hierarchy it exists in
// (v1 controllers, named hierarchies, the unified one), deepest first. It must be empty.
func (t Tree) Remove() error {
	var first error
	for _, mnt := range Mounts() {
		base := filepath.Join(mnt, t.Path)
		// Nothing below it is the common case (the runtime removed its leaf as the container
		// exited): one rmdir, no walk.
		if err := syscall.Rmdir(base); err == nil || errors.Is(err, syscall.ENOENT) {
			continue
		}
		var dirs []string
		filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			var err error
			for i := 0; i < 50; i++ { // EBUSY while the last task is still exiting
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil && !errors.Is(err, syscall.ENOENT) && first == nil {
				first = fmt.Errorf("remove cgroup %s: %w", d, err)
			}
		}
	}
	return first
}

// Mounts lists the mount points of every cgroup and cgroup2 hierarchy.
func Mounts() []string {
	var out []string
	for _, m := range mountinfo.Table() {
		if m.Type == "cgroup" || m.Type == "cgroup2" {
			out = append(out, m.Point)
		}
	}
	return out
}

// RemoveRootIfEmpty removes a host's cgroup root from every hierarchy where no run is left
// under it.
func RemoveRootIfEmpty(root string) {
	for _, mnt := range Mounts() {
		syscall.Rmdir(filepath.Join(mnt, root)) // fails harmlessly while other runs exist
	}
}

// OOMWatch knows whether the OOM killer acted in a container's cgroup on v1, where the memory
// cgroup keeps its OOM kills to itself and the runtime removes the container's cgroup the moment
// its init exits: it listens on the cgroup's OOM eventfd, so an OOM kill just before the exit is
// still known. (On v2 the wrapper cgroup's memory.events counts them, exactly.)
type OOMWatch struct {
	mu  sync.Mutex
	oom bool
}

func (w *OOMWatch) Seen() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.oom
}

// oomEventFD registers an eventfd for the v1 memory cgroup's OOM notifications.
func oomEventFD(path string) (int, error) {
	dir := filepath.Join("/sys/fs/cgroup/memory", path)
	ctl, err := os.Open(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return -1, err
	}
	defer ctl.Close()
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.event_control"), []byte(fmt.Sprintf("%d %d", efd, ctl.Fd())), 0); err != nil {
		unix.Close(efd)
		return -1, err
	}
	return efd, nil
}

// watchOOM follows the v1 memory cgroup t (the runtime's leaf) until it is removed; on v2 it
// returns nil: nothing needs following.
func (t Tree) WatchOOM() *OOMWatch {
	if Unified() {
		return nil
	}
	w := &OOMWatch{}
	fd, err := oomEventFD(t.Path)
	if err != nil {
		return w
	}
	go func() {
		f := os.NewFile(uintptr(fd), "oom-eventfd")
		defer f.Close()
		var buf [8]byte
		// The eventfd also fires when the memory cgroup is removed: a count of 2 (both events
		// unread), or 1 while the memory cgroup still exists, is an OOM. Only the memory
		// hierarchy counts: under gVisor sealrun keeps the leaf in the pids hierarchy until the
		// container is destroyed (Container.pidsCgroup), after gVisor removed the others.
		if n, err := f.Read(buf[:]); err == nil && n == 8 {
			count := uint64(buf[0]) | uint64(buf[1])<<8 | uint64(buf[2])<<16 | uint64(buf[3])<<24
			_, statErr := os.Stat(filepath.Join("/sys/fs/cgroup/memory", t.Path))
			if count >= 2 || statErr == nil || readOOMKills(t.Path) > 0 {
				w.mu.Lock()
				w.oom = true
				w.mu.Unlock()
			}
		}
	}()
	return w
}
