package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// Role is one of the three container profiles of a run.
type Role string

// The roles (ARCHITECTURE.md, "The containers of a run").
const (
	RoleController Role = "controller" // the agent's shell: no GPU, egress only to the gateway
	RoleRunner     Role = "runner"     // one compute call: GPU, no network, workspace rw
	RoleGrader     Role = "grader"     // a bundle's inference code: GPU, no network, bundle ro
)

// Roles lists the roles in a fixed order.
var Roles = []Role{RoleController, RoleRunner, RoleGrader}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q; use controller, runner or grader", s)
}

// DefaultCgroupRoot is the parent of runs' cgroups where nothing is delegated (see Placement).
const DefaultCgroupRoot = cgroup.DefaultRoot

// runtimeLeaf is the runtime's cgroup below each container's wrapper: <root>/<run>/<container>/ctr.
const runtimeLeaf = "ctr"

// Container paths.
const (
	WorkspacePath = "/workspace"
	BundlePath    = "/bundle"
	RunnerPath    = "/usr/local/bin/runner"
	// AgentUID and AgentGID run every process; GID 1000 maps to the run's shared host GID so that
	// the controller and runner containers (different UID ranges) can share /workspace.
	AgentUID = 1000
	AgentGID = 1000
)

// IDRange is a contiguous block of host IDs that a container's IDs 0..Size-1 map to.
type IDRange struct {
	Base uint32
	Size uint32
}

// Limits are the cgroup and tmpfs limits of one container.
type Limits struct {
	CPUs        float64 // CPU bandwidth in cores (quota/period)
	MemoryBytes int64   // memory limit; swap limit is the same (no swap)
	Pids        int64   // most tasks
	TmpfsBytes  int64   // size of /tmp
	ShmBytes    int64   // size of /dev/shm
	NoFile      uint64  // RLIMIT_NOFILE
	// CPUSet pins the container to these CPUs (cpuset.cpus, Linux list syntax "0-3,8"); "" for
	// any CPU of the host. The daemon gives each run CPUs of its own.
	CPUSet string
	// IOReadBPS and IOWriteBPS cap the bytes a second the container reads from and writes to each
	// of IODevices ("major:minor": the daemon gives a run's workspace device); 0 for no cap.
	IOReadBPS, IOWriteBPS int64
	IODevices             []string
}

// DefaultLimits are small enough for a laptop demo; tracks override CPUs and memory.
func DefaultLimits() Limits {
	return Limits{CPUs: 1, MemoryBytes: 512 << 20, Pids: 256, TmpfsBytes: 64 << 20, ShmBytes: 64 << 20, NoFile: 4096}
}

// WithDefaults fills every zero field from DefaultLimits, field by field: Limits{CPUs: 4} is four
// CPUs with the default memory, pids, tmpfs and file limits — never "unlimited".
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.CPUs == 0 {
		l.CPUs = d.CPUs
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	if l.TmpfsBytes == 0 {
		l.TmpfsBytes = d.TmpfsBytes
	}
	if l.ShmBytes == 0 {
		l.ShmBytes = d.ShmBytes
	}
	if l.NoFile == 0 {
		l.NoFile = d.NoFile
	}
	return l
}

// Bounds of Limits (after defaults). Lower bounds are what a shell and the runtime's init need;
// upper bounds catch unit mistakes (bytes given as KiB, cores as millicores).
const (
	minMemory = 16 << 20
	minPids   = 8
	minTmpfs  = 1 << 20
	maxCPUs   = 4096
	maxPids   = 1 << 22
	maxNoFile = 1 << 20
)

