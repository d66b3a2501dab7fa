package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	runc "github.com/containerd/go-runc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// Prefix starts the name of everything sealrun creates on the host (containers, netns,
// cgroups), so that Reap and leak checks find it.
const Prefix = "sealrun-"

// HostConfig says where the sandbox keeps its state and which runtime it drives.
type HostConfig struct {
	StateDir string // persistent state (default /var/lib/sealrun)
	// RunDir is volatile: bundles, runtime state and the records of live runs (default
	// /run/sealrun). It identifies this host: Reap removes only what is recorded under it.
	RunDir  string
	Runtime string // runtime binary (default "runc")
	// RoleRuntimes overrides Runtime for some roles (for example runsc for the runner and
	// grader, runc for the controller).
	RoleRuntimes map[Role]string
	// Hook is the network hook binary (default: sealrun-netns-hook next to this binary, else this
	// binary re-executed).
	Hook string
	// RangesDir is the machine-wide record of allocated UID ranges (default DefaultRangesDir).
	RangesDir string
	// KillTimeout bounds every wait after SIGKILL (default 10s): a container whose processes do
	// not die by then, or a runtime that hangs, is an InfraError, never a hang.
	KillTimeout time.Duration
	// AllowUnshiftedRootfs lets containers start on a kernel or filesystem that cannot idmap
	// mounts: image files then appear owned by nobody inside. Off by default: a failed idmap
	// is an error.
	AllowUnshiftedRootfs bool
	// CgroupParent is the cgroup runs are created under ("": where ResolvePlacement says).
	CgroupParent string
}

// Host is the sandbox on one machine.
type Host struct {
	cfg       HostConfig
	placement Placement
	// Runtime is the default runtime; runtimes holds it and each role's own.
	Runtime   *Runtime
	runtimes  map[Role]*Runtime
	ranges    *Ranges
	hookPath  string
	hookArgv0 string

	// onRecord, when set (tests), sees every run record this host writes: the leak checks
	// know what the host created. Nil in production: a daemon keeps nothing per run.
	onRecord func(runRecord)
}

// NewHost checks the runtime and opens the state. It needs root.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.StateDir == "" {
		cfg.StateDir = "/var/lib/sealrun"
	}
	if cfg.RunDir == "" {
		cfg.RunDir = "/run/sealrun"
	}
	if cfg.Runtime == "" {
		cfg.Runtime = "runc"
	}
	if cfg.RangesDir == "" {
		cfg.RangesDir = DefaultRangesDir
	}
	if cfg.KillTimeout <= 0 {
		cfg.KillTimeout = 10 * time.Second
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the sandbox needs root (it creates namespaces, cgroups and user-namespace mappings); run as root")
	}
	abs, err := filepath.Abs(cfg.RunDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox run directory %s: %w", cfg.RunDir, err)
	}
	cfg.RunDir = abs
	// Containers' mapped root must traverse (never list) to the rootfs mounts in the bundles.
	for _, d := range []string{cfg.RunDir, filepath.Join(cfg.RunDir, "bundles")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox run directory %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox run directory %s: %w", d, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.RunDir, "runs"), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox run records: %w", err)
	}
	if err := checkTraversable(cfg.RunDir); err != nil {
		return nil, err
	}
	rt, runtimes, err := openRuntimes(cfg)
	if err != nil {
		return nil, err
	}
	ranges, err := OpenRanges(cfg.RangesDir, cfg.RunDir)
	if err != nil {
		return nil, err
	}
	hookPath, hookArgv0, err := findHook(cfg.Hook)
	if err != nil {
		return nil, err
	}
	placement, err := ResolvePlacement(cfg.CgroupParent)
	if err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, placement: placement, Runtime: rt, runtimes: runtimes, ranges: ranges, hookPath: hookPath, hookArgv0: hookArgv0}, nil
}

// openRuntimes opens the default runtime and each role's. Every kind keeps its state under
// its own root (runc's under "runtime", as before; crun's under "runtime-crun", ...), and a
// runtime that cannot run containers on this host is refused here, with the reason.
func openRuntimes(cfg HostConfig) (*Runtime, map[Role]*Runtime, error) {
	byBinary := map[string]*Runtime{}
	open := func(binary string) (*Runtime, error) {
		if rt, ok := byBinary[binary]; ok {
			return rt, nil
		}
		rt, err := NewRuntime(binary, filepath.Join(cfg.RunDir, "runtime"))
		if err != nil {
			return nil, err
		}
		if rt.Kind != KindRunc {
			if err := rt.setRoot(filepath.Join(cfg.RunDir, "runtime-"+rt.Kind)); err != nil {
				return nil, err
			}
		}
		if err := rt.UsableHere(); err != nil {
			return nil, err
		}
		byBinary[binary] = rt
		return rt, nil
	}
	def, err := open(cfg.Runtime)
	if err != nil {
		return nil, nil, err
	}
	runtimes := map[Role]*Runtime{}
	for _, role := range Roles {
		runtimes[role] = def
		if b := cfg.RoleRuntimes[role]; b != "" {
			if runtimes[role], err = open(b); err != nil {
				return nil, nil, fmt.Errorf("the %s's runtime: %w", role, err)
			}
		}
	}
	for role := range cfg.RoleRuntimes {
		if _, err := ParseRole(string(role)); err != nil {
			return nil, nil, fmt.Errorf("runtime by role: %w", err)
		}
	}
	return def, runtimes, nil
}

