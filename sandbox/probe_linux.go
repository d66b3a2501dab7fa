package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/sandbox/cgroup"
	"github.com/sealrun/sealrun/sandbox/posture"
)

// ProbeConfig is one probe: a container of Role from Rootfs running the static runner client's
// `posture` verb.
type ProbeConfig struct {
	Role    Role
	Rootfs  string
	Runner  string // host path of the static runner binary
	Limits  Limits
	Devices []specs.LinuxDevice
	// What the GPUs' CDI specs add besides their nodes (ResolveGPUs): the nodes' host paths
	// where they differ, the driver's files, its environment and links.
	Extra    []specs.Mount
	Env      []string
	Symlinks map[string]string
}

// EgressAttempt is one connection attempted from inside.
type EgressAttempt struct {
	Target    string `json:"target"`
	Allowed   bool   `json:"allowed"` // the role may reach it (the controller, its gateway)
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}

// ProbeResult is a container's posture from inside and from the host (sealrun sandbox probe --json).
type ProbeResult struct {
	Role           Role     `json:"role"`
	Container      string   `json:"container"`
	Namespaces     []string `json:"namespaces"` // types the container has its own of
	UIDMap         string   `json:"uid_map"`
	GIDMap         string   `json:"gid_map"`
	CapEff         string   `json:"cap_eff"`
	Seccomp        int      `json:"seccomp"`
	NoNewPrivs     bool     `json:"no_new_privs"`
	ReadonlyRootfs bool     `json:"readonly_rootfs"`
	RootfsShifted  bool     `json:"rootfs_shifted"` // idmapped: image files keep their owners
	RootfsOwner    int      `json:"rootfs_owner"`   // uid owning / inside (0 when shifted)
	Links          []string `json:"links"`
	Routes         []string `json:"routes"`
	Addresses      []string `json:"addresses"`
	// Limits are the container's cgroup limits read on the host, LimitsInside the same read from
	// inside (memory, swap beyond memory, pids, cpu as "quota period", cpuset).
	Limits       map[string]string `json:"limits"`
	LimitsInside map[string]string `json:"limits_inside"`
	// Devices are the device rules that hold for the container: devices.list (v1), or the rules
	// of sealrun's eBPF filter read back from the kernel (v2).
	Devices       []string          `json:"devices"`
	MaskedPathsOK bool              `json:"masked_paths_ok"`
	Masked        map[string]string `json:"masked"`
	EgressBlocked bool              `json:"egress_blocked"`
	Egress        []EgressAttempt   `json:"egress"`
	FDs           []string          `json:"fds"`
	EnvKeys       []string          `json:"env_keys"`
	// Nested, Sockets and Syscalls are tried from inside: creating user, network and mount
	// namespaces; opening each socket family; kernel surfaces the seccomp filter refuses.
	Nested   map[string]string `json:"nested"`
	Sockets  map[string]string `json:"sockets"`
	Syscalls map[string]string `json:"syscalls"`
	// Runtime is the kind of OCI runtime that ran the container. Under gVisor (runsc) the
	// container's processes run on gVisor's kernel, and the process the host sees as the
	// container's is its sandbox (Sentry): what is read from inside is gVisor's view, and Sentry
	// is that process as the host sees it.
	Runtime  string      `json:"runtime"`
	Sentry   *SentryView `json:"sentry,omitempty"`
	Problems []string    `json:"problems"`
	OK       bool        `json:"ok"`
}

// SentryView is gVisor's sandbox process read from the host: the wall that holds when code inside
// reaches past gVisor's kernel.
type SentryView struct {
	UIDMap     string `json:"uid_map"`
	Uid        string `json:"uid"` // real, effective, saved, filesystem as seen from the host
	CapEff     string `json:"cap_eff"`
	Seccomp    int    `json:"seccomp"`
	NoNewPrivs bool   `json:"no_new_privs"`
}

