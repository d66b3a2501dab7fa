package runner

// Runner containers started ahead of their calls. Starting a container is most of a compute
// call's cost (under runc, tens of milliseconds: the runtime's own start, its seccomp
// compilation, the network hook): so between two calls the service starts the next call's
// container, exactly as a call's own, with the shim waiting for its call on stdin (`ShimPath
// _await`), which only the service can write. A call takes the waiting container, points its
// output at the call's, writes the call (EncodeCall) and closes stdin: the shim then changes to
// the call's directory, adds the call's variables and executes the command, which reads
// end-of-file on stdin as before. Nothing of the agent's runs in it before that: the container
// is as fresh as one started for the call (its own rootfs overlay, /tmp, namespaces and cgroup,
// used by one call only), and its limits, GPUs and mounts are the run's, the same for every call.
//
// Where there is no waiting container (the run ended, or the service starts none ahead), the
// call starts its own the way it always could. One that did not start, ended while it waited or
// could not be handed the call is not used either: that counts as the call's first start, as one
// that never ran (the audit entry's start_retried says why), and a second failure is the host's.

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/sandbox"
)

// waiting is a runner container started for the next call.
type waiting struct {
	ready chan struct{} // closed once started (c set) or failed (err set)
	c     *sandbox.Container
	err   error
	out   *switchWriter
}

// switchWriter writes to the writer set last (nothing before one is set): a waiting container's
// output goes to its call's once the call takes it.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

// callConfig is the container of a call: the run's image, workspace, limits, GPUs and the shim,
// running args.
func (s *Service) callConfig(args, env []string, out io.Writer) sandbox.ContainerConfig {
	gpu := s.o.gpu
	if gpu == nil {
		gpu = &sandbox.GPUEdits{}
	}
	return sandbox.ContainerConfig{
		// The shim changes to cwd as the agent's user: the runtime itself (as the container's
		// root, which cannot search the group-only workspace) never resolves it.
		Role: sandbox.RoleRunner, Rootfs: s.o.rootfs, Workspace: s.o.workspace, Cwd: sandbox.WorkspacePath,
		Args: args, Env: append(append(append([]string{}, callEnv...), gpu.Env...), env...), Limits: s.o.limits, Devices: gpu.Devices, Symlinks: gpu.Symlinks,
		Extra:  append([]specs.Mount{{Destination: ShimPath, Type: "bind", Source: s.o.shim, Options: []string{"rbind", "ro", "nosuid", "nodev"}}}, gpu.Mounts...),
		Stdout: out, Stderr: out,
	}
}

// warmUp starts the next call's container in the background, unless one is there or starting,
// or the run is over, or the service starts none ahead (withoutWarm).
func (s *Service) warmUp() {
	if s.o.noWarm {
		return
	}
	s.mu.Lock()
	if s.over || s.next != nil {
		s.mu.Unlock()
		return
	}
	w := &waiting{ready: make(chan struct{}), out: &switchWriter{}}
	s.next = w
	s.warming.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.warming.Done()
		cfg := s.callConfig([]string{ShimPath, "_await"}, nil, w.out)
		cfg.Stdin = true
		// Whoever takes it from s.next (a call, or dropWaiting) owns it from then on.
		w.c, w.err = s.sb.Start(context.Background(), cfg)
		close(w.ready)
	}()
}

// startWaiting hands the call to the container started ahead for it (warm_linux.go): the
// container, or nil and no error when there is none (the call starts its own), or nil and why
// the one meant for it cannot take it (it failed to start, ended while it waited, or could not be
// handed the call: the host's; the container is gone and the call starts its own).
func (s *Service) startWaiting(ctx context.Context, cs *callState, req CallRequest, cwd string, out io.Writer) (*sandbox.Container, error) {
	s.mu.Lock()
	w := s.next
	s.next = nil
	s.mu.Unlock()
	if w == nil {
		return nil, nil
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		go func() { // the client went away: the container is not this call's
			<-w.ready
			if w.c != nil {
				s.destroy(w.c)
			}
		}()
		return nil, nil
	}
	if w.err != nil {
		return nil, fmt.Errorf("the container started ahead for the call: %w", w.err)
	}
	select {
	case <-w.c.Done(): // nothing of the agent's ran in it
		code, err := w.c.Wait(context.Background())
		s.destroy(w.c)
		return nil, fmt.Errorf("the container started ahead for the call, %s, ended before the call came (exit %d, %v)", w.c.ID, code, err)
	default:
	}
	return s.handOver(w, req, cwd, cs.seq, out)
}

// handOver gives a waiting container its call; on an error the container is destroyed (nothing
// of the agent's ran) and the caller starts one of its own.
func (s *Service) handOver(w *waiting, req CallRequest, cwd string, seq int, out io.Writer) (*sandbox.Container, error) {
	w.out.set(out)
	env := append([]string{fmt.Sprintf("SEALRUN_CALL=%d", seq)}, req.Env...)
	in := w.c.Stdin()
	if f, ok := in.(interface{ SetWriteDeadline(time.Time) error }); ok {
		// A call larger than the pipe holds waits for the shim to read it: never for long.
		f.SetWriteDeadline(time.Now().Add(handOverTimeout))
	}
	_, err := in.Write(EncodeCall(cwd, env, req.Argv))
	if err == nil {
		err = in.Close() // the shim runs the call once it reads the end
	}
	if err != nil {
		// Killed before its stdin is closed (Destroy kills first): a shim that read part of the
		// call never takes that part for the whole, which might be a call of its own.
		w.out.set(nil)
		s.destroy(w.c)
		return nil, fmt.Errorf("hand the call to the container started ahead for it, %s: %w", w.c.ID, err)
	}
	return w.c, nil
}

// handOverTimeout bounds writing a call to its waiting shim.
const handOverTimeout = 10 * time.Second

// dropWaiting destroys the waiting container, once a start under way has ended.
func (s *Service) dropWaiting() {
	s.mu.Lock()
	w := s.next
	s.next = nil
	s.mu.Unlock()
	if w != nil {
		<-w.ready
		if w.c != nil {
			s.destroy(w.c)
		}
	}
	s.warming.Wait()
}

// destroy removes a container no call ran in; a failure is the host's.
func (s *Service) destroy(c *sandbox.Container) {
	if err := c.Destroy(context.Background()); err != nil && s.o.onInfra != nil {
		s.o.onInfra(err)
	}
}

// withoutWarm makes a service that starts no container ahead of a call: every call starts its
// own (the benchmark's cold calls).
func withoutWarm() Option { return func(o *options) { o.noWarm = true } }

// settle waits until no call is being handled (its teardown and the next start included) and
// no container is starting ahead of one: the benchmark times nothing beside a start.
func (s *Service) settle() {
	for s.handling.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	s.warming.Wait()
}
