package sandbox

// A container's life: its spec (profile.go), bundle and rootfs, the runtime's start with the
// network hook (netnshook), readiness, wait, kill, stats and teardown.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	runc "github.com/containerd/go-runc"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

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
	// Terminal gives the container's process a terminal (terminal_linux.go), Cols x Rows at
	// first (0: 80x24): everything it shows, and the runtime's own messages, arrive on Stdout;
	// Container.Console writes its input and sets its size. Stdin and Stderr are then unused.
	Terminal   bool
	Cols, Rows int
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
	launched time.Time // when the runtime was started
	bundle   string
	cg       cgroup.Tree // the wrapper
	leaf     cgroup.Tree // the runtime's
	Evidence NetnsEvidence
	pid      int
	// seccompKey: the key of its seccomp profile's compiled program under crun (seccompcache_linux.go).
	seccompKey string
	stdin      io.WriteCloser
	console    *os.File // the terminal's master (ContainerConfig.Terminal)
	// consoleReady is closed once crun has sent the terminal (console and consoleErr set).
	consoleReady chan struct{}
	consoleErr   error
	oom          *cgroup.OOMWatch // v1

	done     chan struct{}
	exit     int
	err      error
	stderr   *limitedBuffer
	stopOnce sync.Once
	started  bool // the runtime was started: done will be closed
	ranOnce  sync.Once
	ran      bool
	// ShiftedRootfs: the rootfs is an idmapped mount, so image files keep their owners inside.
	ShiftedRootfs bool
	rootfsMounts  []string // unmounted in order: the overlays of mount sources, the rootfs overlay, the idmapped image
	pauseMu       sync.Mutex
	paused        bool // paused through the runtime (gVisor: runtimePause)
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
	c := &Container{run: r, ID: id, Role: cfg.Role, rt: r.h.RuntimeFor(cfg.Role), cg: cgroup.Tree{Path: r.cg.Path + "/" + id}, done: make(chan struct{}), stderr: &limitedBuffer{max: 8 << 10}}
	c.leaf = cgroup.Tree{Path: c.cg.Path + "/" + runtimeLeaf}
	defer func() {
		if err != nil {
			c.Destroy(context.Background())
		}
	}()
	spec, err := c.makeSpec(cfg)
	if err != nil {
		return nil, err
	}
	evidencePath, err := c.makeBundle(cfg, spec)
	if err != nil {
		return nil, err
	}
	launched, err := c.launch(cfg)
	if err != nil {
		return nil, err
	}
	c.Phases.Prepare, c.launched = launched.Sub(began), launched
	if err = c.awaitReady(ctx, evidencePath, launched); err != nil {
		return nil, err
	}
	if c.consoleReady != nil {
		select {
		case <-c.consoleReady:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if c.consoleErr != nil {
			return nil, infra(id, "terminal", c.consoleErr)
		}
	}
	return c, nil
}

