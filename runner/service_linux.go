package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/audit"
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

// ShimPath is where the static runner binary is mounted inside runner containers: every call
// runs as `ShimPath _exec --cwd DIR -- ARGV...`, which changes to DIR, makes stderr the same pipe
// as stdout (so the two keep their order) and execs the command.
const ShimPath = "/tmp/.sealrun/runner"

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
}

// Option configures a Service.
type Option func(*options)

// WithClock is the run's budget clock (required).
func WithClock(c *policy.RunClock) Option { return func(o *options) { o.clock = c } }

// WithImage is the runner image's rootfs in the store (required).
func WithImage(rootfs string) Option { return func(o *options) { o.rootfs = rootfs } }

// WithWorkspace is the run's workspace on the host, mounted rw at /workspace (required).
func WithWorkspace(dir string) Option { return func(o *options) { o.workspace = dir } }

// WithShim is the host path of the static runner binary (required).
func WithShim(path string) Option { return func(o *options) { o.shim = path } }

// WithGPUs gives every call the run's GPUs as their CDI specs say: device nodes, the driver's
// mounts, environment, and the links their hooks would make (sandbox.GPUEdits).
func WithGPUs(g *sandbox.GPUEdits) Option {
	return func(o *options) { o.gpu = g }
}

// WithLimits are the runner containers' cgroup and tmpfs limits (defaults per field).
func WithLimits(l sandbox.Limits) Option { return func(o *options) { o.limits = l } }

// WithAudit is the run's audit log (required).
func WithAudit(l *audit.Log) Option { return func(o *options) { o.log = l } }

// WithCallsDir is where calls/<n>.log go (required).
func WithCallsDir(dir string) Option { return func(o *options) { o.callsDir = dir } }

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
	over    bool // the run has ended: every verb but time_left and status is refused
}

type callState struct {
	seq   int
	argv  []string
	start time.Time
	limit time.Duration
}

// NewService makes the service of one run.
func NewService(run Sandbox, opts ...Option) (*Service, error) {
	o := options{logCap: 64 << 20, rate: 10, burst: 20, wall: time.Now}
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
}

// Close releases the workspace handle.
func (s *Service) Close() error { return s.ws.Close() }

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
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return err
	}
	return nil
}

// --- responses --------------------------------------------------------------------------

// stream is a response being written as frames. Writes are serialised; a client that went away
// makes later writes no-ops (the call goes on until it is killed; nothing blocks on the client).
type stream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	f    http.Flusher
	gone bool
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/vnd.sealrun.frames")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &stream{w: w, f: f}
}

func (st *stream) frame(kind byte, p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return
	}
	for len(p) > 0 || kind == FrameExit {
		n := min(len(p), MaxFrame)
		if err := WriteFrame(st.w, kind, p[:n]); err != nil {
			st.gone = true
			return
		}
		p = p[n:]
		if kind == FrameExit {
			break
		}
	}
	if st.f != nil {
		st.f.Flush()
	}
}

func (st *stream) stderrf(format string, args ...any) {
	st.frame(FrameStderr, []byte(fmt.Sprintf(format, args...)+"\n"))
}

func (st *stream) exit(code int) { st.frame(FrameExit, []byte(strconv.Itoa(code))) }

// timeLine is the first line of every response.
func (s *Service) timeLine() string {
	ph := s.o.clock.Phase()
	return TimeLine(s.o.clock.TimeLeft(), ph == policy.PhaseReserve, ph == policy.PhaseOver)
}

// badRequest answers a malformed request: 400, the time line and the reason as plain text.
func (s *Service) badRequest(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, "%s\nrefused: %s\n", s.timeLine(), fmt.Sprintf(format, args...))
}

// decode reads one JSON object with no unknown fields and nothing after it.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the request is over %d bytes", MaxBodyBytes)
		}
		return fmt.Errorf("the request is not the JSON this verb takes (%v)", err)
	}
	if dec.More() {
		return errors.New("the request has data after its JSON object")
	}
	return nil
}