// RuntimeFor returns the runtime that runs the role's containers.
func (h *Host) RuntimeFor(role Role) *Runtime {
	if rt := h.runtimes[role]; rt != nil {
		return rt
	}
	return h.Runtime
}

// ListContainers lists the containers of every runtime this host drives.
func (h *Host) ListContainers(ctx context.Context) ([]*runc.Container, error) {
	var out []*runc.Container
	for _, rt := range h.Runtimes() {
		cs, err := rt.List(ctx)
		if err != nil {
			return out, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// Runtimes lists each distinct runtime this host drives once, the default first.
func (h *Host) Runtimes() []*Runtime {
	out := []*Runtime{h.Runtime}
	for _, role := range Roles {
		if rt := h.RuntimeFor(role); !slices.Contains(out, rt) {
			out = append(out, rt)
		}
	}
	return out
}

// Placement says where this host creates its runs' cgroups, and why.
func (h *Host) Placement() Placement { return h.placement }

// Ranges is the host's UID range allocator.
func (h *Host) Ranges() *Ranges { return h.ranges }

// RunDir is the host's volatile directory (absolute), which identifies it.
func (h *Host) RunDir() string { return h.cfg.RunDir }

var runIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Run is one run's sandbox layout: a cgroup parent <root>/<id> (see Placement), a gateway netns
// sealrun-<id>-gw, a UID range whose base is the run's shared GID, and its workspaces. What it
// creates is recorded under the host's run directory (runs/<id>/record.json) before it is
// created, so that Reap of this host — and only of this host — finds it after a crash.
type Run struct {
	h       *Host
	ID      string
	shared  IDRange
	gateway string
	cg      cgroupTree

	mu   sync.Mutex
	seq  int
	live map[string]*Container
	rec  runRecord
	// evidence: the network evidence of the first container of each role (every container of
	// a role is configured alike), for the run's attestation.
	evidence map[Role]NetnsEvidence
}

// Evidence returns the network evidence the hook recorded for the first container of each role
// the run started, checked against the role's air gap before that container ran.
func (r *Run) Evidence() map[Role]NetnsEvidence {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Role]NetnsEvidence, len(r.evidence))
	for k, v := range r.evidence {
		out[k] = v
	}
	return out
}

// runRecord is what a run created, as recorded in <RunDir>/runs/<id>/record.json.
type runRecord struct {
	ID         string   `json:"id"`
	Netns      string   `json:"netns,omitempty"`
	Cgroup     string   `json:"cgroup,omitempty"`
	Shared     IDRange  `json:"shared"`
	Workspaces []string `json:"workspaces,omitempty"` // quota'd workspace mounts
	Mounts     []string `json:"mounts,omitempty"`     // other filesystems of the run's own (its socket directory)
}

func (h *Host) runRecordDir(id string) string { return filepath.Join(h.cfg.RunDir, "runs", id) }

// save writes the record atomically.
func (r *Run) save() error {
	if r.h.onRecord != nil {
		r.h.onRecord(r.rec)
	}
	b, _ := json.Marshal(r.rec)
	p := filepath.Join(r.h.runRecordDir(r.ID), "record.json")
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return infra(r.ID, "record run", err)
	}
	return infra(r.ID, "record run", os.Rename(p+".tmp", p))
}