// makeSpec builds the container's OCI spec from its role's profile and creates its wrapper
// cgroup (with, on cgroup v2, sealrun's device filter on it).
func (c *Container) makeSpec(cfg ContainerConfig) (*specs.Spec, error) {
	r, id := c.run, c.ID
	spec, err := Spec(Profile{
		Role: cfg.Role, Rootfs: cfg.Rootfs, Args: cfg.Args, Env: cfg.Env, Cwd: cfg.Cwd, Hostname: string(cfg.Role),
		UIDs: IDRange{Base: RangeBase, Size: RangeSize}, SharedGID: r.shared.Base, Workspace: cfg.Workspace, Bundle: cfg.Bundle, Runner: cfg.Runner,
		Extra: cfg.Extra, Limits: cfg.Limits, CgroupsPath: c.leaf.Path, Devices: cfg.Devices,
	})
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", id, badConfig(err))
	}
	if cfg.Terminal && c.rt.Kind == KindRunsc {
		return nil, fmt.Errorf("container %s: %w", id, badConfig(fmt.Errorf("the %s gets a terminal but runs under gVisor (%s), which sealrun gives none; run this role with runc or crun", cfg.Role, c.rt.VersionLine)))
	}
	if cfg.Terminal {
		spec.Process.Terminal = true
	}
	if c.rt.Kind == KindRunsc && len(cfg.Devices) > 0 {
		// Refused, never weakened: a GPU under gVisor needs its nvproxy, which sealrun does not
		// wire (and Debian's runsc predates).
		return nil, fmt.Errorf("container %s: %w", id, badConfig(fmt.Errorf("the %s gets devices (%s ...) but runs under gVisor (%s), which sealrun does not give devices to; run this role with runc or crun (runtimes.%s in sealrun.toml)", cfg.Role, cfg.Devices[0].Path, c.rt.VersionLine, cfg.Role)))
	}
	if err := c.cg.Create(r.h.placement.Base); err != nil {
		return nil, infra(id, "create cgroup", err)
	}
	if c.rt.Kind == KindRunsc {
		// Under gVisor the pids limit is sealrun's, on pidsCgroup, where whether it was reached
		// stays readable after the container ended (PidsLimitEnded), and counts gVisor's host
		// tasks (runscHostTasks).
		spec.Linux.Resources.Pids = nil
		if err := c.pidsCgroup().SetPidsMax(runscHostTasks(cfg.Limits.WithDefaults().Pids)); err != nil {
			return nil, infra(id, "pids limit", err)
		}
	}
	// sealrun writes the spec's device rules itself on the container's own cgroup, above the
	// runtime's leaf, which can gain nothing beyond them: on v2 always (its eBPF program), and
	// on v1 under runsc, which leaves a v1 device cgroup as it finds it (allowing everything).
	if cgroup.Unified() || c.rt.Kind == KindRunsc {
		rules, rerr := cgroup.AllowRules(spec.Linux.Resources.Devices)
		if rerr == nil && cgroup.Unified() {
			rerr = cgroup.AttachDeviceFilter(c.cg.Dir(), rules)
		} else if rerr == nil {
			rerr = cgroup.LimitDevicesV1(c.cg.Path, rules)
		}
		if rerr != nil {
			return nil, infra(id, "device filter", rerr)
		}
	}
	return spec, nil
}

// makeBundle makes the container's bundle: its UID range, the idmapped rootfs under the layer of
// mount targets the image lacks, read-only overlays of its mount sources, the network hook and
// config.json. It returns the path the hook records the namespace's evidence at.
func (c *Container) makeBundle(cfg ContainerConfig, spec *specs.Spec) (string, error) {
	r, id := c.run, c.ID
	targets, err := resolveMountTargets(cfg.Rootfs, spec.Mounts, c.rt.Kind == KindRunsc)
	if err == nil {
		targets, err = addSymlinks(targets, cfg.Rootfs, cfg.Symlinks)
	}
	if err != nil {
		return "", fmt.Errorf("container %s: %w", id, badConfig(err))
	}
	// Validated with a placeholder range; the container's own is allocated only now.
	if c.UIDs, err = r.h.ranges.Allocate(id); err != nil {
		return "", infra(id, "allocate UID range", err)
	}
	spec.Linux.UIDMappings, spec.Linux.GIDMappings = idMappings(c.UIDs, r.shared.Base)
	if c.rt.Kind == KindRunsc {
		spec.Linux.GIDMappings = runscGIDMappings(c.UIDs, r.shared.Base)
		spec.Process.User.GID = 0
	}
	c.bundle = filepath.Join(r.h.cfg.RunDir, "bundles", id)
	if err = os.Mkdir(c.bundle, 0o711); err != nil {
		return "", infra(id, "create bundle", err)
	}
	if err := c.mountRootfs(cfg, spec, targets); err != nil {
		return "", err
	}
	hidden, err := hideSources(c.bundle, spec.Mounts)
	c.rootfsMounts = append(hidden, c.rootfsMounts...)
	if err != nil {
		return "", infra(id, "mounts", err)
	}
	evidencePath := filepath.Join(c.bundle, "netns.json")
	hook := r.h.hookSpec(c.rt.Kind, cfg.Role, r.GatewayNetns(), evidencePath, c.leaf.Path)
	spec.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{hook}}
	if c.rt.marksStarts() {
		spec.Hooks.Poststart = []specs.Hook{r.h.startedHook(c.bundle)}
	}
	c.rt.adjustSpec(spec)
	c.seccompKey = c.rt.useCompiledSeccomp(spec)
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", err
	}
	if err = os.WriteFile(filepath.Join(c.bundle, "config.json"), data, 0o600); err != nil {
		return "", infra(id, "write bundle", err)
	}
	return evidencePath, nil
}

