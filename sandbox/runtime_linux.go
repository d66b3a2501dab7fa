package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	runc "github.com/containerd/go-runc"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// Runtime drives an OCI runtime binary (runc; crun where the cgroup mode allows) through
// go-runc, with its state under its own root so that sealrun's containers never mix with others.
type Runtime struct {
	rc   *runc.Runc
	Path string
	root string
}

// NewRuntime finds the runtime binary (a name is looked up in PATH) and keeps its state in root.
func NewRuntime(binary, root string) (*Runtime, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return nil, fmt.Errorf("OCI runtime %q not found: %w; install it (apt-get install runc, or make deps) or set the runtime path", binary, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("runtime state %s: %w", root, err)
	}
	return &Runtime{rc: &runc.Runc{Command: path, Root: root, PdeathSignal: syscall.SIGKILL}, Path: path, root: root}, nil
}

// registered reports whether the runtime has saved the state of container id (runc writes it
// once the container's hooks have run; until then list and state do not know it).
func (r *Runtime) registered(id string) bool {
	_, err := os.Stat(filepath.Join(r.root, id, "state.json"))
	return err == nil
}

// Version returns the runtime's version line ("runc 1.1.5").
func (r *Runtime) Version(ctx context.Context) (string, error) {
	v, err := r.rc.Version(ctx)
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", r.Path, err)
	}
	return v.Runc, nil
}

// wrap names the container and keeps the runtime's own message.
func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("runtime %s %s: %w", op, id, err)
}

// Create creates a container from a bundle without starting it.
func (r *Runtime) Create(ctx context.Context, id, bundle string, io runc.IO) error {
	return wrap("create", id, r.rc.Create(ctx, id, bundle, &runc.CreateOpts{IO: io, PidFile: filepath.Join(bundle, "init.pid")}))
}

// Start starts a created container.
func (r *Runtime) Start(ctx context.Context, id string) error {
	return wrap("start", id, r.rc.Start(ctx, id))
}

// Exec runs a further process in a running container.
func (r *Runtime) Exec(ctx context.Context, id string, p specs.Process, io runc.IO) error {
	return wrap("exec", id, r.rc.Exec(ctx, id, p, &runc.ExecOpts{IO: io}))
}

// Kill signals the container's processes.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal) error {
	return wrap("kill", id, r.rc.Kill(ctx, id, int(sig), &runc.KillOpts{All: true}))
}

// Delete removes the container's runtime state (forcibly: it kills what is left).
func (r *Runtime) Delete(ctx context.Context, id string) error {
	return wrap("delete", id, r.rc.Delete(ctx, id, &runc.DeleteOpts{Force: true}))
}

// State reports a container's status and init pid.
func (r *Runtime) State(ctx context.Context, id string) (*runc.Container, error) {
	c, err := r.rc.State(ctx, id)
	return c, wrap("state", id, err)
}

// List lists the containers in this runtime root.
func (r *Runtime) List(ctx context.Context) ([]*runc.Container, error) {
	cs, err := r.rc.List(ctx)
	return cs, wrap("list", "", err)
}

// Run creates, starts and waits for a container in the foreground (its init pid in the bundle's
// init.pid): the runtime process stays
// its parent and reaps it, so its exit status comes back exactly and no reaper is needed in
// this process. The runtime deletes the container's state when it exits. The context is not
// used to kill the runtime (that would orphan the container): callers stop a container with
// Kill, and Run returns once it is gone.
func (r *Runtime) Run(id, bundle string, io runc.IO) (int, error) {
	status, err := r.rc.Run(context.Background(), id, bundle, &runc.CreateOpts{IO: io, PidFile: filepath.Join(bundle, "init.pid")})
	var ee *runc.ExitError
	if errors.As(err, &ee) {
		return ee.Status, nil
	}
	if err != nil {
		return -1, wrap("run", id, err)
	}
	return status, nil
}

// --- The network hook --------------------------------------------------------------------

// HookArg is argv[0] of the createRuntime hook when no dedicated hook binary is installed: the
// binary embedding the sandbox re-executes itself under this name, and every such main calls
// RunHookIfRequested first.
const HookArg = "sealrun-netns-hook"

// HookBinary is the name of the dedicated hook binary, looked for next to the running binary.
const HookBinary = "sealrun-netns-hook"

// findHook returns how to run the network hook: the given binary, the dedicated binary next to
// this one, or (fallback) this binary re-executed under HookArg.
func findHook(configured string) (path string, argv0 string, err error) {
	if configured != "" {
		if _, err := os.Stat(configured); err != nil {
			return "", "", fmt.Errorf("network hook %s: %w", configured, err)
		}
		return configured, HookBinary, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("find sealrun's own binary for the network hook: %w", err)
	}
	if p := filepath.Join(filepath.Dir(self), HookBinary); p != self {
		if _, err := os.Stat(p); err == nil {
			return p, HookBinary, nil
		}
	}
	return self, HookArg, nil
}

// hookSpec is the createRuntime hook that configures and checks a container's netns.
func (h *Host) hookSpec(role Role, gatewayNetns, evidencePath, cgroupPath string) specs.Hook {
	timeout := 30
	return specs.Hook{Path: h.hookPath, Args: []string{h.hookArgv0, string(role), gatewayNetns, evidencePath, cgroupPath}, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, Timeout: &timeout}
}

// RunHookIfRequested runs the network hook and exits when this process was started as one.
// Call it first thing in main (and in TestMain).
func RunHookIfRequested() {
	if len(os.Args) < 1 || os.Args[0] != HookArg {
		return
	}
	if err := netnshook.Main(os.Args[1:], os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "sealrun network hook: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// --- Output ------------------------------------------------------------------------------

// limitedBuffer keeps at most max bytes and counts the rest.
type limitedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	room := l.max - l.buf.Len()
	if room > len(p) {
		room = len(p)
	}
	if room > 0 {
		l.buf.Write(p[:room])
	}
	l.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	s := l.buf.String()
	if l.dropped > 0 {
		s += fmt.Sprintf("\n[... %d more bytes not kept]", l.dropped)
	}
	return strings.TrimRight(s, "\n")
}