// NewRun sets up a run's layout. A run id that is live on this machine — on this host or on
// another sealrun's (another run directory), or whose netns or cgroup exists for any reason —
// is refused with ErrRunInUse: NewRun never adopts, kills or deletes what it did not create.
// Everything it made is undone if a step fails.
func (h *Host) NewRun(ctx context.Context, id string) (r *Run, err error) {
	if !runIDRE.MatchString(id) {
		return nil, fmt.Errorf("%w: run id %q: use 1 to 31 lowercase letters, digits and dashes", ErrBadConfig, id)
	}
	r = &Run{h: h, ID: id, gateway: Prefix + id + "-gw", cg: cgroupTree{path: path.Join(h.placement.Root, id)}, live: map[string]*Container{}}
	r.rec.ID = id
	dir := h.runRecordDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: run %s is live on this host (record %s); choose another id, or if its daemon died, reap it (sealrun sandbox reap)", ErrRunInUse, id, dir)
		}
		return nil, infra(id, "record run", err)
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			os.RemoveAll(dir)
		}
	}()
	if r.cg.exists() {
		return nil, fmt.Errorf("%w: run %s: cgroup %s already exists (another sealrun on this machine uses this id); choose another id", ErrRunInUse, id, r.cg.path)
	}
	if r.shared, err = h.ranges.Allocate("run " + id); err != nil {
		return nil, infra(id, "allocate UID range", err)
	}
	r.rec.Shared = r.shared
	undo = append(undo, func() { h.ranges.Release(r.shared) })
	// The netns name is the atomic claim on the id across the machine (created O_EXCL).
	r.rec.Netns = r.gateway
	if err = r.save(); err != nil {
		return nil, err
	}
	if err = createGatewayNetns(r.gateway); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: run %s: network namespace %s already exists (another sealrun on this machine uses this id); choose another id", ErrRunInUse, id, r.gateway)
		}
		return nil, infra(id, "create gateway netns", err)
	}
	undo = append(undo, func() { netns.DeleteNamed(r.gateway) })
	r.rec.Cgroup = r.cg.path
	if err = r.save(); err != nil {
		return nil, err
	}
	if err = r.cg.Create(h.placement.Base); err != nil {
		return nil, infra(id, "create cgroup", err)
	}
	undo = append(undo, func() { r.cg.KillAll(time.Second); r.cg.Remove() })
	return r, nil
}

// GatewayNetns is the name of the run's gateway network namespace (under /run/netns).
func (r *Run) GatewayNetns() string { return r.gateway }

// SharedGID is the host GID that container GID 1000 maps to in every container of the run.
func (r *Run) SharedGID() uint32 { return r.shared.Base }

// PrepareWorkspace makes dir usable as /workspace by every container of the run: group-owned
// by the run's shared GID, group-writable, setgid so that new files keep the group. With a
// quota (bytes, at least MinWorkspaceQuota) dir is a filesystem of that size of its own (see
// mountWorkspace), unmounted by Destroy; with 0 it is a plain directory (tests, probes).
func (r *Run) PrepareWorkspace(dir string, quota int64) error {
	if quota != 0 {
		if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
			return err
		}
		r.mu.Lock()
		r.rec.Workspaces = append(r.rec.Workspaces, dir)
		err := r.save()
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if err := mountWorkspace(dir, quota, r.shared.Base, r.shared.Base); err != nil {
			if errors.Is(err, ErrBadConfig) {
				return err
			}
			return infra(r.ID, "workspace quota", err)
		}
	} else if err := os.MkdirAll(dir, 0o2770); err != nil {
		return err
	}
	if err := os.Chown(dir, int(r.shared.Base), int(r.shared.Base)); err != nil {
		return err
	}
	return os.Chmod(dir, 0o2770|fs.ModeSetgid)
}

// ContainerConfig is one container to start in a run.
type ContainerConfig struct {
	Role      Role
	Rootfs    string
	Args      []string
	Env       []string
	Cwd       string
	Workspace string
	Bundle    string
	Runner    string
	Limits    Limits // zero fields take DefaultLimits, field by field
	Devices   []specs.LinuxDevice
	Extra     []specs.Mount
	// Symlinks (container path -> target) are made in the container's mount-target layer, never
	// in the image: what GPUEdits.Symlinks stands in for the CDI hooks.
	Symlinks map[string]string
	// Stdin: when true the container's stdin is a pipe the caller writes through
	// Container.Stdin (and closes); otherwise the container reads EOF at once.
	Stdin bool
	// Stdout and Stderr receive the container's output as it comes (nil: discarded). The
	// runtime's own error messages arrive on Stderr too.
	Stdout, Stderr io.Writer
}

// Phases splits a container's start: sealrun's preparation (cgroup and device filter, idmapped
// rootfs and mount-target overlay, spec and bundle), the runtime's own work until the network
// hook began (its process, namespaces, mounts, seccomp, cgroup placement), the hook
// (configure and check the netns), and the time until sealrun saw the container registered.
type Phases struct {
	Prepare, Runtime, Hook, Ready time.Duration
}

// Container is a started container. Its cgroup is a wrapper sealrun makes (<run>/<container>)
// with the runtime's own below it (<run>/<container>/ctr), which the runtime sets the limits on
// and removes the moment the container exits: the wrapper outlives it, so the container's CPU
// time, memory peak and OOM kills stay readable, and on cgroup v2 sealrun's device filter sits on
// it, out of the runtime's reach.
type Container struct {
	run  *Run
	ID   string
	Role Role
	UIDs IDRange
	rt   *Runtime // the role's
	// Phases is where the container's start went (make bench prints it).
	Phases   Phases
	bundle   string
	cg       cgroupTree // the wrapper
	leaf     cgroupTree // the runtime's
	Evidence NetnsEvidence
	pid      int
	stdin    io.WriteCloser
	oom      *oomWatch // v1

	done     chan struct{}
	exit     int
	err      error
	stderr   *limitedBuffer
	stopOnce sync.Once
	started  bool // the runtime was started: done will be closed
	// ShiftedRootfs: the rootfs is an idmapped mount, so image files keep their owners inside.
	ShiftedRootfs bool
	rootfsMounts  []string // unmounted in order: the overlays of mount sources, the rootfs overlay, the idmapped image
}