// --- verbs ------------------------------------------------------------------------------

// begin reads a verb's empty request and opens its response with the time line (nil after a
// bad request, already answered).
func (s *Service) begin(w http.ResponseWriter, r *http.Request) *stream {
	var req struct{}
	if err := decode(r, &req); err != nil {
		s.badRequest(w, "%v", err)
		return nil
	}
	st := newStream(w)
	st.stderrf("%s", s.timeLine())
	return st
}

func (s *Service) handleTimeLeft(w http.ResponseWriter, r *http.Request) {
	st := s.begin(w, r)
	if st == nil {
		return
	}
	left := s.o.clock.TimeLeft()
	var line string
	switch s.o.clock.Phase() {
	case policy.PhaseRunning:
		line = fmt.Sprintf("%s left; reserve window starts in %s", FormatDuration(left), FormatDuration(s.o.clock.ReserveStart.Sub(s.o.clock.Now())))
	case policy.PhaseReserve:
		line = fmt.Sprintf("%s left; in the reserve window: submit, promote and finalize only", FormatDuration(left))
	default:
		line = "0s left; the run is over"
	}
	st.frame(FrameStdout, []byte(line+"\n"))
	st.exit(0)
}

func (s *Service) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := s.begin(w, r)
	if st == nil {
		return
	}
	s.mu.Lock()
	running, done, over := s.running, s.done, s.over
	s.mu.Unlock()
	var b strings.Builder
	phase := s.o.clock.Phase().String()
	if over {
		phase = "over"
	}
	fmt.Fprintf(&b, "phase:       %s\n", phase)
	fmt.Fprintf(&b, "time left:   %s (deadline in %s; call limit now %s)\n", FormatDuration(s.o.clock.TimeLeft()), FormatDuration(s.o.clock.TimeLeft()), FormatDuration(s.o.clock.CallLimit()))
	if running != nil {
		fmt.Fprintf(&b, "running:     call %d: %s (for %s, limit %s)\n", running.seq, shellQuote(running.argv), FormatDuration(s.o.clock.Now().Sub(running.start)), FormatDuration(running.limit))
	} else {
		fmt.Fprintf(&b, "running:     no call\n")
	}
	fmt.Fprintf(&b, "calls done:  %d\n", done)
	if s.o.judge != nil && !over {
		if h, err := s.o.judge.History(r.Context()); err == nil {
			fmt.Fprintf(&b, "submissions:\n%s", indent(h))
		}
	}
	st.frame(FrameStdout, []byte(b.String()))
	st.exit(0)
}