// mountRootfs mounts the container's rootfs in its bundle: an idmapped read-only view of the
// store's, under a layer holding the mount targets the image lacks (mounttargets_linux.go). The
// overlay is made for every image, the layer empty where nothing is missing: its mount shows no
// host path (hostpaths_linux.go).
func (c *Container) mountRootfs(cfg ContainerConfig, spec *specs.Spec, targets []mountTarget) error {
	r, id := c.run, c.ID
	var err error
	mnt := filepath.Join(c.bundle, "rootfs")
	imageMnt := filepath.Join(c.bundle, "image")
	serr := shiftRootfs(cfg.Rootfs, imageMnt, spec.Linux.UIDMappings, spec.Linux.GIDMappings)
	switch {
	case serr == nil:
		c.rootfsMounts, c.ShiftedRootfs = []string{imageMnt}, true
		spec.Root.Path = imageMnt
	case layerNeeded(targets):
		return infra(id, "idmapped rootfs", fmt.Errorf("%w; the image lacks mount targets (%s), which sealrun layers over an idmapped rootfs only", serr, describeTargets(targets)))
	case !r.h.cfg.AllowUnshiftedRootfs:
		return infra(id, "idmapped rootfs", fmt.Errorf("%w; image files would appear owned by nobody inside. Use a kernel (5.12+) and filesystem that can idmap mounts (sealrun doctor checks), or allow unshifted rootfs in the configuration", serr))
	}
	if c.ShiftedRootfs {
		layer := filepath.Join(c.bundle, "targets")
		if err = os.Mkdir(layer, 0o755); err == nil {
			err = makeTargetLayer(layer, cfg.Rootfs, targets, spec.Linux.UIDMappings, spec.Linux.GIDMappings)
		}
		if err != nil {
			return infra(id, "mount targets", err)
		}
		if err = os.Mkdir(mnt, 0o755); err != nil {
			return infra(id, "mount targets", err)
		}
		switch err = mountTargetOverlay(c.bundle, layer, imageMnt, mnt); {
		case err == nil:
			c.rootfsMounts = []string{mnt, imageMnt}
			spec.Root.Path = mnt
		case layerNeeded(targets):
			os.Remove(mnt)
			return infra(id, "mount targets", fmt.Errorf("the image lacks %s: %w", describeTargets(targets), err))
		default:
			// A kernel before 5.19 cannot overlay an idmapped mount: the plain idmapped rootfs,
			// whose mount names the store's path.
			os.Remove(mnt)
		}
	}
	return nil
}