// Start creates and starts a container. It returns once the container's namespace was
// configured and checked (the evidence is in Container.Evidence, its init pid in Pid) and the
// runtime has registered it, or with an error naming the container and carrying the runtime's
// own message: ErrBadConfig for a configuration that can never start, an InfraError for a
// failure of the runtime, cgroups, netns or mounts.
func (r *Run) Start(ctx context.Context, cfg ContainerConfig) (_ *Container, err error) {
	began := time.Now()
	r.mu.Lock()
	r.seq++
	id := fmt.Sprintf("%s%s-%s-%d", Prefix, r.ID, cfg.Role, r.seq)
	r.mu.Unlock()
	c := &Container{run: r, ID: id, Role: cfg.Role, rt: r.h.RuntimeFor(cfg.Role), cg: cgroupTree{path: r.cg.path + "/" + id}, done: make(chan struct{}), stderr: &limitedBuffer{max: 8 << 10}}
	c.leaf = cgroupTree{path: c.cg.path + "/" + runtimeLeaf}
	defer func() {
		if err != nil {
			c.Destroy(context.Background())
		}
	}()
	spec, err := Spec(Profile{
		Role: cfg.Role, Rootfs: cfg.Rootfs, Args: cfg.Args, Env: cfg.Env, Cwd: cfg.Cwd, Hostname: string(cfg.Role),
		UIDs: IDRange{Base: RangeBase, Size: RangeSize}, SharedGID: r.shared.Base, Workspace: cfg.Workspace, Bundle: cfg.Bundle, Runner: cfg.Runner,
		Extra: cfg.Extra, Limits: cfg.Limits, CgroupsPath: c.leaf.path, Devices: cfg.Devices,
	})
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, badConfig(err))
	}
	if c.rt.Kind == KindRunsc && len(cfg.Devices) > 0 {
		// Refused, never weakened: a GPU under gVisor needs its nvproxy, which sealrun does not
		// wire (and Debian's runsc predates).
		return nil, fmt.Errorf("container %s: %w", id, badConfig(fmt.Errorf("the %s gets devices (%s ...) but runs under gVisor (%s), which sealrun does not give devices to; run this role with runc or crun (runtimes.%s in sealrun.toml)", cfg.Role, cfg.Devices[0].Path, c.rt.VersionLine, cfg.Role)))
	}
	if err = c.cg.Create(r.h.placement.Base); err != nil {
		return nil, infra(id, "create cgroup", err)
	}
	if c.cg.unified() {
		rules, rerr := allowRules(spec.Linux.Resources.Devices)
		if rerr == nil {
			rerr = attachDeviceFilter(c.cg.dirV2(), rules)
		}
		if rerr != nil {
			return nil, infra(id, "device filter", rerr)
		}
	}
	targets, err := resolveMountTargets(cfg.Rootfs, spec.Mounts)
	if err == nil {
		targets, err = addSymlinks(targets, cfg.Rootfs, cfg.Symlinks)
	}
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, badConfig(err))
	}
	// Validated with a placeholder range; the container's own is allocated only now.
	if c.UIDs, err = r.h.ranges.Allocate(id); err != nil {
		return nil, infra(id, "allocate UID range", err)
	}
	spec.Linux.UIDMappings, spec.Linux.GIDMappings = idMappings(c.UIDs, r.shared.Base)
	c.bundle = filepath.Join(r.h.cfg.RunDir, "bundles", id)
	if err = os.Mkdir(c.bundle, 0o711); err != nil {
		return nil, infra(id, "create bundle", err)
	}
	// The rootfs: an idmapped read-only view of the store's, under a layer holding the mount
	// targets the image lacks (mounttargets_linux.go). The overlay is made for every image, the
	// layer empty where nothing is missing: its mount shows no host path (hostpaths_linux.go).
	mnt := filepath.Join(c.bundle, "rootfs")
	imageMnt := filepath.Join(c.bundle, "image")
	serr := shiftRootfs(cfg.Rootfs, imageMnt, spec.Linux.UIDMappings, spec.Linux.GIDMappings)
	switch {
	case serr == nil:
		c.rootfsMounts, c.ShiftedRootfs = []string{imageMnt}, true
		spec.Root.Path = imageMnt
	case layerNeeded(targets):
		return nil, infra(id, "idmapped rootfs", fmt.Errorf("%w; the image lacks mount targets (%s), which sealrun layers over an idmapped rootfs only", serr, describeTargets(targets)))
	case !r.h.cfg.AllowUnshiftedRootfs:
		return nil, infra(id, "idmapped rootfs", fmt.Errorf("%w; image files would appear owned by nobody inside. Use a kernel (5.12+) and filesystem that can idmap mounts (sealrun doctor checks), or allow unshifted rootfs in the configuration", serr))
	}
	if c.ShiftedRootfs {
		layer := filepath.Join(c.bundle, "targets")
		if err = os.Mkdir(layer, 0o755); err == nil {
			err = makeTargetLayer(layer, cfg.Rootfs, targets, spec.Linux.UIDMappings, spec.Linux.GIDMappings)
		}
		if err != nil {
			return nil, infra(id, "mount targets", err)
		}
		if err = os.Mkdir(mnt, 0o755); err != nil {
			return nil, infra(id, "mount targets", err)
		}
		switch err = mountTargetOverlay(c.bundle, layer, imageMnt, mnt); {
		case err == nil:
			c.rootfsMounts = []string{mnt, imageMnt}
			spec.Root.Path = mnt
		case layerNeeded(targets):
			os.Remove(mnt)
			return nil, infra(id, "mount targets", fmt.Errorf("the image lacks %s: %w", describeTargets(targets), err))
		default:
			// A kernel before 5.19 cannot overlay an idmapped mount: the plain idmapped rootfs,
			// whose mount names the store's path.
			os.Remove(mnt)
		}
	}
	hidden, err := hideSources(c.bundle, spec.Mounts)
	c.rootfsMounts = append(hidden, c.rootfsMounts...)
	if err != nil {
		return nil, infra(id, "mounts", err)
	}
	evidencePath := filepath.Join(c.bundle, "netns.json")
	hook := r.h.hookSpec(cfg.Role, r.gateway, evidencePath, c.leaf.path)
	spec.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{hook}}
	c.rt.adjustSpec(spec)
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err = os.WriteFile(filepath.Join(c.bundle, "config.json"), data, 0o600); err != nil {
		return nil, infra(id, "write bundle", err)
	}
	pio, err := runc.NewPipeIO(int(c.UIDs.Base+AgentUID), int(r.shared.Base))
	if err != nil {
		return nil, infra(id, "stdio pipes", err)
	}
	if cfg.Stdin {
		c.stdin = pio.Stdin()
	} else {
		pio.Stdin().Close() // the container reads EOF: nothing from the host is passed in
	}
	var copies sync.WaitGroup
	copyOut := func(dst io.Writer, src io.Reader) {
		defer copies.Done()
		if dst == nil {
			dst = io.Discard
		}
		io.Copy(dst, src) // bounded: a 32 KiB buffer, streamed, never accumulated
	}
	copies.Add(2)
	go copyOut(cfg.Stdout, pio.Stdout())
	go copyOut(io.MultiWriter(c.stderr, orDiscard(cfg.Stderr)), pio.Stderr())
	r.mu.Lock()
	r.live[id] = c
	r.mu.Unlock()
	c.started = true
	launched := time.Now()
	c.Phases.Prepare = launched.Sub(began)
	go func() {
		status, err := c.rt.Run(id, c.bundle, pio)
		// Only our copies of the write ends close here: the readers drain what the container
		// wrote up to its last byte and see EOF once every process holding a write end (the
		// container's, all gone with its pid namespace's init) has exited. Closing the read ends
		// before the copies finish loses the output's tail, or all of it (issue 28).
		pio.(runc.StartCloser).CloseAfterStart()
		if !waitTimeout(&copies, r.h.cfg.KillTimeout) && err == nil {
			err = fmt.Errorf("its output was still open %s after it exited (a process outside the container holds the pipe); output may be incomplete", r.h.cfg.KillTimeout)
		}
		pio.Close()
		copies.Wait()
		c.exit, c.err = status, err
		close(c.done)
	}()
	// Wait until the hook has recorded the namespace and the init pid (written atomically, last)
	// and the runtime has registered the container (then every runtime verb knows it), or the
	// runtime gave up. The pid comes from the runtime's own state given to the hook: nothing
	// here reads a file the runtime writes later.
	readRecord := func() bool {
		b, rerr := os.ReadFile(evidencePath)
		if rerr != nil {
			return false
		}
		var rec netnshook.Record
		if json.Unmarshal(b, &rec) != nil || rec.Pid <= 0 {
			return false
		}
		c.pid, c.Evidence = rec.Pid, rec.Evidence
		if !rec.Began.IsZero() && !rec.Ended.IsZero() {
			c.Phases.Runtime, c.Phases.Hook = rec.Began.Sub(launched), rec.Ended.Sub(rec.Began)
			c.Phases.Ready = time.Since(rec.Ended)
		}
		return true
	}
	for {
		if c.rt.registered(id) && readRecord() {
			if aerr := checkAirGap(cfg.Role, c.Evidence); aerr != nil {
				return nil, infra(id, "air gap", aerr)
			}
			r.mu.Lock()
			if r.evidence == nil {
				r.evidence = map[Role]NetnsEvidence{}
			}
			if _, ok := r.evidence[cfg.Role]; !ok {
				r.evidence[cfg.Role] = c.Evidence
			}
			r.mu.Unlock()
			c.oom = c.leaf.watchOOM()
			return c, nil
		}
		select {
		case <-c.done:
			if c.err == nil && readRecord() {
				return c, nil // a command that finished before we looked (its exit is kept)
			}
			msg := c.stderr.String()
			if c.err != nil {
				return nil, infra(id, "start", fmt.Errorf("%v: %s", c.err, msg))
			}
			return nil, infra(id, "start", fmt.Errorf("runtime exit %d: %s", c.exit, msg))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// badConfig marks a configuration error as ErrBadConfig (keeping its message).
func badConfig(err error) error {
	if errors.Is(err, ErrBadConfig) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadConfig, err)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Pid is the container's init process on the host, as the runtime reported it to the network
// hook before the process started. It is known as soon as Start returns.
func (c *Container) Pid() int { return c.pid }

// Stdin is the write end of the container's stdin (nil unless ContainerConfig.Stdin). The
// caller closes it.
func (c *Container) Stdin() io.WriteCloser { return c.stdin }

// Done is closed when the container has exited.
func (c *Container) Done() <-chan struct{} { return c.done }

// Wait returns the exit status (128+n for a signal, as a shell reports it). If ctx ends first
// the container is killed and Wait returns ctx's error once it is gone. The wait after a kill is
// bounded by the host's KillTimeout: a container that will not die, or a runtime that does not
// return, is an InfraError. A command the runtime could not execute (not found, not
// executable) is a CommandError; a failure of the runtime itself an InfraError.
func (c *Container) Wait(ctx context.Context) (int, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		kerr := c.Kill(context.Background(), syscall.SIGKILL)
		select {
		case <-c.done:
		case <-time.After(c.run.h.cfg.KillTimeout):
			return -1, infra(c.ID, "wait", fmt.Errorf("still running %s after SIGKILL (%v); the runtime or the kernel is stuck: run sealrun doctor", c.run.h.cfg.KillTimeout, kerr))
		}
		if c.err == nil {
			return c.exit, fmt.Errorf("container %s killed: %w", c.ID, ctx.Err())
		}
	}
	if c.err != nil {
		return c.exit, infra(c.ID, "run", c.err)
	}
	if c.exit != 0 {
		if msg := c.stderr.String(); strings.Contains(msg, "runc run failed") || strings.Contains(msg, "unable to start container process") {
			return c.exit, &CommandError{Container: c.ID, Message: runtimeMessage(msg)}
		} else if line := crunExecFailure(msg); c.rt.Kind == KindCrun && line != "" {
			return c.exit, &CommandError{Container: c.ID, Message: line}
		}
	}
	return c.exit, nil
}

// runtimeMessage keeps the runtime's own error line from its log output.
func runtimeMessage(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		if i := strings.Index(line, `msg="`); i >= 0 {
			return strings.TrimSuffix(line[i+5:], `"`)
		}
	}
	return stderr
}

