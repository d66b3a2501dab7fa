package sandbox

import (
	"bufio"
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
	"golang.org/x/sys/unix"
)

// CgroupMode names the host's cgroup setup.
func CgroupMode() string {
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

// CgroupStats is what a container or run used.
type CgroupStats struct {
	CPUNanos    uint64 // CPU time
	MemoryPeak  uint64 // bytes
	Pids        uint64 // tasks now
	OOMKills    uint64 // OOM kills
	MemoryLimit uint64
	PidsLimit   uint64
}

// cgroupTree drives one cgroup subtree through containerd/cgroups, on v1/hybrid or v2.
type cgroupTree struct {
	path string // "/sealrun/<run>" or "/sealrun/<run>/<container>"
}

func (t cgroupTree) unified() bool { return cgroups.Mode() == cgroups.Unified }

// Create makes the cgroup (and its parents) with no limits of its own.
func (t cgroupTree) Create() error {
	if t.unified() {
		_, err := cgroup2.NewManager("/sys/fs/cgroup", t.path, &cgroup2.Resources{})
		return wrapCgroup("create", t.path, err)
	}
	var err error
	// Another run's teardown may remove the empty /sealrun parent between our mkdirs: retry.
	for try := 0; try < 3; try++ {
		if _, err = cgroup1.New(cgroup1.StaticPath(t.path), &specs.LinuxResources{}); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return wrapCgroup("create", t.path, err)
}

func wrapCgroup(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cgroup %s %s: %w", op, path, err)
}

// Stats reads CPU time, memory peak, tasks and OOM kills.
func (t cgroupTree) Stats() (CgroupStats, error) {
	if t.unified() {
		m, err := cgroup2.Load(t.path)
		if err != nil {
			return CgroupStats{}, wrapCgroup("load", t.path, err)
		}
		st, err := m.Stat()
		if err != nil {
			return CgroupStats{}, wrapCgroup("stat", t.path, err)
		}
		out := CgroupStats{}
		if st.CPU != nil {
			out.CPUNanos = st.CPU.UsageUsec * 1000
		}
		if st.Memory != nil {
			out.MemoryPeak, out.MemoryLimit = st.Memory.MaxUsage, st.Memory.UsageLimit
		}
		if st.Pids != nil {
			out.Pids, out.PidsLimit = st.Pids.Current, st.Pids.Limit
		}
		if st.MemoryEvents != nil {
			out.OOMKills = st.MemoryEvents.OomKill
		}
		return out, nil
	}
	// v1: the handful of files the stats need, read directly (the library's Stat reads every
	// subsystem's every file, blkio included: milliseconds per sample).
	v1 := func(subsys, file string) (uint64, bool) {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", subsys, t.path, file))
		if err != nil {
			return 0, false
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, true
		}
		n, err := strconv.ParseUint(v, 10, 64)
		return n, err == nil
	}
	out := CgroupStats{}
	var ok bool
	if out.CPUNanos, ok = v1("cpuacct", "cpuacct.usage"); !ok {
		if out.CPUNanos, ok = v1("cpu,cpuacct", "cpuacct.usage"); !ok {
			return CgroupStats{}, wrapCgroup("stat", t.path, fs.ErrNotExist)
		}
	}
	out.MemoryPeak, _ = v1("memory", "memory.max_usage_in_bytes")
	out.MemoryLimit, _ = v1("memory", "memory.limit_in_bytes")
	out.Pids, _ = v1("pids", "pids.current")
	out.PidsLimit, _ = v1("pids", "pids.max")
	out.OOMKills = readOOMKills(t.path)
	return out, nil
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

// Freeze stops every task of the subtree.
func (t cgroupTree) Freeze() error {
	if t.unified() {
		m, err := cgroup2.Load(t.path)
		if err != nil {
			return wrapCgroup("load", t.path, err)
		}
		return wrapCgroup("freeze", t.path, m.Freeze())
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(t.path))
	if err != nil {
		return wrapCgroup("load", t.path, err)
	}
	return wrapCgroup("freeze", t.path, cg.Freeze())
}

func (t cgroupTree) Thaw() error {
	if t.unified() {
		m, err := cgroup2.Load(t.path)
		if err != nil {
			return wrapCgroup("load", t.path, err)
		}
		return wrapCgroup("thaw", t.path, m.Thaw())
	}
	cg, err := cgroup1.Load(cgroup1.StaticPath(t.path))
	if err != nil {
		return wrapCgroup("load", t.path, err)
	}
	return wrapCgroup("thaw", t.path, cg.Thaw())
}

// empty reports whether no task is left in the subtree (or it is gone).
func (t cgroupTree) empty() bool {
	ps, err := t.pids()
	return len(ps) == 0 && (err == nil || errors.Is(err, fs.ErrNotExist))
}

// pids lists every task in the subtree.
func (t cgroupTree) pids() ([]int, error) {
	if t.unified() {
		m, err := cgroup2.Load(t.path)
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
	cg, err := cgroup1.Load(cgroup1.StaticPath(t.path))
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
func (t cgroupTree) KillAll(timeout time.Duration) error {
	if !t.exists() {
		return nil
	}
	frozen := t.Freeze() == nil
	ps, err := t.pids()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if frozen {
			t.Thaw()
		}
		return wrapCgroup("list tasks of", t.path, err)
	}
	for _, p := range ps {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if frozen {
		t.Thaw()
	}
	deadline := time.Now().Add(timeout)
	for {
		ps, _ := t.pids()
		if len(ps) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %d tasks survived SIGKILL for %s (stuck in the kernel, for example in D state on a GPU driver); run sealrun doctor", t.path, len(ps), timeout)
		}
		for _, p := range ps {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exists reports whether the cgroup is in any hierarchy.
func (t cgroupTree) exists() bool {
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m, t.path)); err == nil {
			return true
		}
	}
	return false
}

// Remove deletes the cgroup and everything below it from every hierarchy it exists in
// (v1 controllers, named hierarchies, the unified one), deepest first. It must be empty.
func (t cgroupTree) Remove() error {
	var first error
	for _, mnt := range cgroupMounts() {
		base := filepath.Join(mnt, t.path)
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

// cgroupMounts lists the mount points of every cgroup and cgroup2 hierarchy.
func cgroupMounts() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		_, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fsType := strings.Fields(post)
		f := strings.Fields(line)
		if len(fsType) > 0 && (fsType[0] == "cgroup" || fsType[0] == "cgroup2") && len(f) > 4 {
			out = append(out, f[4])
		}
	}
	return out
}

// removeRootIfEmpty removes /sealrun from every hierarchy where no run is left under it.
func removeRootIfEmpty() {
	for _, mnt := range cgroupMounts() {
		syscall.Rmdir(filepath.Join(mnt, CgroupRoot)) // fails harmlessly while other runs exist
	}
}

// usage follows a container's cgroup while it runs. The runtime removes a container's cgroup
// the moment its init exits, so counters read after the exit are gone: usage samples them
// (every 100 ms, and once more when the container is seen to exit) and keeps the last values
// and the peaks, and on cgroup v1 listens on the memory cgroup's OOM eventfd, so an OOM kill
// just before the exit is still known.
type usage struct {
	mu   sync.Mutex
	last CgroupStats
	oom  bool
}

func (u *usage) get() (CgroupStats, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last, u.oom || u.last.OOMKills > 0
}

func (u *usage) merge(st CgroupStats) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last.CPUNanos = max(u.last.CPUNanos, st.CPUNanos)
	u.last.MemoryPeak = max(u.last.MemoryPeak, st.MemoryPeak)
	u.last.OOMKills = max(u.last.OOMKills, st.OOMKills)
	u.last.Pids = st.Pids
	if st.MemoryLimit > 0 {
		u.last.MemoryLimit = st.MemoryLimit
	}
	if st.PidsLimit > 0 {
		u.last.PidsLimit = st.PidsLimit
	}
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

// watch starts following t until done is closed.
func (t cgroupTree) watch(done <-chan struct{}) *usage {
	u := &usage{}
	if !t.unified() {
		if fd, err := oomEventFD(t.path); err == nil {
			go func() {
				f := os.NewFile(uintptr(fd), "oom-eventfd")
				defer f.Close()
				var buf [8]byte
				// The eventfd also fires when the cgroup is removed: a count of 2 (both
				// events unread), or 1 while the cgroup still exists, is an OOM.
				if n, err := f.Read(buf[:]); err == nil && n == 8 {
					count := uint64(buf[0]) | uint64(buf[1])<<8 | uint64(buf[2])<<16 | uint64(buf[3])<<24
					if st, err := t.Stats(); err == nil {
						u.merge(st) // the peak, read while the cgroup is still there
					}
					if count >= 2 || t.exists() {
						u.mu.Lock()
						u.oom = true
						u.mu.Unlock()
					}
				}
			}()
		}
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if st, err := t.Stats(); err == nil {
					u.merge(st)
				}
			}
		}
	}()
	return u
}