func indent(s string) string {
	if s == "" {
		return "  none\n"
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

// judgeVerb serves submit, promote, finalize and history through the Judge.
func (s *Service) judgeVerb(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req ArgRequest
		if err := decode(r, &req); err != nil {
			s.badRequest(w, "%v", err)
			return
		}
		if strings.IndexByte(req.Arg, 0) >= 0 || len(req.Arg) > 4096 {
			s.badRequest(w, "the argument has a NUL byte or is over 4096 bytes")
			return
		}
		st := newStream(w)
		st.stderrf("%s", s.timeLine())
		s.mu.Lock()
		over := s.over
		s.mu.Unlock()
		if over || s.o.clock.Phase() == policy.PhaseOver {
			st.stderrf("refused: the run is over; nothing more can be submitted, promoted or finalized")
			st.exit(ExitRefused)
			return
		}
		if s.o.judge == nil {
			st.stderrf("refused: %s is not served in this run (no grader is configured)", verb)
			st.exit(ExitRefused)
			return
		}
		var out string
		var err error
		switch verb {
		case "submit":
			var dir string
			if dir, err = s.resolveDir(req.Arg, req.Cwd); err == nil {
				out, err = s.o.judge.Submit(r.Context(), dir)
			}
		case "promote":
			if req.Arg == "" {
				err = refusef("promote needs a candidate id (runner history lists them)")
			} else {
				out, err = s.o.judge.Promote(r.Context(), req.Arg)
			}
		case "finalize":
			out, err = s.o.judge.Finalize(r.Context(), req.Arg)
		case "history":
			out, err = s.o.judge.History(r.Context())
		}
		var ref *Refusal
		var reasoned interface{ RefusalReason() string }
		switch {
		case errors.As(err, &ref):
			st.stderrf("refused: %s", ref.Reason)
			st.exit(ExitRefused)
			return
		case errors.As(err, &reasoned):
			st.stderrf("refused: %s", reasoned.RefusalReason())
			st.exit(ExitRefused)
			return
		case err != nil:
			st.stderrf("sealrun: %s failed on the host side: %v", verb, err)
			st.exit(ExitRefused)
			return
		}
		st.frame(FrameStdout, []byte(out))
		st.exit(0)
		if s.o.answered != nil {
			s.o.answered(verb)
		}
	}
}

// resolveDir maps a directory the agent named (absolute under /workspace, or relative to its
// cwd) to the host path inside the workspace. Symlinks are the Judge's packer's to refuse.
func (s *Service) resolveDir(arg, cwd string) (string, error) {
	if arg == "" {
		return "", refusef("submit needs a directory (runner submit ./bundle)")
	}
	p := arg
	if !path.IsAbs(p) {
		if cwd == "" {
			cwd = sandbox.WorkspacePath
		}
		p = path.Join(cwd, p)
	}
	rel, ok := underWorkspace(path.Clean(p))
	if !ok {
		return "", refusef("%s is outside /workspace; submit a directory in the workspace", arg)
	}
	return filepath.Join(s.o.workspace, filepath.FromSlash(rel)), nil
}

// underWorkspace returns p relative to /workspace ("." for the workspace itself).
func underWorkspace(p string) (string, bool) {
	if p == sandbox.WorkspacePath {
		return ".", true
	}
	rel, ok := strings.CutPrefix(p, sandbox.WorkspacePath+"/")
	return rel, ok && rel != ""
}

var envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// callEnv is the fixed allowlist every call gets, before the caller's --env.
var callEnv = []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "OMP_NUM_THREADS=1"}

// validateCall checks a call request; the message says what is wrong and how to fix it.
func (s *Service) validateCall(req *CallRequest) (cwd string, err error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return "", errors.New("no command: runner CMD [ARGS...]")
	}
	if len(req.Argv) > MaxArgs {
		return "", fmt.Errorf("%d arguments; at most %d (put long lists in a file)", len(req.Argv), MaxArgs)
	}
	n := 0
	for i, a := range req.Argv {
		n += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d has a NUL byte", i)
		}
	}
	if n > MaxArgvBytes {
		return "", fmt.Errorf("the arguments are %d bytes; at most %d (put long input in a file)", n, MaxArgvBytes)
	}
	if len(req.Env) > MaxEnv {
		return "", fmt.Errorf("%d --env entries; at most %d", len(req.Env), MaxEnv)
	}
	n = 0
	for _, e := range req.Env {
		n += len(e)
		k, _, ok := strings.Cut(e, "=")
		switch {
		case !ok || !envKeyRE.MatchString(k):
			return "", fmt.Errorf("--env %q: give KEY=VALUE with a KEY of letters, digits and _", e)
		case strings.HasPrefix(k, "LD_") || strings.Contains(strings.ToUpper(k), "PROXY"):
			return "", fmt.Errorf("--env %s is not allowed (no LD_* or proxy variables)", k)
		case strings.IndexByte(e, 0) >= 0:
			return "", fmt.Errorf("--env %s has a NUL byte", k)
		}
	}
	if n > MaxEnvBytes {
		return "", fmt.Errorf("--env entries are %d bytes; at most %d", n, MaxEnvBytes)
	}
	cwd = sandbox.WorkspacePath
	if req.Cwd != "" {
		if strings.IndexByte(req.Cwd, 0) >= 0 || !path.IsAbs(req.Cwd) {
			return "", fmt.Errorf("cwd %q is not an absolute path", req.Cwd)
		}
		clean := path.Clean(req.Cwd)
		rel, ok := underWorkspace(clean)
		if !ok {
			return "", fmt.Errorf("cwd %s is outside /workspace (the runner client sends its cwd only from inside /workspace)", req.Cwd)
		}
		// Resolve on the host without following links: every component must be a real directory.
		if rel != "." {
			parts := strings.Split(rel, "/")
			for i := range parts {
				sub := strings.Join(parts[:i+1], "/")
				fi, err := s.ws.Lstat(sub)
				switch {
				case err != nil:
					return "", fmt.Errorf("cwd %s does not exist in the workspace", req.Cwd)
				case fi.Mode()&fs.ModeSymlink != 0:
					return "", fmt.Errorf("cwd %s: /workspace/%s is a symbolic link; cd to the real directory", req.Cwd, sub)
				case !fi.IsDir():
					return "", fmt.Errorf("cwd %s: /workspace/%s is not a directory", req.Cwd, sub)
				}
			}
		}
		cwd = clean
	}
	return cwd, nil
}

