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
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// CgroupRoot is the parent of every cgroup sealrun makes: /sealrun/<run>/<container>.
const CgroupRoot = "/sealrun"

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
	_, err := cgroup1.New(cgroup1.StaticPath(t.path), &specs.LinuxResources{})
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
	cg, err := cgroup1.Load(cgroup1.StaticPath(t.path))
	if err != nil {
		return CgroupStats{}, wrapCgroup("load", t.path, err)
	}
	st, err := cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil {
		return CgroupStats{}, wrapCgroup("stat", t.path, err)
	}
	out := CgroupStats{}
	if st.CPU != nil && st.CPU.Usage != nil {
		out.CPUNanos = st.CPU.Usage.Total
	}
	if st.Memory != nil && st.Memory.Usage != nil {
		out.MemoryPeak, out.MemoryLimit = st.Memory.Usage.Max, st.Memory.Usage.Limit
	}
	if st.Pids != nil {
		out.Pids, out.PidsLimit = st.Pids.Current, st.Pids.Limit
	}
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

func (t cgroupTree) thaw() {
	if t.unified() {
		if m, err := cgroup2.Load(t.path); err == nil {
			m.Thaw()
		}
		return
	}
	if cg, err := cgroup1.Load(cgroup1.StaticPath(t.path)); err == nil {
		cg.Thaw()
	}
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
			t.thaw()
		}
		return wrapCgroup("list tasks of", t.path, err)
	}
	for _, p := range ps {
		syscall.Kill(p, syscall.SIGKILL)
	}
	if frozen {
		t.thaw()
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
