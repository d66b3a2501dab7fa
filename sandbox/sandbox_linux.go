package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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
	StateDir string // persistent: UID range records (default /var/lib/sealrun)
	RunDir   string // volatile: bundles and runtime state (default /run/sealrun)
	Runtime  string // runtime binary (default "runc")
	// Hook is the network hook binary (default: sealrun-netns-hook next to this binary, else this
	// binary re-executed).
	Hook string
}

// Host is the sandbox on one machine.
type Host struct {
	cfg       HostConfig
	Runtime   *Runtime
	ranges    *Ranges
	hookPath  string
	hookArgv0 string
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
	if os.Geteuid() != 0 {
		return nil, errors.New("the sandbox needs root (it creates namespaces, cgroups and user-namespace mappings); run as root")
	}
	// Containers' mapped root must traverse (never list) to the rootfs mounts in the bundles.
	for _, d := range []string{cfg.RunDir, filepath.Join(cfg.RunDir, "bundles")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox run directory %s: %w", d, err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return nil, fmt.Errorf("sandbox run directory %s: %w", d, err)
		}
	}
	if err := checkTraversable(cfg.RunDir); err != nil {
		return nil, err
	}
	rt, err := NewRuntime(cfg.Runtime, filepath.Join(cfg.RunDir, "runtime"))
	if err != nil {
		return nil, err
	}
	ranges, err := OpenRanges(filepath.Join(cfg.StateDir, "sandbox", "ranges"))
	if err != nil {
		return nil, err
	}
	hookPath, hookArgv0, err := findHook(cfg.Hook)
	if err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, Runtime: rt, ranges: ranges, hookPath: hookPath, hookArgv0: hookArgv0}, nil
}

// Ranges is the host's UID range allocator.
func (h *Host) Ranges() *Ranges { return h.ranges }

var runIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Run is one run's sandbox layout: a cgroup parent /sealrun/<id>, a gateway netns
// sealrun-<id>-gw, and a UID range whose base is the run's shared GID.
type Run struct {
	h       *Host
	ID      string
	shared  IDRange
	gateway string
	cg      cgroupTree

	mu   sync.Mutex
	seq  int
	live map[string]*Container
}

// NewRun sets up a run's layout. Everything it made is undone if a step fails.
func (h *Host) NewRun(ctx context.Context, id string) (r *Run, err error) {
	if !runIDRE.MatchString(id) {
		return nil, fmt.Errorf("run id %q: use 1 to 31 lowercase letters, digits and dashes", id)
	}
	r = &Run{h: h, ID: id, gateway: Prefix + id + "-gw", cg: cgroupTree{path: CgroupRoot + "/" + id}, live: map[string]*Container{}}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if r.shared, err = h.ranges.Allocate("run " + id); err != nil {
		return nil, err
	}
	undo = append(undo, func() { h.ranges.Release(r.shared) })
	if err = r.cg.Create(); err != nil {
		return nil, err
	}
	undo = append(undo, func() { r.cg.KillAll(time.Second); r.cg.Remove() })
	if err = createGatewayNetns(r.gateway); err != nil {
		return nil, err
	}
	return r, nil
}

// GatewayNetns is the name of the run's gateway network namespace (under /run/netns).
func (r *Run) GatewayNetns() string { return r.gateway }

// SharedGID is the host GID that container GID 1000 maps to in every container of the run.
func (r *Run) SharedGID() uint32 { return r.shared.Base }