// --- compute calls ----------------------------------------------------------------------

// CallRecord is the audit entry of one compute call (kind "call").
type CallRecord struct {
	Call         int       `json:"call"`
	Argv         []string  `json:"argv"`
	Cwd          string    `json:"cwd"`
	EnvKeys      []string  `json:"env_keys"`
	Start        time.Time `json:"start"`
	End          time.Time `json:"end"`
	StartOffset  string    `json:"start_offset"` // since the run's start, monotonic
	EndOffset    string    `json:"end_offset"`
	Limit        string    `json:"limit"`
	Status       string    `json:"status"` // exited, limit, cancelled, infra_error
	Exit         int       `json:"exit"`
	LimitHit     bool      `json:"limit_hit"`
	OOMKilled    bool      `json:"oom_killed"`
	OutputBytes  int64     `json:"output_bytes"`
	OutputSHA256 string    `json:"output_sha256"`
	LogTruncated bool      `json:"log_truncated"`
	CPUSeconds   float64   `json:"cpu_seconds"`
	MemoryPeak   uint64    `json:"memory_peak"`
	Container    string    `json:"container"`
	Error        string    `json:"error,omitempty"`
}

func (s *Service) handleCall(w http.ResponseWriter, r *http.Request) {
	var req CallRequest
	if err := decode(r, &req); err != nil {
		s.badRequest(w, "%v", err)
		return
	}
	cwd, err := s.validateCall(&req)
	if err != nil {
		s.badRequest(w, "%v", err)
		return
	}
	st := newStream(w)
	st.stderrf("%s", s.timeLine())
	// Admission: the run is on, outside the reserve window, and no other call runs.
	s.mu.Lock()
	switch limit := s.o.clock.CallLimit(); {
	case s.over || s.o.clock.Phase() == policy.PhaseOver:
		s.mu.Unlock()
		st.stderrf("refused: the run is over")
		st.exit(ExitRefused)
		return
	case limit <= 0:
		s.mu.Unlock()
		st.stderrf("refused: compute is refused in the reserve window; the reserve window is for runner submit, promote and finalize")
		st.exit(ExitRefused)
		return
	case s.running != nil:
		run := s.running
		s.mu.Unlock()
		st.stderrf("refused: another compute call is running: call %d, %s, started %s ago; one compute call at a time", run.seq, shellQuote(run.argv), FormatDuration(s.o.clock.Now().Sub(run.start)))
		st.exit(ExitRefused)
		return
	default:
		s.seq++
		s.running = &callState{seq: s.seq, argv: req.Argv, start: s.o.clock.Now(), limit: limit}
	}
	cs := s.running
	s.mu.Unlock()
	code, teardown := s.runCall(r.Context(), st, cs, req, cwd)
	// The slot is free before the exit status goes back (the command has ended and its audit
	// entry is written): a client that starts its next call the moment it has this one's status
	// must never find it still running (a fresh-machine CI run did). The exited container's
	// teardown follows.
	s.mu.Lock()
	s.running = nil
	s.done++
	s.mu.Unlock()
	st.exit(code)
	teardown()
}