// Validate reports every out-of-range field at once. Zero fields are valid (they take defaults).
func (l Limits) Validate() error {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: limits.%s %s", ErrBadConfig, field, fmt.Sprintf(format, args...)))
	}
	d := l.WithDefaults()
	switch {
	case d.CPUs < 0.01 || d.CPUs != d.CPUs:
		bad("cpus", "is %v; give at least 0.01 cores", l.CPUs)
	case d.CPUs > maxCPUs:
		bad("cpus", "is %v; at most %d cores (is it in millicores?)", l.CPUs, maxCPUs)
	}
	if d.MemoryBytes < minMemory {
		bad("memory_bytes", "is %d; give at least %d (16 MiB)", l.MemoryBytes, minMemory)
	}
	if d.Pids < minPids || d.Pids > maxPids {
		bad("pids", "is %d; give %d to %d", l.Pids, minPids, maxPids)
	}
	if d.TmpfsBytes < minTmpfs {
		bad("tmpfs_bytes", "is %d; give at least %d (1 MiB)", l.TmpfsBytes, minTmpfs)
	}
	if d.ShmBytes < minTmpfs {
		bad("shm_bytes", "is %d; give at least %d (1 MiB)", l.ShmBytes, minTmpfs)
	}
	if d.NoFile < 64 || d.NoFile > maxNoFile {
		bad("nofile", "is %d; give 64 to %d", l.NoFile, maxNoFile)
	}
	if l.IOReadBPS < 0 || l.IOWriteBPS < 0 {
		bad("io", "read %d, write %d bytes a second; give 0 (no cap) or more", l.IOReadBPS, l.IOWriteBPS)
	}
	if (l.IOReadBPS > 0 || l.IOWriteBPS > 0) && len(l.IODevices) == 0 {
		bad("io_devices", "none; an I/O cap needs the devices it applies to (major:minor)")
	}
	for _, d := range l.IODevices {
		if _, _, err := parseDevNum(d); err != nil {
			bad("io_devices", "%q: %v", d, err)
		}
	}
	if l.CPUSet != "" {
		if cpus, err := ParseCPUList(l.CPUSet); err != nil {
			bad("cpuset", "%q: %v", l.CPUSet, err)
		} else if float64(len(cpus)) < d.CPUs {
			bad("cpuset", "%q has %d CPUs, fewer than the %v the CPU limit gives", l.CPUSet, len(cpus), d.CPUs)
		}
	}
	return errors.Join(errs...)
}

// Profile is everything that makes one container's spec.
type Profile struct {
	Role     Role
	Rootfs   string   // the image's unpacked rootfs (mounted read-only)
	Args     []string // the command
	Env      []string // extra environment, KEY=VALUE; never taken from the host
	Cwd      string   // set by sealrun; default /workspace (controller, runner) or / (grader)
	Hostname string

	UIDs      IDRange // the container's range
	SharedGID uint32  // host GID that container GID 1000 maps to (the run's)

	Workspace string // host directory bound rw at /workspace (controller, runner)
	Bundle    string // host directory bound ro at /bundle (grader)
	Runner    string // host path of the static runner client bound ro into the controller
	Extra     []specs.Mount

	Limits      Limits
	CgroupsPath string // "<root>/<run>/<container>/ctr" (see Placement)
	Devices     []specs.LinuxDevice
}

// baseEnv is the whole environment a container starts with, plus Profile.Env: nothing comes
// from the host, so no LD_*, proxies or credentials leak in.
var baseEnv = []string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/workspace", "LANG=C.UTF-8", "TERM=dumb"}