// PrepareWorkspace makes dir usable as /workspace by every container of the run: group-owned
// by the run's shared GID, group-writable, setgid so that new files keep the group.
func (r *Run) PrepareWorkspace(dir string) error {
	if err := os.MkdirAll(dir, 0o2770); err != nil {
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
	Limits    Limits
	Devices   []specs.LinuxDevice
	Extra     []specs.Mount
	// Stdout and Stderr receive the container's output as it comes (nil: discarded). The
	// runtime's own error messages arrive on Stderr too.
	Stdout, Stderr io.Writer
}

// Container is a started container.
type Container struct {
	run      *Run
	ID       string
	Role     Role
	UIDs     IDRange
	bundle   string
	cg       cgroupTree
	Evidence NetnsEvidence

	done     chan struct{}
	exit     int
	err      error
	stderr   *limitedBuffer
	stopOnce sync.Once
	started  bool // the runtime was started: done will be closed
	// ShiftedRootfs: the rootfs is an idmapped mount, so image files keep their owners inside.
	ShiftedRootfs bool
	rootfsMount   string
}

// Start creates and starts a container. It returns once the container's namespace was
// configured and checked (the evidence is in Container.Evidence) and its process started,
// or with an error naming the container and carrying the runtime's own message.
func (r *Run) Start(ctx context.Context, cfg ContainerConfig) (_ *Container, err error) {
	r.mu.Lock()
	r.seq++
	id := fmt.Sprintf("%s%s-%s-%d", Prefix, r.ID, cfg.Role, r.seq)
	r.mu.Unlock()
	c := &Container{run: r, ID: id, Role: cfg.Role, cg: cgroupTree{path: r.cg.path + "/" + id}, done: make(chan struct{}), stderr: &limitedBuffer{max: 8 << 10}}
	defer func() {
		if err != nil {
			c.Destroy(context.Background())
		}
	}()
	if c.UIDs, err = r.h.ranges.Allocate(id); err != nil {
		return nil, err
	}
	c.bundle = filepath.Join(r.h.cfg.RunDir, "bundles", id)
	if err = os.Mkdir(c.bundle, 0o711); err != nil {
		return nil, fmt.Errorf("bundle for %s: %w", id, err)
	}
	spec, err := Spec(Profile{
		Role: cfg.Role, Rootfs: cfg.Rootfs, Args: cfg.Args, Env: cfg.Env, Cwd: cfg.Cwd, Hostname: string(cfg.Role),
		UIDs: c.UIDs, SharedGID: r.shared.Base, Workspace: cfg.Workspace, Bundle: cfg.Bundle, Runner: cfg.Runner,
		Extra: cfg.Extra, Limits: cfg.Limits, CgroupsPath: c.cg.path, Devices: cfg.Devices,
	})
	if err != nil {
		return nil, err
	}
	if err = checkMountpoints(cfg.Rootfs, spec.Mounts); err != nil {
		return nil, err
	}
	// The rootfs: an idmapped read-only view of the store's, where the kernel allows it.
	if mnt := filepath.Join(c.bundle, "rootfs"); shiftedRootfs(cfg.Rootfs, mnt, spec.Linux.UIDMappings, spec.Linux.GIDMappings) == nil {
		c.rootfsMount, c.ShiftedRootfs = mnt, true
		spec.Root.Path = mnt
	}
	evidencePath := filepath.Join(c.bundle, "netns.json")
	hook := r.h.hookSpec(cfg.Role, r.gateway, evidencePath, c.cg.path)
	spec.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{hook}}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err = os.WriteFile(filepath.Join(c.bundle, "config.json"), data, 0o600); err != nil {
		return nil, err
	}
	pio, err := runc.NewPipeIO(int(c.UIDs.Base+AgentUID), int(r.shared.Base))
	if err != nil {
		return nil, fmt.Errorf("stdio pipes for %s: %w", id, err)
	}
	pio.Stdin().Close() // the container reads EOF: nothing from the host is passed in
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
	go func() {
		status, err := r.h.Runtime.Run(id, c.bundle, pio)
		pio.Close()
		copies.Wait()
		c.exit, c.err = status, err
		close(c.done)
	}()
	// Wait until the hook has recorded the namespace and the runtime has registered the container
	// (then its process is being started and every runtime verb knows it), or the runtime gave up.
	for {
		if b, rerr := os.ReadFile(evidencePath); rerr == nil && len(b) > 0 && r.h.Runtime.registered(id) {
			if uerr := json.Unmarshal(b, &c.Evidence); uerr == nil {
				if aerr := checkAirGap(cfg.Role, c.Evidence); aerr != nil {
					return nil, fmt.Errorf("container %s: %w", id, aerr)
				}
				return c, nil
			}
		}
		select {
		case <-c.done:
			if c.err == nil && c.exit == 0 && c.Evidence.Names == nil {
				if b, rerr := os.ReadFile(evidencePath); rerr == nil && json.Unmarshal(b, &c.Evidence) == nil {
					return c, nil // a command that finished before we looked
				}
			}
			msg := c.stderr.String()
			if c.err != nil {
				return nil, fmt.Errorf("container %s did not start: %v: %s", id, c.err, msg)
			}
			return nil, fmt.Errorf("container %s did not start (runtime exit %d): %s", id, c.exit, msg)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Pid is the container's init process on the host (the runtime writes it to the bundle's
// init.pid), or 0 if it is not known (yet).
func (c *Container) Pid() int {
	b, err := os.ReadFile(filepath.Join(c.bundle, "init.pid"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// Done is closed when the container has exited.
func (c *Container) Done() <-chan struct{} { return c.done }

// Wait returns the exit status. If ctx ends first, the container is killed. A failure of the
// runtime itself after the start (for example a command that does not exist, found by the
// runtime's init when it execs it) is an error carrying the runtime's message.
func (c *Container) Wait(ctx context.Context) (int, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		c.Kill()
		<-c.done
		if c.err == nil {
			return c.exit, fmt.Errorf("container %s killed: %w", c.ID, ctx.Err())
		}
	}
	if c.err == nil && c.exit != 0 {
		if msg := c.stderr.String(); strings.Contains(msg, "runc run failed") || strings.Contains(msg, "unable to start container process") {
			return c.exit, fmt.Errorf("container %s: the runtime could not run the command: %s", c.ID, runtimeMessage(msg))
		}
	}
	return c.exit, c.err
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

// Kill stops every process of the container: SIGKILL through the runtime, then through the
// cgroup (freeze, kill, thaw) for anything that escaped the runtime's view.
func (c *Container) Kill() error {
	err := c.run.h.Runtime.Kill(context.Background(), c.ID, syscall.SIGKILL)
	if kerr := c.cg.KillAll(5 * time.Second); kerr != nil {
		return kerr
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	return err
}

// Stats reads the container's cgroup counters (while it runs).
func (c *Container) Stats() (CgroupStats, error) { return c.cg.Stats() }

// Destroy kills the container if it runs and removes everything it had: runtime state, cgroup,
// its end of the gateway veth, bundle directory and UID range. It is safe to call twice.
func (c *Container) Destroy(ctx context.Context) error {
	var errs []error
	select {
	case <-c.done:
	default:
		if c.started {
			c.Kill()
			select {
			case <-c.done:
			case <-time.After(10 * time.Second):
				errs = append(errs, fmt.Errorf("container %s did not exit 10s after SIGKILL", c.ID))
			}
		}
	}
	c.stopOnce.Do(func() {
		// A foreground run deletes its own runtime state when the container exits; ask the
		// runtime only when that did not happen (the start failed, or the wait timed out).
		exitedCleanly := false
		select {
		case <-c.done:
			exitedCleanly = c.err == nil
		default:
		}
		if !exitedCleanly {
			if st, err := c.run.h.Runtime.State(ctx, c.ID); err == nil && st != nil {
				if err := c.run.h.Runtime.Delete(ctx, c.ID); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := c.cg.KillAll(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
		if err := c.cg.Remove(); err != nil {
			errs = append(errs, err)
		}
		if c.Role == RoleController {
			deleteGatewayLink(c.run.gateway)
		}
		bundleFree := true
		if c.rootfsMount != "" {
			if err := unmountRootfs(c.rootfsMount); err != nil {
				errs = append(errs, err)
				bundleFree = false // never recurse into a mounted image
			}
		}
		if c.bundle != "" && bundleFree {
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
	return errors.Join(errs...)
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
// cgroups, the gateway netns and the run's UID range.
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
	if err := r.cg.KillAll(5 * time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := r.cg.Remove(); err != nil {
		errs = append(errs, err)
	}
	removeRootIfEmpty()
	if err := netns.DeleteNamed(r.gateway); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("delete network namespace %s: %w", r.gateway, err))
	}
	if err := r.h.ranges.Release(r.shared); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Reaped lists what Reap removed.
type Reaped struct {
	Containers, Netns, Cgroups, Ranges, Bundles []string
}

func (r Reaped) Empty() bool {
	return len(r.Containers)+len(r.Netns)+len(r.Cgroups)+len(r.Ranges)+len(r.Bundles) == 0
}

// Reap removes what an earlier sealrun left behind (a crash, a killed daemon): runtime
// containers, gateway netns, cgroups under /sealrun, UID range records and bundles, all found
// by name. The daemon calls it at start, when nothing of its own is live.
func (h *Host) Reap(ctx context.Context) (Reaped, error) {
	var out Reaped
	var errs []error
	cs, err := h.Runtime.List(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range cs {
		if !strings.HasPrefix(c.ID, Prefix) {
			continue
		}
		h.Runtime.Kill(ctx, c.ID, syscall.SIGKILL)
		if err := h.Runtime.Delete(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
		out.Containers = append(out.Containers, c.ID)
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), Prefix) {
				if err := netns.DeleteNamed(e.Name()); err != nil {
					errs = append(errs, err)
				}
				out.Netns = append(out.Netns, e.Name())
			}
		}
	}
	seen := map[string]bool{}
	for _, mnt := range cgroupMounts() {
		entries, _ := os.ReadDir(filepath.Join(mnt, CgroupRoot))
		for _, e := range entries {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				t := cgroupTree{path: CgroupRoot + "/" + e.Name()}
				if err := t.KillAll(5 * time.Second); err != nil {
					errs = append(errs, err)
				}
				out.Cgroups = append(out.Cgroups, t.path)
			}
		}
	}
	if err := (cgroupTree{path: CgroupRoot}).Remove(); err != nil {
		errs = append(errs, err)
	}
	if owners, err := h.ranges.Owners(); err == nil {
		for rg, owner := range owners {
			h.ranges.Release(rg)
			out.Ranges = append(out.Ranges, owner)
		}
	}
	bundles := filepath.Join(h.cfg.RunDir, "bundles")
	if entries, err := os.ReadDir(bundles); err == nil {
		for _, e := range entries {
			if err := unmountRootfs(filepath.Join(bundles, e.Name(), "rootfs")); err != nil {
				errs = append(errs, err)
				continue // never recurse into a mounted image
			}
			os.RemoveAll(filepath.Join(bundles, e.Name()))
			out.Bundles = append(out.Bundles, e.Name())
		}
	}
	return out, errors.Join(errs...)
}

// checkMountpoints refuses a spec whose bind mounts would make the runtime create their mount
// point inside the image's rootfs: that rootfs is the store's, shared by every container, and is
// never written. Mount points under /tmp and /dev are on the container's own tmpfs.
func checkMountpoints(rootfs string, mounts []specs.Mount) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return fmt.Errorf("image rootfs %s: %w", rootfs, err)
	}
	defer root.Close()
	for _, m := range mounts {
		if m.Type != "bind" || strings.HasPrefix(m.Destination, "/tmp/") || strings.HasPrefix(m.Destination, "/dev/") {
			continue
		}
		if _, err := root.Lstat(strings.TrimPrefix(m.Destination, "/")); err != nil {
			return fmt.Errorf("the image has no %s to mount over; sealrun never writes into an image's rootfs, so the image must contain it (images from sealrun images build-local do)", m.Destination)
		}
	}
	return nil
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
