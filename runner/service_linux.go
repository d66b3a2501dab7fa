package runner

// The runner's service: its options, the agent socket and the routing of verbs (PROTOCOL.md).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/inflight"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
)

// Sandbox is what the service needs of a run's sandbox (a *sandbox.Run).
type Sandbox interface {
	Start(ctx context.Context, cfg sandbox.ContainerConfig) (*sandbox.Container, error)
}

// Judge answers submit, promote, finalize and history (the grader's service, wired by the
// daemon). Each returns the text for the agent's stdout; a *Refusal, or any error with a
// RefusalReason() string method (the grader's own refusals, which do not import this package),
// is shown to the agent as the refusal and exits 125.
type Judge interface {
	Submit(ctx context.Context, hostDir string) (string, error)
	Promote(ctx context.Context, id string) (string, error)
	Finalize(ctx context.Context, id string) (string, error)
	History(ctx context.Context) (string, error)
}

// Refusal is a request the service (or the Judge) declines, with the reason the agent sees.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refusef(format string, args ...any) *Refusal {
	return &Refusal{Reason: fmt.Sprintf(format, args...)}
}

// ShimPath is where the call's shim is mounted inside runner containers: every call runs as
// `ShimPath _exec --cwd DIR -- ARGV...`, which changes to DIR, makes stderr the same pipe as
// stdout (so the two keep their order) and execs the command. The shim is ExecShim beside the
// static runner binary where it is installed, else that binary itself (its `_exec` does the
// same, slower to start).
const ShimPath = "/tmp/.sealrun/runner"

// ExecShim is the name of the call shim (cmd/runner-exec, a small static C program) looked for
// beside the runner binary Config.Shim names.
const ExecShim = "runner-exec"

// ShimFor is the host path of the shim for the static runner binary at runner: ExecShim beside
// it when that is an executable regular file, else the runner binary.
func ShimFor(runner string) string {
	if p := fileio.Beside(runner, ExecShim); p != "" {
		return p
	}
	return runner
}

// Config is what a run's service cannot be made without.
type Config struct {
	Clock     *policy.RunClock // the run's budget clock
	Image     string           // the runner image's rootfs in the store
	Workspace string           // the run's workspace on the host, mounted rw at /workspace
	// Shim is the host path of the static runner binary: calls start through ExecShim beside it
	// where that is installed (make install puts both in one directory).
	Shim     string
	Audit    *audit.Log // the run's audit log
	CallsDir string     // where calls/<n>.log go
}

type options struct {
	clock     *policy.RunClock
	rootfs    string
	workspace string
	shim      string
	gpu       *sandbox.GPUEdits
	limits    sandbox.Limits
	log       *audit.Log
	callsDir  string
	logCap    int64
	judge     Judge
	rate      float64
	burst     int
	wall      func() time.Time
	onInfra   func(error)
	answered  func(verb string)
	noWarm    bool // start no container ahead of a call (warm_linux.go): the benchmark's cold calls
}

// Option configures a Service.
type Option func(*options)

// WithGPUs gives every call the run's GPUs as their CDI specs say: device nodes, the driver's
// mounts, environment, and the links their hooks would make (sandbox.GPUEdits).
func WithGPUs(g *sandbox.GPUEdits) Option {
	return func(o *options) { o.gpu = g }
}

// WithLimits are the runner containers' cgroup and tmpfs limits (defaults per field).
func WithLimits(l sandbox.Limits) Option { return func(o *options) { o.limits = l } }

// WithLogCap caps each calls/<n>.log (default 64 MiB); output beyond it is streamed and hashed
// but not kept, and the log says so.
func WithLogCap(n int64) Option { return func(o *options) { o.logCap = n } }

// WithJudge answers submit/promote/finalize/history.
func WithJudge(j Judge) Option { return func(o *options) { o.judge = j } }

// WithRate limits requests: sustained per second and burst (default 10/s, burst 20).
func WithRate(perSecond float64, burst int) Option {
	return func(o *options) { o.rate, o.burst = perSecond, burst }
}

// WithWallClock is the wall clock of audit timestamps (default time.Now).
func WithWallClock(now func() time.Time) Option { return func(o *options) { o.wall = now } }

// WithInfraHandler is called with every infrastructure error a call meets (the daemon marks the
// run invalid).
func WithInfraHandler(f func(error)) Option { return func(o *options) { o.onInfra = f } }

// WithAnswered is called after the agent has been sent a successful answer to submit, promote,
// finalize or history: the daemon ends the run on "finalize" only once the agent has its
// confirmation.
func WithAnswered(f func(verb string)) Option { return func(o *options) { o.answered = f } }