// readSentry reads pid's mappings, ids and confinement from the host.
func readSentry(pid int) *SentryView {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	b, _ := os.ReadFile(filepath.Join(dir, "uid_map"))
	v := &SentryView{UIDMap: strings.Join(strings.Fields(string(b)), " "), Seccomp: -1}
	b, _ = os.ReadFile(filepath.Join(dir, "status"))
	status := posture.StatusFields(string(b))
	v.Uid, v.CapEff, v.NoNewPrivs = status["Uid"], status["CapEff"], status["NoNewPrivs"] == "1"
	if n, err := strconv.Atoi(status["Seccomp"]); err == nil {
		v.Seccomp = n
	}
	return v
}

// lineSignal is a writer that closes got when it has seen a newline.
type lineSignal struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	got  chan struct{}
	once sync.Once
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() < 1<<20 {
		l.buf.Write(p)
	}
	if bytes.IndexByte(p, '\n') >= 0 {
		l.once.Do(func() { close(l.got) })
	}
	return len(p), nil
}

// Probe starts a container of the role, lets it examine itself and try to reach the host (its
// loopback and 0.0.0.0 listeners, through every address the host has) and the run's gateway,
// reads from the host what only the host can see, tears everything down, and judges.
func (h *Host) Probe(ctx context.Context, cfg ProbeConfig) (*ProbeResult, error) {
	var rb [4]byte
	rand.Read(rb[:])
	run, err := h.NewRun(ctx, "probe-"+hex.EncodeToString(rb[:]))
	if err != nil {
		return nil, err
	}
	defer run.Destroy(context.Background())

	attempts, stop, err := listenProbeTargets(ctx, run, cfg.Role)
	if err != nil {
		return nil, err
	}
	defer stop()
	targets := make([]string, len(attempts))
	for i, a := range attempts {
		targets[i] = a.Target
	}

	scratch, err := os.MkdirTemp("", Prefix+"probe-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	os.Chmod(scratch, 0o711)
	cc, err := probeConfig(cfg, run, scratch, targets)
	if err != nil {
		return nil, err
	}
	out := &lineSignal{got: make(chan struct{})}
	var stderr limitedBuffer
	stderr.max = 8 << 10
	cc.Stdout, cc.Stderr = out, &stderr
	c, err := run.Start(ctx, cc)
	if err != nil {
		return nil, err
	}
	defer c.Destroy(context.Background())
	res := &ProbeResult{Role: cfg.Role, Container: c.ID, Runtime: c.rt.Kind, RootfsShifted: c.ShiftedRootfs, Links: c.Evidence.Links, Routes: c.Evidence.Routes, Addresses: c.Evidence.Addresses}
	select {
	case <-out.got:
	case <-c.Done():
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("probe %s: no posture from inside after 30s (stderr: %s)", c.ID, stderr.String())
	}
	if pid := c.Pid(); pid > 0 {
		res.Namespaces = ownNamespaces(pid)
		res.FDs = fdList(pid)
		if c.rt.Kind == KindRunsc {
			res.Sentry = readSentry(pid)
		}
		res.Limits, res.Devices = cgroupLimits(c.leaf.Path)
		if c.rt.Kind == KindRunsc { // sealrun's own pids limit, on the container's cgroup
			b, err := os.ReadFile(c.pidsCgroup().PidsFile("pids.max"))
			res.Limits["pids"] = strings.TrimSpace(string(b))
			if err != nil {
				res.Limits["pids"] = "absent"
			}
		}
		syscall.Kill(pid, syscall.SIGUSR1) // release the posture process: the host side is read
	}
	code, werr := c.Wait(ctx)
	if werr != nil || code != 0 {
		return nil, fmt.Errorf("probe %s: posture exited %d (%v): %s", c.ID, code, werr, stderr.String())
	}
	var in posture.Record
	line, _, _ := bytes.Cut(out.buf.Bytes(), []byte("\n"))
	if err := json.Unmarshal(line, &in); err != nil {
		return nil, fmt.Errorf("probe %s: posture output is not JSON: %v: %q", c.ID, err, line)
	}
	res.fromInside(in, attempts)
	res.judge(cfg)
	return res, nil
}

// listenProbeTargets listens where a probed container must not connect (every host address, and
// loopback) and on the run's gateway, which only the controller may reach; stop closes them.
func listenProbeTargets(ctx context.Context, run *Run, role Role) (attempts []EgressAttempt, stop func(), err error) {
	var listeners []net.Listener
	stop = func() {
		for _, l := range listeners {
			l.Close()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	serve := func(l net.Listener) {
		listeners = append(listeners, l)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	any, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, nil, err
	}
	serve(any)
	loop, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	serve(loop)
	gw, err := ListenGateway(ctx, run.GatewayNetns(), 0)
	if err != nil {
		return nil, nil, err
	}
	serve(gw)
	anyPort := strconv.Itoa(any.Addr().(*net.TCPAddr).Port)
	attempts = append(attempts, EgressAttempt{Target: loop.Addr().String()})
	if addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4); err == nil {
		for _, a := range addrs {
			attempts = append(attempts, EgressAttempt{Target: net.JoinHostPort(a.IP.String(), anyPort)})
		}
	}
	attempts = append(attempts, EgressAttempt{Target: gw.Addr().String(), Allowed: role == RoleController})
	return attempts, stop, nil
}

// probeConfig is the probed container: the role's mounts (a scratch workspace or bundle), with the
// posture client run from where the role can reach it, trying each target.
func probeConfig(cfg ProbeConfig, run *Run, scratch string, targets []string) (ContainerConfig, error) {
	cc := ContainerConfig{Role: cfg.Role, Rootfs: cfg.Rootfs, Limits: cfg.Limits, Devices: cfg.Devices, Extra: cfg.Extra, Env: cfg.Env, Symlinks: cfg.Symlinks}
	probe := RunnerPath
	switch cfg.Role {
	case RoleController:
		cc.Runner = cfg.Runner
	default:
		probe = "/tmp/.sealrun-probe"
		cc.Extra = append(slices.Clone(cfg.Extra), specs.Mount{Destination: probe, Type: "bind", Source: cfg.Runner, Options: []string{"rbind", "ro", "nosuid", "nodev"}})
	}
	if cfg.Role == RoleGrader {
		cc.Bundle = filepath.Join(scratch, "bundle")
		os.Mkdir(cc.Bundle, 0o755)
	} else {
		cc.Workspace = filepath.Join(scratch, "workspace")
		if err := run.PrepareWorkspace(cc.Workspace, 0); err != nil {
			return cc, err
		}
	}
	cc.Args = []string{probe, "posture", "--egress", strings.Join(targets, ","), "--wait"}
	return cc, nil
}

// fromInside takes what the posture client saw inside, and each egress attempt's outcome.
func (res *ProbeResult) fromInside(in posture.Record, attempts []EgressAttempt) {
	res.UIDMap, res.GIDMap, res.CapEff, res.Seccomp, res.NoNewPrivs = in.UIDMap, in.GIDMap, in.CapEff, in.Seccomp, in.NoNewPrivs
	res.ReadonlyRootfs, res.MaskedPathsOK, res.Masked, res.EnvKeys = in.ReadonlyRootfs, in.MaskedPathsOK, in.Masked, in.EnvKeys
	res.RootfsOwner = in.RootfsOwner
	res.Nested, res.Sockets, res.Syscalls, res.LimitsInside = in.Nested, in.Sockets, in.Syscalls, in.Limits
	for i := range attempts {
		for _, e := range in.Egress {
			if e.Target == attempts[i].Target {
				attempts[i].Connected, attempts[i].Error = e.Connected, e.Error
			}
		}
	}
	res.Egress = attempts
	if res.Runtime == KindRunsc {
		res.FDs = in.FDs // the host sees gVisor's sandbox process, whose descriptors are its own
	}
}

// judge records every property that is not as the role requires. It is long because it is one rule
// per field of the probe's record, in the record's order.
func (r *ProbeResult) judge(cfg ProbeConfig) {
	bad := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	want := []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"}
	uidMap := r.UIDMap
	if r.Runtime == KindRunsc {
		// gVisor's sandbox process keeps the host's cgroup namespace (what runs inside sees
		// gVisor's own cgroupfs), and inside, gVisor's kernel shows its root user namespace
		// ("0 0 4294967295"): the mapping that holds on the host is the sandbox process's.
		want = []string{"ipc", "mnt", "net", "pid", "user", "uts"}
		uidMap = ""
		if r.Sentry != nil {
			uidMap = r.Sentry.UIDMap
		}
		r.judgeSentry(bad)
	}
	if strings.Join(r.Namespaces, ",") != strings.Join(want, ",") {
		bad("namespaces %v; expected its own %v", r.Namespaces, want)
	}
	if f := strings.Fields(uidMap); len(f) < 3 || f[0] != "0" || f[1] == "0" {
		bad("uid_map %q maps container root to host root", uidMap)
	} else if base, _ := strconv.Atoi(f[1]); base < RangeBase {
		bad("uid_map %q maps root below sealrun's unprivileged ranges", uidMap)
	}
	if r.CapEff != "0000000000000000" {
		bad("effective capabilities %s; expected none", r.CapEff)
	}
	if r.Seccomp != 2 {
		bad("seccomp mode %d; expected 2 (filter)", r.Seccomp)
	}
	if !r.NoNewPrivs {
		bad("no_new_privs is off")
	}
	if !r.ReadonlyRootfs {
		bad("the rootfs is writable")
	}
	if !r.RootfsShifted {
		bad("the rootfs is not an idmapped mount: image files do not keep their owners inside (the kernel or filesystem cannot idmap mounts; see sealrun doctor)")
	} else if r.RootfsOwner != 0 {
		bad("/ is owned by uid %d inside; an idmapped rootfs shows the image's root as 0", r.RootfsOwner)
	}
	if !r.MaskedPathsOK {
		bad("a masked /proc or /sys path is readable: %v", r.Masked)
	}
	names := linkNames(r.Links)
	if err := checkAirGap(r.Role, NetnsEvidence{Links: r.Links, Addresses: r.Addresses, Routes: r.Routes, Names: names}); err != nil {
		bad("%v", err)
	}
	r.EgressBlocked = true
	for _, e := range r.Egress {
		switch {
		case e.Connected && !e.Allowed:
			r.EgressBlocked = false
			bad("reached %s from inside", e.Target)
		case e.Allowed && !e.Connected:
			bad("could not reach its gateway %s: %s", e.Target, e.Error)
		}
	}
	r.judgeKernel()
	wantLimits := expectedLimits(cfg.Limits)
	if r.Runtime == KindRunsc {
		wantLimits["pids"] = strconv.FormatInt(runscHostTasks(cfg.Limits.WithDefaults().Pids), 10)
	}
	for _, side := range []struct {
		name string
		got  map[string]string
	}{{"on the host", r.Limits}, {"inside", r.LimitsInside}} {
		if side.name == "inside" && r.Runtime == KindRunsc {
			continue // gVisor's own cgroupfs: the host's limits hold on its sandbox
		}
		for _, k := range sortedKeys(wantLimits) {
			if got := side.got[k]; got != wantLimits[k] {
				bad("%s limit is %q %s; expected %q", k, got, side.name, wantLimits[k])
			}
		}
	}
	wantDev := map[string]bool{}
	if rules, err := cgroup.AllowRules(resources(cfg.Limits.WithDefaults(), cfg.Devices).Devices); err == nil {
		for _, d := range rules {
			wantDev[d.String()] = true
		}
	}
	gotDev := map[string]bool{}
	for _, d := range r.Devices {
		gotDev[d] = true
		if !wantDev[d] {
			bad("the device cgroup allows %s; expected only the standard nodes and the role's GPUs", d)
		}
	}
	for d := range wantDev {
		if !gotDev[d] {
			bad("the device cgroup lacks %s", d)
		}
	}
	for _, fd := range r.FDs {
		n, target, _ := strings.Cut(fd, " -> ")
		switch {
		case (n == "0" || n == "1" || n == "2") && strings.HasPrefix(target, "pipe:"):
		case strings.HasPrefix(target, "anon_inode:"), strings.HasPrefix(target, "socket:"):
		case strings.HasPrefix(target, "/sys/fs/cgroup/"): // the Go runtime's own view of its CPU quota
		case r.Runtime == KindRunsc && (n == "0" || n == "1" || n == "2") && strings.HasPrefix(target, "host:["):
			// inside gVisor the list is read by the posture itself, whose stdio pipes gVisor
			// names as the host descriptors the runtime gave it
		default:
			bad("unexpected file descriptor %s in the container's init", fd)
		}
	}
	for _, k := range r.EnvKeys {
		if strings.HasPrefix(k, "LD_") || strings.Contains(strings.ToLower(k), "proxy") {
			bad("environment variable %s reached the container", k)
		}
	}
	r.OK = len(r.Problems) == 0
}

// judgeSentry: gVisor's sandbox process, seen from the host, runs as no host root, in the
// container's mapped range (judge's uid_map rule) and under its own seccomp filter. Its
// capabilities are recorded, not judged: what it keeps holds only in its own user namespace.
func (r *ProbeResult) judgeSentry(bad func(string, ...any)) {
	s := r.Sentry
	switch {
	case s == nil:
		bad("gVisor's sandbox process could not be read from the host")
		return
	case s.Seccomp != 2:
		bad("gVisor's sandbox process has seccomp mode %d on the host; expected 2 (filter)", s.Seccomp)
	}
	if f := strings.Fields(s.Uid); len(f) == 0 || slices.Contains(f, "0") {
		bad("gVisor's sandbox process has uids %q on the host; expected no root", s.Uid)
	}
}

func linkNames(links []string) []string { return airgap.LinkNames(links) }

// AllowedSockets are the socket families (as runner posture names them) a container may open.
var AllowedSockets = []string{"AF_INET", "AF_INET6", "AF_NETLINK/NETLINK_ROUTE", "AF_UNIX", "socketpair(AF_UNIX)"}

// judgeKernel: no nested namespace of any kind, no socket family but the allowed ones, no gated
// syscall reaching the kernel. A posture that did not try (an old runner client) is a problem
// too: the probe requires the evidence.
func (r *ProbeResult) judgeKernel() {
	bad := func(format string, args ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, args...)) }
	if len(r.Nested) == 0 || len(r.Sockets) == 0 {
		bad("the posture did not try nested namespaces and socket families (runner client too old?)")
	}
	for _, k := range sortedKeys(r.Nested) {
		if k == "clone3" && r.Runtime == KindRunsc {
			continue // allowed under gVisor, to its kernel (Runtime.adjustSpec)
		}
		if !strings.HasPrefix(r.Nested[k], "refused") {
			bad("nested namespace: %s was %s; expected refused", k, r.Nested[k])
		}
	}
	for _, want := range AllowedSockets {
		if r.Sockets[want] != "allowed" && len(r.Sockets) > 0 {
			bad("socket %s is %q; expected allowed", want, r.Sockets[want])
		}
	}
	for _, k := range sortedKeys(r.Sockets) {
		if r.Sockets[k] == "allowed" && !slices.Contains(AllowedSockets, k) {
			bad("socket %s is allowed; expected refused", k)
		}
	}
	for _, k := range sortedKeys(r.Syscalls) {
		if !strings.HasPrefix(r.Syscalls[k], "refused") {
			bad("syscall %s: %s; expected refused by seccomp", k, r.Syscalls[k])
		}
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ownNamespaces lists the namespace types in which pid differs from this process.
func ownNamespaces(pid int) []string {
	var out []string
	for _, t := range []string{"cgroup", "ipc", "mnt", "net", "pid", "user", "uts"} {
		mine, _ := os.Readlink("/proc/self/ns/" + t)
		theirs, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "ns", t))
		if err == nil && theirs != mine {
			out = append(out, t)
		}
	}
	return out
}