// maskedPaths and readonlyPaths are runc's and moby's defaults.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/sched_debug", "/proc/scsi", "/proc/timer_list", "/proc/timer_stats", "/sys/devices/virtual/powercap", "/sys/firmware",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// standardDevices are the device nodes every container gets (runc creates them; the device
// cgroup allows exactly these plus GPU nodes for runner and grader).
var standardDevices = []struct {
	path         string
	major, minor int64
}{{"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7}, {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0}, {"/dev/ptmx", 5, 2}}

// Spec builds the OCI runtime spec of a profile. It is pure: the same profile gives the same spec.
// It is long because it is the spec as one literal, field by field, so that a reader sees the whole
// of a container's confinement in one place.
func Spec(p Profile) (*specs.Spec, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	l := p.Limits.WithDefaults()
	cwd := p.Cwd
	if cwd == "" {
		cwd = WorkspacePath
		if p.Role == RoleGrader {
			cwd = "/"
		}
	}
	hostname := p.Hostname
	if hostname == "" {
		hostname = string(p.Role)
	}
	env := append(append([]string(nil), baseEnv...), p.Env...)
	if p.Role == RoleGrader {
		env[1] = "HOME=/tmp"
	}
	env = lastWins(env)
	noNewPrivs := true
	umask := uint32(0o002)
	s := &specs.Spec{
		Version:  specs.Version,
		Hostname: hostname,
		Root:     &specs.Root{Path: p.Rootfs, Readonly: true},
		Process: &specs.Process{
			Args:            append([]string(nil), p.Args...),
			Env:             env,
			Cwd:             cwd,
			User:            specs.User{UID: AgentUID, GID: AgentGID, Umask: &umask},
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Inheritable: []string{}, Permitted: []string{}, Ambient: []string{}},
			NoNewPrivileges: noNewPrivs,
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
				{Type: "RLIMIT_NOFILE", Hard: l.NoFile, Soft: l.NoFile},
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", fmt.Sprintf("size=%d", l.ShmBytes)}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", l.TmpfsBytes)}},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace}, {Type: specs.CgroupNamespace}, {Type: specs.UserNamespace},
			},
			CgroupsPath:   p.CgroupsPath,
			Resources:     resources(l, p.Devices),
			MaskedPaths:   append([]string(nil), maskedPaths...),
			ReadonlyPaths: append([]string(nil), readonlyPaths...),
			Seccomp:       Seccomp(),
		},
	}
	s.Linux.UIDMappings, s.Linux.GIDMappings = idMappings(p.UIDs, p.SharedGID)
	if err := p.addMounts(s); err != nil {
		return nil, err
	}
	return s, nil
}

// check refuses a profile its role may not have (a workspace for the grader, devices for the
// controller, LD_* variables, limits out of range, ...).
func (p Profile) check() error {
	if _, err := ParseRole(string(p.Role)); err != nil {
		return err
	}
	switch {
	case p.Rootfs == "" || !filepath.IsAbs(p.Rootfs):
		return fmt.Errorf("%s spec: rootfs %q must be an absolute path (the image's rootfs in the store)", p.Role, p.Rootfs)
	case len(p.Args) == 0:
		return fmt.Errorf("%s spec: no command", p.Role)
	case p.UIDs.Size < 65536 || p.UIDs.Base == 0:
		return fmt.Errorf("%s spec: UID range %+v; container root must map to an unprivileged range of 65536 IDs", p.Role, p.UIDs)
	case p.SharedGID == 0:
		return fmt.Errorf("%s spec: no shared run GID", p.Role)
	case p.Role == RoleGrader && p.Workspace != "":
		return fmt.Errorf("grader spec: the grader never sees the workspace")
	case p.Role != RoleGrader && p.Bundle != "":
		return fmt.Errorf("%s spec: only the grader mounts a bundle", p.Role)
	case p.Role != RoleController && p.Runner != "":
		return fmt.Errorf("%s spec: only the controller gets the runner client", p.Role)
	case p.Role == RoleController && len(p.Devices) > 0:
		return fmt.Errorf("controller spec: the controller never gets devices (no GPU)")
	}
	for _, e := range p.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.HasPrefix(k, "LD_") {
			return fmt.Errorf("%s spec: environment entry %q refused (KEY=VALUE, and no LD_* variables)", p.Role, e)
		}
	}
	if err := p.Limits.Validate(); err != nil {
		return fmt.Errorf("%s spec: %w", p.Role, err)
	}
	return nil
}