// launch starts the runtime on the bundle, with the container's output copied to the caller's
// writers, and returns when it was launched. c.done is closed once the container has exited and
// its output has been drained.
func (c *Container) launch(cfg ContainerConfig) (time.Time, error) {
	r, id := c.run, c.ID
	var pio runc.IO
	var err error
	var sock *consoleSocket // crun's terminal
	var copies sync.WaitGroup
	copyOut := func(dst io.Writer, src io.Reader) {
		defer copies.Done()
		if dst == nil {
			dst = io.Discard
		}
		io.Copy(dst, src) // bounded: a 32 KiB buffer, streamed, never accumulated
	}
	if cfg.Terminal {
		// The runtime's own messages arrive on the terminal: the first of them are kept for
		// an error, as its stderr is otherwise.
		cfg.Stdout = io.MultiWriter(orDiscard(cfg.Stdout), c.stderr)
	}
	switch {
	case cfg.Terminal && c.rt.Kind == KindCrun:
		if sock, err = newConsoleSocket(); err != nil {
			return time.Time{}, infra(id, "console socket", err)
		}
		if pio, err = runc.NewNullIO(); err != nil {
			sock.Close()
			return time.Time{}, infra(id, "stdio", err)
		}
		c.consoleReady = make(chan struct{})
		copies.Add(1)
		go func() {
			m, rerr := sock.receive(r.h.cfg.StartTimeout)
			if cols, rows := cfg.Cols, cfg.Rows; rerr == nil && (cols == 0 || rows == 0) {
				rerr = SetWinsize(m, 80, 24)
			} else if rerr == nil {
				rerr = SetWinsize(m, cols, rows)
			}
			c.console, c.consoleErr = m, rerr
			close(c.consoleReady)
			if m == nil {
				copies.Done()
				return
			}
			copyOut(cfg.Stdout, ptyReader{m})
		}()
	case cfg.Terminal:
		var tio *ptyIO
		if tio, err = newPtyIO(cfg.Cols, cfg.Rows); err != nil {
			return time.Time{}, infra(id, "terminal", err)
		}
		pio, c.console = tio, tio.master
		copies.Add(1)
		go copyOut(cfg.Stdout, pio.Stdout())
	default:
		if pio, err = runc.NewPipeIO(int(c.UIDs.Base+AgentUID), int(r.shared.Base)); err != nil {
			return time.Time{}, infra(id, "stdio pipes", err)
		}
		if cfg.Stdin {
			c.stdin = pio.Stdin()
		} else {
			pio.Stdin().Close() // the container reads EOF: nothing from the host is passed in
		}
		copies.Add(2)
		go copyOut(cfg.Stdout, pio.Stdout())
		go copyOut(io.MultiWriter(c.stderr, orDiscard(cfg.Stderr)), pio.Stderr())
	}
	r.mu.Lock()
	r.live[id] = c
	r.mu.Unlock()
	c.started = true
	launched := time.Now()
	go func() {
		var status int
		var err error
		if sock != nil {
			status, err = c.rt.runConsole(id, c.bundle, pio, sock)
			sock.Close() // a runtime that failed before sending it: receive ends
		} else {
			status, err = c.rt.Run(id, c.bundle, pio)
		}
		// Only our copies of the write ends close here: the readers drain what the container
		// wrote up to its last byte and see EOF once every process holding a write end (the
		// container's, all gone with its pid namespace's init) has exited. Closing the read ends
		// before the copies finish loses the output's tail, or all of it (issue 28).
		if sc, ok := pio.(runc.StartCloser); ok {
			sc.CloseAfterStart()
		}
		if !waitTimeout(&copies, r.h.cfg.KillTimeout) && err == nil {
			err = fmt.Errorf("its output was still open %s after it exited (a process outside the container holds the pipe); output may be incomplete", r.h.cfg.KillTimeout)
		}
		pio.Close()
		copies.Wait()
		if sock != nil && c.console != nil {
			c.console.Close()
		}
		c.exit, c.err = status, err
		close(c.done)
	}()
	return launched, nil
}