// Service serves one run's agent socket. It is an http.Handler.
type Service struct {
	o       options
	sb      Sandbox
	ws      *os.Root
	mux     *http.ServeMux
	limiter *bucket

	mu      sync.Mutex
	seq     int
	running *callState
	done    int
	over    bool           // the run has ended: every verb but time_left and status is refused
	paused  bool           // the run is paused (Pause): compute calls are refused
	next    *waiting       // the next call's container, started ahead (warm_linux.go)
	warming sync.WaitGroup // its start under way
	// handling counts calls being handled, until the next one's container is being started
	// (settle).
	handling atomic.Int32
}

// NewService makes the service of the run run; opts are what is optional. Every field of cfg is
// needed: one missing is an error naming it.
func NewService(run Sandbox, cfg Config, opts ...Option) (*Service, error) {
	o := options{clock: cfg.Clock, rootfs: cfg.Image, workspace: cfg.Workspace, shim: cfg.Shim, log: cfg.Audit, callsDir: cfg.CallsDir,
		logCap: 64 << 20, rate: 10, burst: 20, wall: time.Now}
	for _, f := range opts {
		f(&o)
	}
	var missing []string
	for _, req := range []struct {
		name string
		ok   bool
	}{{"sandbox", run != nil}, {"clock", o.clock != nil}, {"image", o.rootfs != ""}, {"workspace", o.workspace != ""}, {"shim", o.shim != ""}, {"audit log", o.log != nil}, {"calls dir", o.callsDir != ""}} {
		if !req.ok {
			missing = append(missing, req.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("runner service: missing %s", strings.Join(missing, ", "))
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fmt.Errorf("runner service: %w", err)
	}
	ws, err := os.OpenRoot(o.workspace)
	if err != nil {
		return nil, fmt.Errorf("runner service: workspace: %w", err)
	}
	if err := os.MkdirAll(o.callsDir, 0o700); err != nil {
		return nil, fmt.Errorf("runner service: calls directory: %w", err)
	}
	o.shim = ShimFor(o.shim)
	s := &Service{o: o, sb: run, ws: ws, mux: http.NewServeMux(), limiter: newBucket(o.rate, o.burst, time.Now)}
	s.mux.HandleFunc("POST "+PathCall, s.handleCall)
	s.mux.HandleFunc("POST "+PathTimeLeft, s.handleTimeLeft)
	s.mux.HandleFunc("POST "+PathStatus, s.handleStatus)
	s.mux.HandleFunc("POST "+PathSubmit, s.judgeVerb("submit"))
	s.mux.HandleFunc("POST "+PathPromote, s.judgeVerb("promote"))
	s.mux.HandleFunc("POST "+PathFinalize, s.judgeVerb("finalize"))
	s.mux.HandleFunc("POST "+PathHistory, s.judgeVerb("history"))
	return s, nil
}

// End marks the run over: compute and the judge's verbs are refused from now on; time_left and
// status still answer.
func (s *Service) End() {
	s.mu.Lock()
	s.over = true
	s.mu.Unlock()
	s.dropWaiting()
}

// Close removes the container waiting for a next call and releases the workspace handle.
func (s *Service) Close() error {
	s.End()
	return s.ws.Close()
}

// ServeHTTP bounds and rate-limits every request, then routes it.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.limiter.take() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests: the agent socket takes about 10 requests a second; slow down", http.StatusTooManyRequests)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	if _, pattern := s.mux.Handler(r); pattern == "" {
		http.Error(w, fmt.Sprintf("unknown request %s %s: the runner verbs are call, time_left, status, submit, promote, finalize and history (runner --help)", r.Method, r.URL.Path), http.StatusNotFound)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Listen creates the run's agent socket at path: a unix socket the controller's agent user can
// use (mode 0660, group gid: the run's shared GID; the agent runs with that group) and nobody
// else on the host but root. A stale file at path is replaced. (The socket is born root-owned
// and not writable by others, so nobody can connect before its group and mode are set; the
// process-wide umask is left alone.)
func Listen(path string, gid int) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	if err := os.Chown(path, 0, gid); err != nil {
		l.Close()
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, fmt.Errorf("agent socket %s: %w", path, err)
	}
	return l, nil
}

// Serve answers the agent socket until l is closed or ctx ends (then it returns nil).
func (s *Service) Serve(ctx context.Context, l net.Listener) error {
	s.warmUp() // the first call's container
	calls := inflight.New()
	srv := &http.Server{Handler: calls.Wrap(s), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(l)
	// Every request under way returns before Serve does: a call the end cut short appends its
	// audit entry before the run's end reads the log (a fresh CI's cancelled run had one
	// appended after its transcript was written, and could never be gathered).
	if left := calls.Close(DrainTimeout); left > 0 && s.o.onInfra != nil {
		s.o.onInfra(fmt.Errorf("%d agent socket request(s) still running %s after the socket closed", left, DrainTimeout))
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}

// DrainTimeout bounds how long Serve waits, once the socket is closed, for the requests under
// way: a cut-short call's container is killed and its entry written within the sandbox's kill
// time-out (10 s by default).
const DrainTimeout = time.Minute