// addMounts adds the role's own mounts (the workspace and runner client, or the bundle), the
// extra mounts and a bind mount of each device's node.
func (p Profile) addMounts(s *specs.Spec) error {
	bind := func(src, dst string, ro bool) specs.Mount {
		opts := []string{"rbind", "nosuid", "nodev"}
		if ro {
			opts = append(opts, "ro")
		}
		return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: opts}
	}
	switch p.Role {
	case RoleController, RoleRunner:
		if p.Workspace == "" {
			return fmt.Errorf("%s spec: no workspace directory", p.Role)
		}
		s.Mounts = append(s.Mounts, bind(p.Workspace, WorkspacePath, false))
		if p.Runner != "" {
			s.Mounts = append(s.Mounts, bind(p.Runner, RunnerPath, true))
		}
	case RoleGrader:
		if p.Bundle == "" {
			return fmt.Errorf("grader spec: no bundle directory")
		}
		s.Mounts = append(s.Mounts, bind(p.Bundle, BundlePath, true))
	}
	s.Mounts = append(s.Mounts, p.Extra...)
	// Devices: in the user namespace no node can be made, so each is a bind mount of the host's
	// node (from where Extra says, else the same path), and the device cgroup allows exactly them.
	for _, d := range p.Devices {
		if !slices.ContainsFunc(p.Extra, func(m specs.Mount) bool { return m.Destination == d.Path }) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: d.Path, Type: "bind", Source: d.Path, Options: []string{"bind", "nosuid"}})
		}
	}
	return nil
}

// lastWins keeps one entry per variable, the last given, where the first stood: a variable an
// image sets (its PATH, say) replaces the base one; one sealrun sets after it replaces the image's.
func lastWins(env []string) []string {
	last := map[string]string{}
	var order []string
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		last[k] = e
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, last[k])
	}
	return out
}

// idMappings maps container IDs 0..size-1 to the container's host range, except GID 1000 (the
// agent's group), which maps to the run's shared GID so that every container of the run can
// share /workspace.
func idMappings(uids IDRange, sharedGID uint32) (u, g []specs.LinuxIDMapping) {
	u = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uids.Base, Size: uids.Size}}
	g = []specs.LinuxIDMapping{
		{ContainerID: 0, HostID: uids.Base, Size: AgentGID},
		{ContainerID: AgentGID, HostID: sharedGID, Size: 1},
		{ContainerID: AgentGID + 1, HostID: uids.Base + AgentGID + 1, Size: uids.Size - AgentGID - 1},
	}
	return u, g
}

// runscGIDMappings are the group mappings of a container gVisor runs. gVisor's gofer (and its
// sandbox, which opens files itself) does every file operation on the host as the container's
// root, with group 0 and no supplementary groups: the run's shared group reaches /workspace only
// if it is the container's group 0. So under runsc group 0 maps to the shared group, the agent's
// processes run with group 0 (the files they create are the shared group's, as under runc), and
// group 1000 takes group 0's place in the container's own range. Group 0 gives a process nothing
// beyond group permissions, and inside gVisor those are checked by gVisor's kernel.
func runscGIDMappings(uids IDRange, sharedGID uint32) []specs.LinuxIDMapping {
	return []specs.LinuxIDMapping{
		{ContainerID: 0, HostID: sharedGID, Size: 1},
		{ContainerID: 1, HostID: uids.Base + 1, Size: AgentGID - 1},
		{ContainerID: AgentGID, HostID: uids.Base, Size: 1},
		{ContainerID: AgentGID + 1, HostID: uids.Base + AgentGID + 1, Size: uids.Size - AgentGID - 1},
	}
}