func fdList(pid int) []string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		t, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+" -> "+t)
	}
	return out
}

// expectedLimits is what a container with limits l must read in its cgroup, in the vocabulary of
// runner posture's limits: no swap, the CPU quota over a 100 ms period.
func expectedLimits(l Limits) map[string]string {
	l = l.WithDefaults()
	want := map[string]string{
		"memory": strconv.FormatInt(l.MemoryBytes, 10),
		"swap":   "0",
		"pids":   strconv.FormatInt(l.Pids, 10),
		"cpu":    fmt.Sprintf("%d 100000", int64(l.CPUs*100000)),
	}
	if cpus, err := ParseCPUList(l.CPUSet); err == nil && l.CPUSet != "" {
		want["cpuset"] = FormatCPUList(cpus)
	}
	if io := IOLimitText(l); io != "" {
		want["io"] = io
	}
	return want
}

// cgroupLimits reads a container's limits and device rules on the host, from the runtime's
// cgroup (path).
func cgroupLimits(path string) (limits map[string]string, devices []string) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "absent"
		}
		return strings.TrimSpace(string(b))
	}
	limits = map[string]string{}
	if cgroups.Mode() == cgroups.Unified {
		base := filepath.Join(cgroup.Mountpoint, path)
		limits["memory"], limits["swap"], limits["pids"], limits["cpu"] = read(base+"/memory.max"), read(base+"/memory.swap.max"), read(base+"/pids.max"), read(base+"/cpu.max")
		limits["cpuset"] = read(base + "/cpuset.cpus.effective")
		limits["io"] = normalizeIOMax(read(base + "/io.max"))
		rules, _, err := cgroup.EffectiveDeviceRules(base)
		if err != nil {
			return limits, []string{"unreadable: " + err.Error()}
		}
		return limits, rules
	}
	mem := read(filepath.Join("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes"))
	limits["memory"], limits["swap"] = mem, "absent"
	if memsw := read(filepath.Join("/sys/fs/cgroup/memory", path, "memory.memsw.limit_in_bytes")); memsw != "absent" {
		a, err1 := strconv.ParseInt(memsw, 10, 64)
		b, err2 := strconv.ParseInt(mem, 10, 64)
		if err1 == nil && err2 == nil {
			limits["swap"] = strconv.FormatInt(a-b, 10)
		}
	}
	limits["pids"] = read(filepath.Join("/sys/fs/cgroup/pids", path, "pids.max"))
	cpuDir := filepath.Join("/sys/fs/cgroup/cpu", path)
	if _, err := os.Stat(cpuDir + "/cpu.cfs_quota_us"); err != nil {
		cpuDir = filepath.Join("/sys/fs/cgroup/cpu,cpuacct", path)
	}
	limits["cpu"] = read(cpuDir+"/cpu.cfs_quota_us") + " " + read(cpuDir+"/cpu.cfs_period_us")
	limits["cpuset"] = read(filepath.Join("/sys/fs/cgroup/cpuset", path, "cpuset.effective_cpus"))
	limits["io"] = normalizeBlkioThrottle(read(filepath.Join("/sys/fs/cgroup/blkio", path, "blkio.throttle.read_bps_device")), read(filepath.Join("/sys/fs/cgroup/blkio", path, "blkio.throttle.write_bps_device")))
	for _, l := range strings.Split(read(filepath.Join("/sys/fs/cgroup/devices", path, "devices.list")), "\n") {
		if l != "" && l != "absent" {
			devices = append(devices, l)
		}
	}
	return limits, devices
}

// normalizeIOMax turns cgroup v2 io.max ("7:3 rbps=1048576 wbps=max riops=max wiops=max") into
// IOLimitText's vocabulary, dropping what is unlimited. runner posture does the same inside.
func normalizeIOMax(text string) string {
	var parts []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || text == "absent" {
			continue
		}
		p := f[0]
		for _, kv := range f[1:] {
			if k, v, _ := strings.Cut(kv, "="); (k == "rbps" || k == "wbps") && v != "max" {
				p += " " + kv
			}
		}
		if p != f[0] {
			parts = append(parts, p)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// normalizeBlkioThrottle does the same for cgroup v1's blkio.throttle.{read,write}_bps_device.
func normalizeBlkioThrottle(read, write string) string {
	caps := map[string]string{}
	for _, f := range []struct{ text, key string }{{read, "rbps"}, {write, "wbps"}} {
		for _, line := range strings.Split(f.text, "\n") {
			if dev, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && f.text != "absent" {
				caps[dev] += " " + f.key + "=" + v
			}
		}
	}
	var parts []string
	for dev, c := range caps {
		parts = append(parts, dev+c)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
