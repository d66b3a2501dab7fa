package sandbox

// The host: the runtimes (one per role), the UID range allocator, the run directory and where
// runs' cgroups go (sandbox/cgroup's Placement).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	runc "github.com/containerd/go-runc"
	"github.com/sealrun/sealrun/sandbox/cgroup"
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
	// StartTimeout bounds a container's start, from launching the runtime to its readiness
	// (default 2 minutes): a runtime that never says the container is up (its state never
	// answers, its hook hangs) is the host's failure, not a wait without end.
	StartTimeout time.Duration
	// AllowUnshiftedRootfs lets containers start on a kernel or filesystem that cannot idmap
	// mounts: image files then appear owned by nobody inside. Off by default: a failed idmap
	// is an error.
	AllowUnshiftedRootfs bool
	// CgroupParent is the cgroup runs are created under ("": where cgroup.ResolvePlacement says).
	CgroupParent string
	// NetnsDir is where runs' gateway network namespaces are mounted (default DefaultNetnsDir,
	// shared by every sealrun of the machine: a name there claims a run id).
	NetnsDir string
}

// Host is the sandbox on one machine.
type Host struct {
	cfg       HostConfig
	placement cgroup.Placement
	// Runtime is the default runtime; runtimes holds it and each role's own.
	Runtime   *Runtime
	runtimes  map[Role]*Runtime
	ranges    *Ranges
	hookPath  string
	hookArgv0 string
	// relayPath is the hook's relay (hookrelay_linux.go), "" where it is not installed;
	// relayName the abstract socket of this process's relay server.
	relayPath, relayName string
	// touchPath is touch(1): each container's poststart hook, which marks that its process was
	// started (Container.Ran).
	touchPath string

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
	if cfg.NetnsDir == "" {
		cfg.NetnsDir = DefaultNetnsDir
	}
	if cfg.KillTimeout <= 0 {
		cfg.KillTimeout = 10 * time.Second
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 2 * time.Minute
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
	if err := lockRunDir(cfg.RunDir); err != nil {
		return nil, err
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
	var relayName string
	relayPath := findRelay(hookPath)
	if relayPath != "" {
		if relayName, err = startRelay(); err != nil {
			return nil, err
		}
	}
	placement, err := cgroup.ResolvePlacement(cfg.CgroupParent)
	if err != nil {
		return nil, err
	}
	touchPath, err := findTouch()
	if err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, placement: placement, Runtime: rt, runtimes: runtimes, ranges: ranges, hookPath: hookPath, hookArgv0: hookArgv0,
		relayPath: relayPath, relayName: relayName, touchPath: touchPath}, nil
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
	if rt := runtimes[RoleController]; rt.Kind == KindRunsc && !runscUnsealedForTests() {
		return nil, nil, fmt.Errorf("the controller's runtime is gVisor (%s): %s", rt.VersionLine, controllerUnderGVisor)
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
func (h *Host) Placement() cgroup.Placement { return h.placement }

// Ranges is the host's UID range allocator.
func (h *Host) Ranges() *Ranges { return h.ranges }

// RunDir is the host's volatile directory (absolute), which identifies it.
func (h *Host) RunDir() string { return h.cfg.RunDir }

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