// output fans a call's output out to the client, the hash, the count and the capped log.
type output struct {
	st     *stream
	hash   hashWriter
	n      int64
	log    *os.File
	logCap int64
	logged int64
	logErr error
	mu     sync.Mutex
}

type hashWriter interface {
	io.Writer
	Sum([]byte) []byte
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.n += int64(len(p))
	o.hash.Write(p)
	if room := o.logCap - o.logged; room > 0 && o.logErr == nil {
		k := min(int64(len(p)), room)
		_, o.logErr = o.log.Write(p[:k])
		o.logged += k
	}
	o.mu.Unlock()
	o.st.frame(FrameStdout, p)
	return len(p), nil
}

// runCall runs one compute call and returns the client's exit status and the teardown of its
// (exited) container. Everything the call did is appended to the audit log before it returns.
func (s *Service) runCall(ctx context.Context, st *stream, cs *callState, req CallRequest, cwd string) (code int, teardown func()) {
	teardown = func() {}
	rec := CallRecord{Call: cs.seq, Argv: req.Argv, Cwd: cwd, EnvKeys: []string{}, Limit: cs.limit.String(),
		Start: s.o.wall().UTC(), StartOffset: s.o.clock.Elapsed().String()}
	for _, e := range req.Env {
		k, _, _ := strings.Cut(e, "=")
		rec.EnvKeys = append(rec.EnvKeys, k)
	}
	logPath := filepath.Join(s.o.callsDir, fmt.Sprintf("%d.log", cs.seq))
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return s.infraFail(st, &rec, fmt.Errorf("call log %s: %w", logPath, err)), teardown
	}
	defer logf.Close()
	out := &output{st: st, hash: sha256.New(), log: logf, logCap: s.o.logCap}
	gpu := s.o.gpu
	if gpu == nil {
		gpu = &sandbox.GPUEdits{}
	}
	env := append(append(append([]string{}, callEnv...), gpu.Env...), fmt.Sprintf("SEALRUN_CALL=%d", cs.seq))
	env = append(env, req.Env...)
	c, err := s.sb.Start(ctx, sandbox.ContainerConfig{
		// The shim changes to cwd as the agent's user: the runtime itself (as the container's
		// root, which cannot search the group-only workspace) never resolves it.
		Role: sandbox.RoleRunner, Rootfs: s.o.rootfs, Workspace: s.o.workspace, Cwd: sandbox.WorkspacePath,
		Args: append([]string{ShimPath, "_exec", "--cwd", cwd, "--"}, req.Argv...), Env: env, Limits: s.o.limits, Devices: gpu.Devices, Symlinks: gpu.Symlinks,
		Extra:  append([]specs.Mount{{Destination: ShimPath, Type: "bind", Source: s.o.shim, Options: []string{"rbind", "ro", "nosuid", "nodev"}}}, gpu.Mounts...),
		Stdout: out, Stderr: out,
	})
	if err != nil {
		if ctx.Err() != nil {
			rec.Status, rec.Exit = "cancelled", ExitRefused
			rec.Error = "the client went away before the call started"
			s.finish(st, &rec, out)
			return ExitRefused, teardown
		}
		return s.infraFail(st, &rec, err), teardown
	}
	teardown = func() {
		if err := c.Destroy(context.Background()); err != nil && s.o.onInfra != nil {
			s.o.onInfra(err)
		}
	}
	rec.Container = c.ID
	limitTimer := time.NewTimer(cs.limit)
	defer limitTimer.Stop()
	waited := make(chan struct{})
	var werr error
	go func() {
		code, werr = c.Wait(context.Background())
		close(waited)
	}()
	select {
	case <-waited:
	case <-limitTimer.C:
		rec.LimitHit = true
		c.Freeze() // nothing more happens between the limit and the kill
		c.Kill(context.Background(), syscall.SIGKILL)
		<-waited
	case <-ctx.Done():
		rec.Status = "cancelled"
		c.Kill(context.Background(), syscall.SIGKILL)
		<-waited
	}
	if stats, err := c.Stats(); err == nil {
		rec.CPUSeconds = float64(stats.CPUNanos) / 1e9
		rec.MemoryPeak = stats.MemoryPeak
	}
	rec.OOMKilled = c.OOMKilled()
	var ce *sandbox.CommandError
	switch {
	case werr != nil && errors.As(werr, &ce):
		// The agent's command could not be run (not found, not executable): its fault.
		rec.Status, rec.Exit = "exited", 127
		st.stderrf("runner: %s", ce.Message)
		code = 127
	case werr != nil && sandbox.IsInfra(werr):
		return s.infraFail(st, &rec, werr), teardown
	case rec.LimitHit:
		rec.Status, rec.Exit = "limit", ExitLimit
		code = ExitLimit
		st.stderrf("[killed: the call limit of %s was reached at %s (call limit = min(%s, time until the reserve window))]", FormatDuration(cs.limit), s.o.wall().UTC().Format(time.RFC3339), FormatDuration(s.o.clock.Schedule.CallLimit))
	case rec.Status == "cancelled":
		rec.Exit = code
		rec.Error = "the client disconnected; the call was killed"
	default:
		rec.Status, rec.Exit = "exited", code
		if rec.OOMKilled {
			st.stderrf("[killed by the kernel's OOM killer: the call went over its memory limit of %d MiB — your program's fault, not the host's]", s.o.limits.WithDefaults().MemoryBytes>>20)
		}
	}
	s.finish(st, &rec, out)
	return code, teardown
}