// crunExecFailure finds crun's line saying it could not execute the command ("executable file
// `x` not found in $PATH: ...", "open executable: ...", "exec container process `x`: ..."), or "".
func crunExecFailure(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		for _, p := range []string{"executable file `", "open executable: ", "exec container process "} {
			if strings.HasPrefix(line, p) {
				return line
			}
		}
	}
	return ""
}

// Kill sends sig to every process of the container through the runtime. For SIGKILL it also
// kills through the cgroup (freeze, kill, thaw), so that nothing that escaped the runtime's view
// survives, and waits (bounded by KillTimeout) until the cgroup is empty. The runtime call is
// bounded by ctx and KillTimeout. A container that has already exited is not an error.
func (c *Container) Kill(ctx context.Context, sig syscall.Signal) error {
	kctx, cancel := context.WithTimeout(ctx, c.run.h.cfg.KillTimeout)
	defer cancel()
	err := c.rt.Kill(kctx, c.ID, sig)
	if sig == syscall.SIGKILL {
		if kerr := c.cg.KillAll(c.run.h.cfg.KillTimeout); kerr != nil {
			return infra(c.ID, "kill", kerr)
		}
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	if err != nil && sig == syscall.SIGKILL && c.cg.empty() {
		return nil // every process is gone; the runtime only had not noticed
	}
	return infra(c.ID, "kill", err)
}

// Freeze stops every process of the container where it is (cgroup freezer); Thaw resumes them.
// The deadline freezes the controller before killing it, so that nothing it does between the
// two counts.
func (c *Container) Freeze() error { return infra(c.ID, "freeze", c.cg.Freeze()) }

// Thaw resumes a frozen container.
func (c *Container) Thaw() error { return infra(c.ID, "thaw", c.cg.Thaw()) }

// Stats returns the container's cgroup counters, read from its wrapper cgroup: exact while it runs
// and after it exited, until Destroy.
func (c *Container) Stats() (CgroupStats, error) {
	st, err := c.cg.Stats()
	if err != nil {
		return st, infra(c.ID, "stats", err)
	}
	if c.oom.seen() && st.OOMKills == 0 {
		st.OOMKills = 1
	}
	return st, nil
}

// OOMKilled reports whether the kernel's OOM killer killed a process of the container (the
// agent's fault: its memory limit, not the host's).
func (c *Container) OOMKilled() bool {
	st, err := c.Stats()
	return err == nil && st.OOMKills > 0
}

// Destroy kills the container if it runs and removes everything it had: runtime state, cgroup,
// its end of the gateway veth, bundle directory and UID range. It is safe to call twice.
func (c *Container) Destroy(ctx context.Context) error {
	var errs []error
	select {
	case <-c.done:
	default:
		if c.started {
			c.Kill(ctx, syscall.SIGKILL)
			select {
			case <-c.done:
			case <-time.After(c.run.h.cfg.KillTimeout):
				errs = append(errs, infra(c.ID, "destroy", fmt.Errorf("did not exit %s after SIGKILL", c.run.h.cfg.KillTimeout)))
			}
		}
	}
	c.stopOnce.Do(func() {
		if c.stdin != nil {
			c.stdin.Close()
		}
		// A foreground run deletes its own runtime state when the container exits; ask the
		// runtime only when that did not happen (the start failed, or the wait timed out).
		exitedCleanly := false
		select {
		case <-c.done:
			exitedCleanly = c.err == nil
		default:
		}
		if !exitedCleanly && c.started {
			dctx, cancel := context.WithTimeout(ctx, c.run.h.cfg.KillTimeout)
			if st, err := c.rt.State(dctx, c.ID); err == nil && st != nil {
				if err := c.rt.Delete(dctx, c.ID); err != nil {
					errs = append(errs, err)
				}
			}
			cancel()
		}
		if err := c.cg.KillAll(c.run.h.cfg.KillTimeout); err != nil {
			errs = append(errs, err)
		}
		if err := c.cg.Remove(); err != nil {
			errs = append(errs, err)
		}
		if c.Role == RoleController {
			deleteGatewayLink(c.run.gateway)
		}
		bundleFree := true
		for _, m := range c.rootfsMounts {
			if err := unmountRootfs(m); err != nil {
				errs = append(errs, err)
				bundleFree = false // never recurse into a mounted image
				break
			}
		}
		if c.bundle != "" && bundleFree {
			if err := removeWork(c.bundle); err != nil {
				errs = append(errs, err)
			}
			if err := os.RemoveAll(c.bundle); err != nil {
				errs = append(errs, err)
			}
		}
		if c.UIDs.Base != 0 {
			if err := c.run.h.ranges.Release(c.UIDs); err != nil {
				errs = append(errs, err)
			}
		}
		c.run.mu.Lock()
		delete(c.run.live, c.ID)
		c.run.mu.Unlock()
	})
	if len(errs) > 0 {
		return infra(c.ID, "destroy", errors.Join(errs...))
	}
	return nil
}

func deleteGatewayLink(gateway string) {
	ns, err := netns.GetFromName(gateway)
	if err != nil {
		return
	}
	defer ns.Close()
	if h, err := netlink.NewHandleAt(ns); err == nil {
		if l, err := h.LinkByName(netnshook.GatewayLink); err == nil {
			h.LinkDel(l)
		}
		h.Close()
	}
}

// Destroy removes the whole run: its containers, every task left in its cgroup subtree, the
// cgroups, the workspace mounts (their images stay), the gateway netns, the run's UID range and
// its record.
func (r *Run) Destroy(ctx context.Context) error {
	r.mu.Lock()
	live := make([]*Container, 0, len(r.live))
	for _, c := range r.live {
		live = append(live, c)
	}
	r.mu.Unlock()
	var errs []error
	for _, c := range live {
		if err := c.Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.h.removeRecorded(r.rec)...)
	if len(errs) > 0 {
		return infra(r.ID, "destroy run", errors.Join(errs...))
	}
	return nil
}

// removeRecorded removes what a run record lists, and then the record (kept if anything failed,
// so that a later Reap tries again).
func (h *Host) removeRecorded(rec runRecord) []error {
	var errs []error
	if rec.Cgroup != "" {
		t := cgroupTree{path: rec.Cgroup}
		if err := t.KillAll(h.cfg.KillTimeout); err != nil {
			errs = append(errs, err)
		}
		if err := t.Remove(); err != nil {
			errs = append(errs, err)
		}
		removeRootIfEmpty(h.placement.Root)
	}
	for _, ws := range slices.Concat(rec.Workspaces, rec.Mounts) {
		if err := unmountWorkspace(ws); err != nil {
			errs = append(errs, err)
		}
	}
	if rec.Netns != "" {
		if err := netns.DeleteNamed(rec.Netns); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("delete network namespace %s: %w", rec.Netns, err))
		}
	}
	if rec.Shared.Base != 0 {
		if err := h.ranges.Release(rec.Shared); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(h.runRecordDir(rec.ID)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Reaped lists what Reap removed.
type Reaped struct {
	Containers, Runs, Ranges, Bundles []string
}

func (r Reaped) Empty() bool {
	return len(r.Containers)+len(r.Runs)+len(r.Ranges)+len(r.Bundles) == 0
}

// Reap removes what an earlier sealrun with this host's run directory left behind (a crash, a
// killed daemon): the containers in its runtime root, the runs it recorded (their cgroups,
// workspace mounts, gateway netns), its UID ranges and bundles. It touches nothing another
// sealrun on the machine made. The daemon calls it at start, when nothing of its own is live.
func (h *Host) Reap(ctx context.Context) (Reaped, error) {
	var out Reaped
	var errs []error
	// A process killed between freezing a cgroup and thawing it left it frozen: its tasks would
	// never die, and the runtime's delete would wait for them.
	if entries, err := os.ReadDir(filepath.Join(h.cfg.RunDir, "runs")); err == nil {
		for _, e := range entries {
			var rec runRecord
			if b, err := os.ReadFile(filepath.Join(h.runRecordDir(e.Name()), "record.json")); err == nil && json.Unmarshal(b, &rec) == nil && rec.Cgroup != "" {
				cgroupTree{path: rec.Cgroup}.thawDescendants()
			}
		}
	}
	for _, rt := range h.Runtimes() {
		cs, err := rt.List(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, c := range cs {
			kctx, cancel := context.WithTimeout(ctx, h.cfg.KillTimeout)
			rt.Kill(kctx, c.ID, syscall.SIGKILL)
			// The runtime process that ran it in the foreground may delete it first, once it
			// died (crun does it sooner than runc): gone is what was asked.
			if err := rt.Delete(kctx, c.ID); err != nil && rt.exists(c.ID) {
				errs = append(errs, err)
			}
			cancel()
			out.Containers = append(out.Containers, c.ID)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(h.cfg.RunDir, "runs")); err == nil {
		for _, e := range entries {
			var rec runRecord
			b, err := os.ReadFile(filepath.Join(h.runRecordDir(e.Name()), "record.json"))
			if err == nil {
				err = json.Unmarshal(b, &rec)
			}
			if err != nil || rec.ID != e.Name() {
				// Claimed but nothing created yet (a crash inside NewRun): only the claim goes.
				rec = runRecord{ID: e.Name()}
			}
			errs = append(errs, h.removeRecorded(rec)...)
			out.Runs = append(out.Runs, e.Name())
		}
	}
	if owners, err := h.ranges.Owners(); err == nil {
		for rg, owner := range owners {
			if err := h.ranges.Release(rg); err != nil {
				errs = append(errs, err)
			}
			out.Ranges = append(out.Ranges, owner)
		}
	}
	bundles := filepath.Join(h.cfg.RunDir, "bundles")
	if entries, err := os.ReadDir(bundles); err == nil {
		for _, e := range entries {
			if err := unmountHidden(filepath.Join(bundles, e.Name())); err != nil {
				errs = append(errs, err)
				continue // never recurse into a mounted source
			}
			if err := unmountRootfs(filepath.Join(bundles, e.Name(), "rootfs")); err != nil {
				errs = append(errs, err)
				continue // never recurse into a mounted image
			}
			if err := unmountRootfs(filepath.Join(bundles, e.Name(), "image")); err != nil {
				errs = append(errs, err)
				continue
			}
			os.RemoveAll(filepath.Join(bundles, e.Name()))
			out.Bundles = append(out.Bundles, e.Name())
		}
	}
	if len(errs) > 0 {
		return out, infra(h.cfg.RunDir, "reap", errors.Join(errs...))
	}
	return out, nil
}

// ReapRunDir removes what a host with run directory runDir left — its containers, recorded
// runs (cgroups, mounts, gateway netns), UID ranges and bundles — and then the directory. The
// caller must know that host's process is gone: the tests use it for the run directories of
// test processes that were killed before their cleanups ran.
func ReapRunDir(ctx context.Context, runDir string) error {
	h, err := NewHost(HostConfig{StateDir: filepath.Join(runDir, "reap-state"), RunDir: runDir})
	if err != nil {
		return err
	}
	if _, err := h.Reap(ctx); err != nil {
		return err
	}
	return os.RemoveAll(runDir)
}

// checkTraversable makes sure that unprivileged mapped users (container roots) can traverse every
// directory down to dir, as the runtime needs to mount container rootfs from below it.
func checkTraversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("run directory %s: %w", abs, err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("run directory %s is not reachable by containers: %s is mode %v (others cannot traverse it); choose a run directory whose parents are traversable (default /run/sealrun) or chmod o+x %s", abs, p, st.Mode().Perm(), p)
		}
		if p == "/" {
			return nil
		}
	}
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
