package runner

// Compute calls: validation of a request, the call's runner container under the run's limits
// and clock, its output streamed and logged, and its record in the audit log.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
)

type callState struct {
	seq   int
	argv  []string
	start time.Time
	limit time.Duration

	mu sync.Mutex
	c  *sandbox.Container // its container while it runs: frozen for a pause
}

// container sets (or, nil, clears) the call's running container.
func (cs *callState) container(c *sandbox.Container) {
	cs.mu.Lock()
	cs.c = c
	cs.mu.Unlock()
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

// validateCall checks a call request; the message says what is wrong and how to fix it. It is long
// because it is one rule per field of the request, in the protocol's order (runner/PROTOCOL.md).
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
		return "", fmt.Errorf("%d env entries; at most %d", len(req.Env), MaxEnv)
	}
	n = 0
	for _, e := range req.Env {
		n += len(e)
		k, _, ok := strings.Cut(e, "=")
		switch {
		case !ok || !envKeyRE.MatchString(k):
			return "", fmt.Errorf("env %q: give KEY=VALUE with a KEY of letters, digits and _", e)
		case strings.HasPrefix(k, "LD_") || strings.Contains(strings.ToUpper(k), "PROXY"):
			return "", fmt.Errorf("env %s is not allowed (no LD_* or proxy variables)", k)
		case strings.IndexByte(e, 0) >= 0:
			return "", fmt.Errorf("env %s has a NUL byte", k)
		}
	}
	if n > MaxEnvBytes {
		return "", fmt.Errorf("env entries are %d bytes; at most %d", n, MaxEnvBytes)
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

func (s *Service) handleCall(w http.ResponseWriter, r *http.Request) {
	s.handling.Add(1)
	defer s.handling.Add(-1)
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
	case s.paused:
		s.mu.Unlock()
		st.stderrf("refused: the run is paused by its operator; compute starts again when the pause ends")
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
	s.warmUp() // the next call's container
}

// output fans a call's output out to the client, the hash, the count and the capped log (and the
// hash of what the log keeps).
type output struct {
	st      *stream
	hash    hashWriter
	n       int64
	log     *os.File
	logHash hashWriter
	logCap  int64
	logged  int64
	logErr  error
	mu      sync.Mutex
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
		o.logHash.Write(p[:k])
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
	rec := audit.Call{Call: cs.seq, Argv: req.Argv, Cwd: cwd, EnvKeys: []string{}, Limit: cs.limit.String(),
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
	out := &output{st: st, hash: sha256.New(), log: logf, logHash: sha256.New(), logCap: s.o.logCap}
	var c *sandbox.Container
	var werr error
	if c, err = s.startWaiting(ctx, cs, req, cwd, out); err != nil {
		// The container started ahead for this call failed it (the host's): the call's own start
		// below is its second, as after a start that never ran.
		rec.StartRetried = err.Error()
	}
	for {
		if c == nil {
			c, err = s.startCall(ctx, cs, req, cwd, out)
		}
		if err == nil {
			rec.Container = c.ID
			code, werr = s.superviseCall(ctx, c, cs, &rec)
			if !sandbox.NeverRan(werr) || rec.LimitHit || rec.Status == audit.CallCancelled {
				break
			}
			err = werr
			if derr := c.Destroy(context.Background()); derr != nil {
				return s.infraFail(st, &rec, derr), teardown
			}
		}
		if ctx.Err() != nil {
			rec.Status, rec.Exit = audit.CallCancelled, ExitRefused
			rec.Error = "the client went away before the call started"
			s.finish(st, &rec, out)
			return ExitRefused, teardown
		}
		// A container that never ran is started once more (nothing of the agent's ran), with
		// what is left of the call's limit; a second failure is the host's, and the run's end.
		if rec.StartRetried != "" || !sandbox.NeverRan(err) {
			return s.infraFail(st, &rec, err), teardown
		}
		rec.StartRetried, c = err.Error(), nil
		if cs.limit -= s.o.clock.Now().Sub(cs.start); cs.limit <= 0 {
			return s.infraFail(st, &rec, err), teardown
		}
	}
	teardown = func() {
		if err := c.Destroy(context.Background()); err != nil && s.o.onInfra != nil {
			s.o.onInfra(err)
		}
	}
	return s.endCall(st, cs, &rec, out, c, code, werr), teardown
}

// startCall starts the call's runner container: the shim runs the agent's argv in cwd under
// the run's limits, with the GPUs the run was given.
func (s *Service) startCall(ctx context.Context, cs *callState, req CallRequest, cwd string, out *output) (*sandbox.Container, error) {
	env := append([]string{fmt.Sprintf("SEALRUN_CALL=%d", cs.seq)}, req.Env...)
	return s.sb.Start(ctx, s.callConfig(append([]string{ShimPath, "_exec", "--cwd", cwd, "--"}, req.Argv...), env, out))
}

// superviseCall waits for the call's container to exit, killing it at the call's limit (frozen
// first, so that nothing more happens in between) or when the client goes away. The limit is on
// the run's clock: a pause of the run (its container frozen meanwhile) moves it later by the
// pause's length.
func (s *Service) superviseCall(ctx context.Context, c *sandbox.Container, cs *callState, rec *audit.Call) (code int, werr error) {
	waited := make(chan struct{})
	go func() {
		code, werr = c.Wait(context.Background())
		close(waited)
	}()
	cs.container(c)
	defer cs.container(nil)
	s.mu.Lock()
	if s.paused { // paused between the admission and the start
		c.Freeze()
	}
	s.mu.Unlock()
	// The limit runs from now (a retried start has what was left of it) on the run's clock.
	limitAt, mark := time.Now().Add(cs.limit), s.o.clock.PausedFor()
	limitTimer := time.NewTimer(time.Hour)
	defer limitTimer.Stop()
	for {
		changed := s.o.clock.Changed()
		limitTimer.Stop()
		var limitC <-chan time.Time
		if due, ok := s.o.clock.Due(limitAt, mark); ok {
			limitTimer.Reset(time.Until(due))
			limitC = limitTimer.C
		}
		select {
		case <-waited:
			return code, werr
		case <-changed:
			continue
		case <-limitC:
			rec.LimitHit = true
			c.Freeze() // nothing more happens between the limit and the kill
			c.Kill(context.Background(), syscall.SIGKILL)
			<-waited
			return code, werr
		case <-ctx.Done():
			rec.Status = audit.CallCancelled
			c.Kill(context.Background(), syscall.SIGKILL)
			c.Thaw() // a call paused when its client went away
			<-waited
			return code, werr
		}
	}
}

// Pause freezes the compute call under way, if any, and refuses new ones until Resume: the run's
// operator paused the run (its clock, paused with it, moves the call's limit by the pause).
func (s *Service) Pause() error { return s.setPaused(true) }

// Resume thaws the call Pause froze and lets new ones start.
func (s *Service) Resume() error { return s.setPaused(false) }

func (s *Service) setPaused(paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = paused
	cs := s.running
	if cs == nil {
		return nil
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case cs.c == nil:
		return nil
	case paused:
		return cs.c.Freeze()
	}
	return cs.c.Thaw()
}

// endCall records how the call ended, tells the agent why a kill happened, and finishes the
// response and the record. It returns the exit code the agent gets.
func (s *Service) endCall(st *stream, cs *callState, rec *audit.Call, out *output, c *sandbox.Container, code int, werr error) int {
	if stats, err := c.Stats(); err == nil {
		rec.CPUSeconds = float64(stats.CPUNanos) / 1e9
		rec.MemoryPeak = stats.MemoryPeak
	}
	rec.OOMKilled = c.OOMKilled()
	rec.PidsLimitEnded = !rec.OOMKilled && c.PidsLimitEnded()
	var ce *sandbox.CommandError
	switch {
	case werr != nil && errors.As(werr, &ce):
		// The agent's command could not be run (not found, not executable): its fault.
		rec.Status, rec.Exit = audit.CallExited, 127
		st.stderrf("runner: %s", ce.Message)
		code = 127
	case werr != nil && sandbox.IsInfra(werr):
		return s.infraFail(st, rec, werr)
	case rec.LimitHit:
		rec.Status, rec.Exit = audit.CallLimit, ExitLimit
		code = ExitLimit
		st.stderrf("[killed: the call limit of %s was reached at %s (call limit = min(%s, time until the reserve window))]", FormatDuration(cs.limit), s.o.wall().UTC().Format(time.RFC3339), FormatDuration(s.o.clock.Schedule().CallLimit))
	case rec.Status == audit.CallCancelled:
		rec.Exit = code
		rec.Error = "the client disconnected; the call was killed"
	default:
		rec.Status, rec.Exit = audit.CallExited, code
		switch {
		case rec.OOMKilled:
			st.stderrf("[killed by the kernel's OOM killer: the call went over its memory limit of %d MiB — your program's fault, not the host's]", s.o.limits.WithDefaults().MemoryBytes>>20)
		case rec.PidsLimitEnded:
			st.stderrf("[ended: the call reached its limit of %d processes and threads, and its sandbox (gVisor) ends there rather than failing the fork — your program's fault, not the host's]", s.o.limits.WithDefaults().Pids)
		}
	}
	s.finish(st, rec, out)
	return code
}

// finish completes the record and appends it to the audit log. The call's log is synced first:
// an entry never hashes output its log does not durably hold. A log that could not be written
// is the infrastructure's failure.
func (s *Service) finish(st *stream, rec *audit.Call, out *output) {
	out.mu.Lock()
	rec.OutputBytes = out.n
	rec.OutputSHA256 = digest.HexOf(out.hash.Sum(nil))
	if out.n > out.logged && out.log != nil {
		rec.LogTruncated = true
		rec.LogBytes, rec.LogSHA256 = out.logged, digest.HexOf(out.logHash.Sum(nil))
	}
	logErr := out.logErr
	if out.log != nil && logErr == nil {
		logErr = out.log.Sync()
	}
	out.mu.Unlock()
	if logErr != nil {
		err := fmt.Errorf("call %d's log %s: %w", rec.Call, out.log.Name(), logErr)
		if rec.Error == "" {
			rec.Error = err.Error()
		}
		st.stderrf("sealrun: infrastructure error (not your program's fault): the call's output could not be kept (%v); this run will be marked invalid and rerun", err)
		if s.o.onInfra != nil {
			s.o.onInfra(err)
		}
	}
	rec.End = s.o.wall().UTC()
	rec.EndOffset = s.o.clock.Elapsed().String()
	if _, _, err := s.o.log.Append(audit.KindCall, rec); err != nil {
		st.stderrf("sealrun: infrastructure error: the audit log could not be written (%v); this run will be marked invalid", err)
		if s.o.onInfra != nil {
			s.o.onInfra(err)
		}
	}
}

// infraFail reports an infrastructure failure to the agent and the daemon, audits it, and
// returns 125.
func (s *Service) infraFail(st *stream, rec *audit.Call, err error) int {
	rec.Status, rec.Exit, rec.Error = audit.CallInfra, ExitRefused, err.Error()
	st.stderrf("sealrun: infrastructure error (not your program's fault): %v; this run will be marked invalid and rerun", err)
	if s.o.onInfra != nil {
		s.o.onInfra(err)
	}
	s.finish(st, rec, &output{hash: sha256.New()})
	return ExitRefused
}