// finish completes the record and appends it to the audit log.
func (s *Service) finish(st *stream, rec *CallRecord, out *output) {
	out.mu.Lock()
	rec.OutputBytes = out.n
	rec.OutputSHA256 = hex.EncodeToString(out.hash.Sum(nil))
	if out.n > out.logged && out.log != nil {
		rec.LogTruncated = true
		fmt.Fprintf(out.log, "\n[sealrun: this log keeps the first %d bytes of the output; %d more bytes were streamed to the agent but not kept]\n", out.logged, out.n-out.logged)
	}
	out.mu.Unlock()
	rec.End = s.o.wall().UTC()
	rec.EndOffset = s.o.clock.Elapsed().String()
	if _, _, err := s.o.log.Append("call", rec); err != nil {
		st.stderrf("sealrun: infrastructure error: the audit log could not be written (%v); this run will be marked invalid", err)
		if s.o.onInfra != nil {
			s.o.onInfra(err)
		}
	}
}

// infraFail reports an infrastructure failure to the agent and the daemon, audits it, and
// returns 125.
func (s *Service) infraFail(st *stream, rec *CallRecord, err error) int {
	rec.Status, rec.Exit, rec.Error = "infra_error", ExitRefused, err.Error()
	st.stderrf("sealrun: infrastructure error (not your program's fault): %v; this run will be marked invalid and rerun", err)
	if s.o.onInfra != nil {
		s.o.onInfra(err)
	}
	s.finish(st, rec, &output{hash: sha256.New()})
	return ExitRefused
}

// --- rate limit -------------------------------------------------------------------------

// bucket is a token bucket: rate tokens a second, up to burst.
type bucket struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newBucket(rate float64, burst int, now func() time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now(), now: now}
}

func (b *bucket) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.now()
	b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
	b.last = t
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