// resources: cpu, memory (+swap = memory), pids, and a device cgroup that denies everything but
// the standard nodes and the given devices.
func resources(l Limits, devices []specs.LinuxDevice) *specs.LinuxResources {
	period := uint64(100000)
	quota := int64(l.CPUs * float64(period))
	mem, swap := l.MemoryBytes, l.MemoryBytes
	swappiness := uint64(0)
	noOOMKill := false
	pids := l.Pids
	r := &specs.LinuxResources{
		CPU:    &specs.LinuxCPU{Period: &period, Quota: &quota, Cpus: l.CPUSet},
		Memory: &specs.LinuxMemory{Limit: &mem, Swap: &swap, Swappiness: &swappiness, DisableOOMKiller: &noOOMKill},
		Pids:   &specs.LinuxPids{Limit: &pids},
		Devices: []specs.LinuxDeviceCgroup{
			{Allow: false, Access: "rwm"},
		},
	}
	if l.IOReadBPS > 0 || l.IOWriteBPS > 0 {
		r.BlockIO = &specs.LinuxBlockIO{}
		for _, dev := range l.IODevices {
			major, minor, _ := parseDevNum(dev)
			dd := specs.LinuxBlockIODevice{Major: major, Minor: minor}
			if l.IOReadBPS > 0 {
				r.BlockIO.ThrottleReadBpsDevice = append(r.BlockIO.ThrottleReadBpsDevice, specs.LinuxThrottleDevice{LinuxBlockIODevice: dd, Rate: uint64(l.IOReadBPS)})
			}
			if l.IOWriteBPS > 0 {
				r.BlockIO.ThrottleWriteBpsDevice = append(r.BlockIO.ThrottleWriteBpsDevice, specs.LinuxThrottleDevice{LinuxBlockIODevice: dd, Rate: uint64(l.IOWriteBPS)})
			}
		}
	}
	for _, d := range standardDevices {
		major, minor := d.major, d.minor
		r.Devices = append(r.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
	}
	pts := int64(136)
	r.Devices = append(r.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &pts, Access: "rwm"})
	sorted := append([]specs.LinuxDevice(nil), devices...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, d := range sorted {
		major, minor := d.Major, d.Minor
		r.Devices = append(r.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &major, Minor: &minor, Access: "rw"})
	}
	return r
}

// ExampleProfile is the profile `sealrun sandbox spec` prints: placeholder host paths, the first
// UID range, default limits.
func ExampleProfile(role Role, rootfs string) Profile {
	p := Profile{Role: role, Rootfs: rootfs, Args: []string{"/bin/sh"}, UIDs: IDRange{Base: RangeBase + RangeSize, Size: RangeSize}, SharedGID: RangeBase,
		CgroupsPath: DefaultCgroupRoot + "/<run>/<container>/" + runtimeLeaf}
	switch role {
	case RoleController:
		p.Workspace, p.Runner = "/var/lib/sealrun/runs/<run>/workspace", "/usr/local/bin/runner"
	case RoleRunner:
		p.Workspace = "/var/lib/sealrun/runs/<run>/workspace"
		p.Args = []string{"python3", "train.py"}
	case RoleGrader:
		p.Bundle = "/var/lib/sealrun/runs/<run>/candidates/<id>"
		p.Args = []string{"/bundle/entrypoint"}
	}
	return p
}

// ParseCPUList parses a Linux CPU list ("0-3,8,10-11") into sorted, distinct CPU numbers.
func ParseCPUList(s string) ([]int, error) {
	seen := map[int]bool{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= maxCPUs {
			return nil, fmt.Errorf("%q is not a CPU or a range of CPUs (Linux list syntax: 0-3,8)", part)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// FormatCPUList writes sorted CPU numbers in Linux list syntax ("0-3,8").
func FormatCPUList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// parseDevNum parses a device number "major:minor".
func parseDevNum(s string) (major, minor int64, err error) {
	a, b, ok := strings.Cut(s, ":")
	if ok {
		major, err = strconv.ParseInt(a, 10, 32)
		if err == nil {
			minor, err = strconv.ParseInt(b, 10, 32)
		}
	}
	if !ok || err != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("not a device number major:minor (like 7:3)")
	}
	return major, minor, nil
}

// IOLimitText is a container's I/O caps in the vocabulary the probe reads them back in:
// "7:3 rbps=1048576 wbps=2097152", one per device, sorted ("" without caps).
func IOLimitText(l Limits) string {
	if l.IOReadBPS <= 0 && l.IOWriteBPS <= 0 {
		return ""
	}
	var parts []string
	for _, d := range l.IODevices {
		p := d
		if l.IOReadBPS > 0 {
			p += fmt.Sprintf(" rbps=%d", l.IOReadBPS)
		}
		if l.IOWriteBPS > 0 {
			p += fmt.Sprintf(" wbps=%d", l.IOWriteBPS)
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