// awaitReady waits until the container is ready, or the runtime gave up.
func (c *Container) awaitReady(ctx context.Context, evidencePath string, launched time.Time) error {
	r, id := c.run, c.ID
	// Wait until the hook has recorded the namespace and the init pid (written atomically, last)
	// and the runtime has registered the container (then every runtime verb knows it), or the
	// runtime gave up. The pid comes from the runtime's own state given to the hook: nothing
	// here reads a file the runtime writes later.
	readRecord := func() bool {
		b, rerr := os.ReadFile(evidencePath)
		if rerr != nil {
			return false
		}
		var rec airgap.Record
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
	// Polled finely for the first 100 ms, when a container is usually ready (every 250 µs:
	// a stat and a small read), then every millisecond.
	interval := func() time.Duration {
		if time.Since(launched) < 100*time.Millisecond {
			return 250 * time.Microsecond
		}
		return time.Millisecond
	}
	deadline := time.NewTimer(r.h.cfg.StartTimeout - time.Since(launched))
	defer deadline.Stop()
	for {
		if c.rt.registered(id) && readRecord() {
			if aerr := checkAirGap(c.Role, c.Evidence); aerr != nil {
				return infra(id, "air gap", aerr)
			}
			c.rt.keepCompiledSeccomp(id, c.seccompKey)
			r.mu.Lock()
			if r.evidence == nil {
				r.evidence = map[Role]NetnsEvidence{}
			}
			if _, ok := r.evidence[c.Role]; !ok {
				r.evidence[c.Role] = c.Evidence
			}
			r.mu.Unlock()
			c.oom = c.leaf.WatchOOM()
			return nil
		}
		select {
		case <-c.done:
			if c.err == nil && readRecord() {
				return nil // a command that finished before we looked (its exit is kept)
			}
			msg := c.stderr.String()
			if c.err != nil {
				return infra(id, "start", fmt.Errorf("%w: %v: %s", ErrNeverRan, c.err, msg))
			}
			return infra(id, "start", fmt.Errorf("%w: runtime exit %d: %s", ErrNeverRan, c.exit, msg))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			why := fmt.Errorf("not up after %s: the runtime never reported it registered (runtime state) with its network hook done; runtime output: %s", r.h.cfg.StartTimeout, strings.TrimSpace(c.stderr.String()))
			if !readRecord() || !c.Ran() {
				// The network hook had not finished (it runs before the process does), or the
				// start is not marked.
				why = fmt.Errorf("%w: %w", ErrNeverRan, why)
			}
			return infra(id, "start", why)
		case <-time.After(interval()):
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

// Console is the master of the container's terminal (nil unless ContainerConfig.Terminal):
// what is written to it is typed into the container, and SetWinsize on it resizes the
// container's terminal. It is closed once the container has exited; never close it.
func (c *Container) Console() *os.File { return c.console }

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
		if line := c.rt.execFailure(c.stderr.String()); line != "" {
			return c.exit, &CommandError{Container: c.ID, Message: line}
		}
	}
	if !c.Ran() {
		// The runtime never executed the process (its init failed after the network hook, or
		// it was killed before): whatever the status, nothing of the caller's ran.
		return c.exit, infra(c.ID, "start", fmt.Errorf("%w (the runtime exited %d): %s", ErrNeverRan, c.exit, strings.TrimSpace(runtimeMessage(c.stderr.String()))))
	}
	return c.exit, nil
}

// markedStart is when the runtime ran the container's poststart hook (its marker's time), where it
// marks starts and the bundle is still there (make bench's start phase).
func (c *Container) markedStart() (time.Time, bool) {
	fi, err := os.Stat(filepath.Join(c.bundle, startedMarker))
	if err != nil {
		return time.Time{}, false
	}
	return fi.ModTime(), true
}

// Ran reports whether the runtime executed the container's process: its poststart hook marked
// the bundle. Once the container has exited (Done) the answer is final (kept: read it before
// Destroy removes the bundle). Under a runtime whose starts are not marked (crun:
// Runtime.marksStarts) it is true.
func (c *Container) Ran() bool {
	if !c.rt.marksStarts() {
		return true // unknown (crun): as the runtime says
	}
	select {
	case <-c.done:
		c.ranOnce.Do(func() { _, c.ran = c.markedStart() })
		return c.ran
	default:
		_, ran := c.markedStart()
		return ran
	}
}

// execFailure is the runtime's line saying it could not execute the container's command (not
// found, not executable) in its stderr, or "": runc's message ("unable to start container
// process: exec: ..."), as every runtime may print it, then crun's or gVisor's own. Any other
// failure of the runtime's init is not the command's.
func (r *Runtime) execFailure(stderr string) string {
	switch {
	case strings.Contains(stderr, "container process: exec: ") || strings.Contains(stderr, "container process: exec /"):
		// runc's: the command not found or not executable, and nothing else of its init's
		// failures (those are the host's: ErrNeverRan).
		return runtimeMessage(stderr)
	case r.Kind == KindCrun:
		return crunExecFailure(stderr)
	case r.Kind == KindRunsc:
		return runscExecFailure(stderr)
	}
	return ""
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

// runscExecFailure finds gVisor's line for a command it could not execute: `error finding
// executable "x" in PATH [...]: no such file or directory`, or `failed to load /x: permission
// denied` (after "creating process: "), without the runtime's call chain before it.
func runscExecFailure(stderr string) string {
	for _, line := range strings.Split(stderr, "\n") {
		for _, p := range []string{"error finding executable ", "failed to load "} {
			if i := strings.Index(line, p); i >= 0 {
				return line[i:]
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
	// Under gVisor a SIGKILL goes through the cgroup only: its kill goes through its sandbox,
	// which a container busy at its limits may answer late, and the cgroup's SIGKILL ends the
	// sandbox, and with it every process of the container, at once.
	var err error
	if sig != syscall.SIGKILL || c.rt.Kind != KindRunsc {
		err = c.rt.Kill(kctx, c.ID, sig)
	}
	if sig == syscall.SIGKILL {
		if kerr := c.cg.KillAll(c.run.h.cfg.KillTimeout); kerr != nil {
			return infra(c.ID, "kill", kerr)
		}
	}
	if c.ended() {
		return nil
	}
	if err != nil && sig == syscall.SIGKILL && c.cg.Empty() {
		return nil // every process is gone; the runtime only had not noticed
	}
	return infra(c.ID, "kill", err)
}

// Freeze stops every process of the container where it is (cgroup freezer); Thaw resumes them.
// The deadline freezes the controller before killing it, so that nothing it does between the
// two counts.
//
// Under gVisor the sentry stops its own tasks (runsc pause): the cgroup freezer stops the
// sandbox's host processes one by one, its sentry and the stub processes its tasks run in, and
// a task caught between the two is killed by a SIGSEGV of gVisor's own making after the thaw
// (runner.TestPauseCycles: a shell forking under a few hundred freezes, under runsc only, and
// not once through runsc pause). A container that has ended has nothing to freeze or thaw.
func (c *Container) Freeze() error {
	if c.rt.Kind != KindRunsc {
		return infra(c.ID, "freeze", c.cg.Freeze())
	}
	return infra(c.ID, "freeze", c.runtimePause(true))
}

// Thaw resumes a frozen container.
func (c *Container) Thaw() error {
	if c.rt.Kind != KindRunsc {
		return infra(c.ID, "thaw", c.cg.Thaw())
	}
	return infra(c.ID, "thaw", c.runtimePause(false))
}

// RuntimePauseTimeout bounds runsc pause and resume (the runtime's process and its call to the
// sandbox).
const RuntimePauseTimeout = 10 * time.Second

// runtimePause pauses (or resumes) the container through its runtime, once: a container paused
// twice, or resumed while running, is left as it is; one that ended is no error.
func (c *Container) runtimePause(pause bool) error {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.paused == pause || c.ended() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), RuntimePauseTimeout)
	defer cancel()
	op := c.rt.Resume
	if pause {
		op = c.rt.Pause
	}
	if err := op(ctx, c.ID); err != nil {
		// It ended meanwhile: its runtime (runsc run) stops and deletes it as its process
		// exits, before Wait has seen the exit (which a loaded machine can take a while to).
		select {
		case <-c.done:
			return nil
		case <-time.After(2 * time.Second):
		}
		if st, serr := c.rt.State(ctx, c.ID); serr != nil || st.Status == "stopped" {
			return nil
		}
		return err
	}
	c.paused = pause
	return nil
}

// ended says whether the container's process has exited.
func (c *Container) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stats returns the container's cgroup counters, read from its wrapper cgroup: exact while it runs
// and after it exited, until Destroy.
func (c *Container) Stats() (cgroup.Stats, error) {
	st, err := c.cg.Stats()
	if err != nil {
		return st, infra(c.ID, "stats", err)
	}
	if c.oom.Seen() && st.OOMKills == 0 {
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

// PidsLimitEnded reports whether the container ended because it reached its pids limit: under
// gVisor, whose sandbox ends when it cannot make a host thread it needs (when it cannot make the
// stub process of a new process it fails the fork, ENOMEM; runc's kernel fails the one fork,
// EAGAIN, and the container goes on). The agent's fault, not the host's.
func (c *Container) PidsLimitEnded() bool {
	if c.rt.Kind != KindRunsc || !c.ended() {
		return false
	}
	return c.exit != 0 && c.pidsCgroup().PidsLimitHits() > 0
}

// pidsCgroup is where sealrun limits a gVisor container's tasks. On v2 the container's own
// cgroup: a refused fork counts in pids.events of the cgroup whose limit refused it and those
// above (since Linux 6.11; before, in the forking task's cgroup, which gVisor removes, so that
// the end is not named there, only seen). On v1 a refused fork counts only in the forking task's cgroup, the runtime's leaf,
// which gVisor removes when the container ends unless it found the leaf made (then it neither
// sets nor removes it, in that hierarchy): sealrun makes it in the pids hierarchy, and removes
// it with the container.
func (c *Container) pidsCgroup() cgroup.Tree {
	if cgroup.Unified() {
		return c.cg
	}
	return c.leaf
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
	c.stopOnce.Do(func() { errs = append(errs, c.teardown(ctx)...) })
	if len(errs) > 0 {
		return infra(c.ID, "destroy", errors.Join(errs...))
	}
	return nil
}

// waitTimeout waits for wg up to d and reports whether it finished.
// teardown removes, once, what the container had: its runtime state (when the runtime did not
// delete it), its cgroup, its end of the gateway veth, its rootfs mounts and bundle, its UID range.
func (c *Container) teardown(ctx context.Context) []error {
	var errs []error
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
		deleteGatewayLink(c.run.GatewayNetns())
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
	return errs
}

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
