package grader

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
)

// MaxLineBytes bounds one line from the entrypoint; a longer line is malformed.
const MaxLineBytes = 64 << 10

// DefaultMaxRestarts is how many times a crashed, hung or out-of-sync entrypoint is restarted in
// one phase before the phase's remaining questions fail.
const DefaultMaxRestarts = 3

// stderrCap bounds the kept stderr of one entrypoint container.
const stderrCap = 64 << 10

// Env is where and how bundles run: a grader container per entrypoint start, in Run.
type Env struct {
	Run         *sandbox.Run
	Rootfs      string              // the grader image's rootfs
	Image       string              // the grader image, name@digest, for the report
	Devices     []specs.LinuxDevice // the run's GPUs (none on a CPU track)
	Mounts      []specs.Mount       // what the GPUs' CDI specs mount
	GPUEnv      []string            // and the environment they set
	Symlinks    map[string]string   // and the links their hooks would make (sandbox.GPUEdits)
	Limits      sandbox.Limits
	Device      string // what computes: "cpu: <model>" or "gpu: <model>" (recorded in the report)
	Question    time.Duration
	Load        time.Duration // longest wait for the ready line (default 5 × Question, at least 30s)
	MaxRestarts int           // default DefaultMaxRestarts
	WorkDir     string        // private: unpacked bundles, stderr and per-question logs
	Bundle      Limits
}

func (e *Env) load() time.Duration {
	if e.Load > 0 {
		return e.Load
	}
	return max(5*e.Question, 30*time.Second)
}

func (e *Env) maxRestarts() int {
	if e.MaxRestarts > 0 {
		return e.MaxRestarts
	}
	return DefaultMaxRestarts
}

// request is one line to the entrypoint (grader/PROTOCOL.md).
type request struct {
	Op        string `json:"op"` // "generate" or "score"
	Seq       int    `json:"seq"`
	PrefixB64 string `json:"prefix_b64"`
	N         int    `json:"n,omitempty"`
	TargetB64 string `json:"target_b64,omitempty"`
}

// response is one line from the entrypoint.
type response struct {
	Ready     *bool    `json:"ready,omitempty"`
	Protocol  string   `json:"protocol,omitempty"`
	Seq       *int     `json:"seq,omitempty"`
	OutputB64 *string  `json:"output_b64,omitempty"`
	Bits      *float64 `json:"bits,omitempty"`
}

func parseResponse(b []byte) (*response, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var r response
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value on the line")
	}
	return &r, nil
}

// line is one line of the entrypoint's stdout.
type line struct {
	b       []byte
	tooLong bool
}

// lineWriter splits the container's stdout into lines for the session, a few at a time (the
// container blocks on a full pipe rather than the host buffering without bound). Once stopped it
// discards everything, so the runtime's copy never blocks on a session that has moved on.
type lineWriter struct {
	lines    chan line
	stop     chan struct{}
	once     sync.Once
	buf      []byte
	overflow bool
}

func newLineWriter() *lineWriter {
	return &lineWriter{lines: make(chan line, 4), stop: make(chan struct{})}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.overflow {
			if len(w.buf)+len(chunk) > MaxLineBytes {
				w.overflow, w.buf = true, w.buf[:0]
			} else {
				w.buf = append(w.buf, chunk...)
			}
		}
		if i < 0 {
			break
		}
		l := line{b: append([]byte(nil), w.buf...), tooLong: w.overflow}
		w.buf, w.overflow = w.buf[:0], false
		select {
		case w.lines <- l:
		case <-w.stop:
			return n, nil
		}
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) close() { w.once.Do(func() { close(w.stop) }) }

// cappedFile keeps the first max bytes written to it, then notes that more came.
type cappedFile struct {
	f   *os.File
	n   int64
	max int64
	cut bool
}

func (c *cappedFile) Write(p []byte) (int, error) {
	if room := c.max - c.n; room > 0 {
		q := p
		if int64(len(q)) > room {
			q = q[:room]
		}
		c.f.Write(q)
		c.n += int64(len(q))
	}
	if int64(len(p)) > 0 && c.n >= c.max && !c.cut {
		c.cut = true
		fmt.Fprintf(c.f, "\n[sealrun: stderr cut at %d bytes]\n", c.max)
	}
	return len(p), nil
}

// session is one started entrypoint: a grader container speaking the line protocol.
type session struct {
	env    *Env
	c      *sandbox.Container
	out    *lineWriter
	reqs   chan []byte
	stderr *cappedFile
	gone   bool // the container exited or was killed
}

// start starts the entrypoint in a fresh grader container and waits for its ready line (at most
// the load limit and never past deadline). A bundle that never becomes ready returns a reason;
// an infrastructure failure returns an error.
func (e *Env) start(ctx context.Context, u *Unpacked, stderrPath string, deadline time.Time) (s *session, reason string, err error) {
	ef, err := os.OpenFile(stderrPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("grader stderr log: %w", err)
	}
	s = &session{env: e, out: newLineWriter(), reqs: make(chan []byte, 1), stderr: &cappedFile{f: ef, max: stderrCap}}
	env := []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0", "CUBLAS_WORKSPACE_CONFIG=:4096:8",
		fmt.Sprintf("OMP_NUM_THREADS=%d", max(1, int(e.Limits.WithDefaults().CPUs))), "SEALRUN_PROTOCOL=" + Protocol}
	env = append(env, e.GPUEnv...)
	c, err := e.Run.Start(ctx, sandbox.ContainerConfig{
		Role: sandbox.RoleGrader, Rootfs: e.Rootfs, Args: u.Manifest.Entrypoint, Env: env, Cwd: sandbox.BundlePath,
		Bundle: u.Dir, Limits: e.Limits, Devices: e.Devices, Extra: e.Mounts, Symlinks: e.Symlinks, Stdin: true, Stdout: s.out, Stderr: s.stderr,
	})
	if err != nil {
		ef.Close()
		s.out.close()
		return nil, "", err
	}
	s.c = c
	go s.feed()
	wait := min(e.load(), time.Until(deadline))
	l, why := s.next(ctx, wait)
	if why != "" {
		reason = "the entrypoint did not become ready: " + why
		if err := s.close(); err != nil {
			return nil, "", err
		}
		return nil, reason, nil
	}
	r, perr := parseResponse(l)
	if perr != nil || r.Ready == nil || !*r.Ready || r.Protocol != Protocol {
		s.close()
		return nil, fmt.Sprintf("the entrypoint's first line must be {\"ready\": true, \"protocol\": %q}, got %s", Protocol, quoteLine(l)), nil
	}
	return s, "", nil
}

// feed writes requests to the container's stdin; a container that stops reading blocks only
// this goroutine, which ends when the pipe closes.
func (s *session) feed() {
	in := s.c.Stdin()
	for b := range s.reqs {
		if _, err := in.Write(b); err != nil {
			break
		}
	}
	in.Close()
	for range s.reqs {
	}
}

// next waits for the next stdout line. why is non-empty when none came: the entrypoint exited
// ("crash"), the wait ran out ("timeout") or the line is over MaxLineBytes ("malformed").
func (s *session) next(ctx context.Context, wait time.Duration) ([]byte, string) {
	if wait <= 0 {
		return nil, "timeout: no time left"
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l := <-s.out.lines:
		if l.tooLong {
			return nil, fmt.Sprintf("malformed: a line over %d bytes", MaxLineBytes)
		}
		return l.b, ""
	case <-s.c.Done():
		select { // lines written before the exit come first
		case l := <-s.out.lines:
			if !l.tooLong {
				return l.b, ""
			}
		default:
		}
		s.gone = true
		code, err := s.c.Wait(context.Background())
		var ce *sandbox.CommandError
		if errors.As(err, &ce) {
			return nil, "crash: " + ce.Message
		}
		return nil, fmt.Sprintf("crash: the entrypoint exited with status %d%s", code, s.stderrHint())
	case <-t.C:
		return nil, fmt.Sprintf("timeout: no line within %s", wait.Round(time.Millisecond))
	case <-ctx.Done():
		return nil, "not_run: " + ctx.Err().Error()
	}
}

func (s *session) stderrHint() string {
	if s.c != nil && s.c.OOMKilled() {
		return " (killed: out of memory)"
	}
	if s.c != nil && s.c.PidsLimitEnded() {
		return " (ended at its limit of processes and threads: under gVisor the sandbox ends there)"
	}
	return " (its stderr is in the grading log)"
}

// ask sends one request and returns the response for it, or the outcome that failed it. Stale
// lines (a response to an earlier seq) are skipped.
func (s *session) ask(ctx context.Context, req request, wait time.Duration) (*response, report.Outcome, string) {
	b, _ := json.Marshal(req)
	end := time.Now().Add(wait)
	t := time.NewTimer(wait)
	select {
	case s.reqs <- append(b, '\n'):
		t.Stop()
	case <-t.C: // the entrypoint stopped reading its stdin
		return nil, report.Timeout, fmt.Sprintf("timeout: the entrypoint did not read the question within %s", wait.Round(time.Millisecond))
	case <-ctx.Done():
		t.Stop()
		return nil, report.NotRun, "not_run: " + ctx.Err().Error()
	}
	for {
		l, why := s.next(ctx, time.Until(end))
		if why != "" {
			kind, _, _ := strings.Cut(why, ":")
			return nil, report.Outcome(kind), why
		}
		r, err := parseResponse(l)
		if err != nil {
			return nil, report.Malformed, fmt.Sprintf("malformed: %v in %s", err, quoteLine(l))
		}
		switch {
		case r.Seq == nil:
			return nil, report.Malformed, "malformed: the response has no seq: " + quoteLine(l)
		case *r.Seq < req.Seq:
			continue // a late or repeated answer to an earlier question
		case *r.Seq > req.Seq:
			return nil, report.Malformed, fmt.Sprintf("malformed: seq %d answers a question not asked yet (%d)", *r.Seq, req.Seq)
		}
		return r, report.Pass, ""
	}
}

// close kills the container (if still there) and waits for it; only an infrastructure failure
// is returned.
func (s *session) close() error {
	close(s.reqs)
	s.out.close()
	defer s.stderr.f.Close()
	if s.c == nil {
		return nil
	}
	if !s.gone {
		s.c.Kill(context.Background(), syscall.SIGKILL)
	}
	_, err := s.c.Wait(context.Background())
	derr := s.c.Destroy(context.Background())
	if sandbox.IsInfra(err) {
		return err
	}
	return derr
}

func quoteLine(b []byte) string {
	if len(b) > 120 {
		return fmt.Sprintf("%q…", b[:120])
	}
	return fmt.Sprintf("%q", b)
}

// Question is one item to ask: what is sent and what is expected.
type Question struct {
	ID     string
	Prefix []byte
	Answer []byte
}

// Answers is the result of a generate phase.
type Answers struct {
	Vector    report.PassVector
	Outcomes  []report.Outcome
	Times     []time.Duration // per question, as the harness saw it (0 when not run)
	Restarts  int
	Loads     int
	Elapsed   time.Duration
	FirstNote string // the first reason a question failed other than a wrong answer
}

// Count tallies the outcomes.
func (a *Answers) Count() map[report.Outcome]int {
	m := map[report.Outcome]int{}
	for _, o := range a.Outcomes {
		m[o]++
	}
	return m
}

// questionLog is one private per-question line (never published: it says answer lengths).
type questionLog struct {
	Index   int            `json:"index"`
	ID      string         `json:"id"`
	Outcome report.Outcome `json:"outcome"`
	MS      float64        `json:"ms"`
	Want    int            `json:"want_bytes,omitempty"`
	Got     int            `json:"got_bytes,omitempty"`
	Bits    float64        `json:"bits,omitempty"`
	Note    string         `json:"note,omitempty"`
}

// phase runs one protocol phase over qs: starting the entrypoint, asking each question with
// the per-question limit, restarting after a crash, time-out or malformed line (at most
// MaxRestarts times), and stopping at deadline. onAnswer judges one response.
type phase struct {
	name   string
	env    *Env
	u      *Unpacked
	qs     []Question
	op     string
	judge  func(q Question, r *response) (report.Outcome, string, float64)
	logDir string
}

type phaseResult struct {
	outcomes []report.Outcome
	values   []float64 // bits (score phase)
	times    []time.Duration
	restarts int
	loads    int
	elapsed  time.Duration
	note     string
	// startRetried: a container of the phase never ran and was started again (once a phase).
	startRetried bool
}

// ask sends question i to the session and judges the reply, recording its time and value in res
// and its outcome; it returns the outcome, why, and the question's log entry.
func (p *phase) ask(ctx context.Context, s *session, i int, deadline time.Time, res *phaseResult) (report.Outcome, string, questionLog) {
	q := p.qs[i]
	req := request{Op: p.op, Seq: i + 1, PrefixB64: base64.StdEncoding.EncodeToString(q.Prefix)}
	if p.op == "generate" {
		req.N = len(q.Answer)
	} else {
		req.TargetB64 = base64.StdEncoding.EncodeToString(q.Answer)
	}
	wait := min(p.env.Question, time.Until(deadline))
	qt := time.Now()
	r, outcome, why := s.ask(ctx, req, wait)
	res.times[i] = time.Since(qt)
	entry := questionLog{Index: i + 1, ID: q.ID, MS: float64(res.times[i].Microseconds()) / 1000, Want: len(q.Answer)}
	if r != nil {
		outcome, why, res.values[i] = p.judge(q, r)
		if r.OutputB64 != nil {
			if b, err := base64.StdEncoding.DecodeString(*r.OutputB64); err == nil {
				entry.Got = len(b)
			}
		}
		entry.Bits = res.values[i]
	}
	if outcome == report.NotRun && ctx.Err() == nil && !time.Now().Before(deadline) {
		outcome, why = report.Timeout, "timeout: grading time ran out during the question"
	}
	res.outcomes[i], entry.Outcome, entry.Note = outcome, outcome, why
	return outcome, why, entry
}

// run asks every question of the phase in order, starting the entrypoint's session again after a
// timeout, crash or malformed reply, until the questions, the restarts or the time run out; each
// question's outcome goes to the phase's private log. It is long because the restart rules (when to
// start again, when to give up) are one loop.
func (p *phase) run(ctx context.Context, deadline time.Time) (*phaseResult, error) {
	t0 := time.Now()
	res := &phaseResult{outcomes: make([]report.Outcome, len(p.qs)), values: make([]float64, len(p.qs)), times: make([]time.Duration, len(p.qs))}
	for i := range res.outcomes {
		res.outcomes[i] = report.NotRun
	}
	logf, err := os.OpenFile(filepath.Join(p.logDir, p.name+".jsonl"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("grading log: %w", err)
	}
	defer logf.Close()
	enc := json.NewEncoder(logf)
	note := func(s string) {
		if res.note == "" && s != "" {
			res.note = s
		}
	}
	var s *session
	defer func() {
		if s != nil {
			s.close()
		}
	}()
	fails := 0 // starts that did not lead to a usable session, plus restarts
	i := 0
	for i < len(p.qs) {
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			note(fmt.Sprintf("grading time ran out at question %d of %d", i+1, len(p.qs)))
			break
		}
		if s == nil {
			if fails > p.env.maxRestarts() {
				note(fmt.Sprintf("the entrypoint failed %d times; the remaining %d questions are not run", fails, len(p.qs)-i))
				break
			}
			res.loads++
			var why string
			s, why, err = p.env.start(ctx, p.u, filepath.Join(p.logDir, fmt.Sprintf("%s-%d.stderr", p.name, res.loads)), deadline)
			if err != nil && sandbox.NeverRan(err) && !res.startRetried {
				// The container never ran (the host's failure; nothing of the bundle ran): once
				// more, and the report says so.
				res.startRetried = true
				note("a grader container never ran (the host's fault) and was started again: " + err.Error())
				continue
			}
			if err != nil {
				return nil, err
			}
			if s == nil {
				note(why)
				fails++
				if res.loads > 1 {
					res.restarts++
				}
				continue
			}
		}
		outcome, why, entry := p.ask(ctx, s, i, deadline, res)
		enc.Encode(entry)
		switch outcome {
		case report.Timeout, report.Crash, report.Malformed:
			note(fmt.Sprintf("question %d: %s", i+1, why))
			if err := s.close(); err != nil {
				return nil, err
			}
			s = nil
			fails++
			res.restarts++
		case report.NotRun:
			note(why)
		}
		i++
	}
	logf.Sync()
	res.elapsed = time.Since(t0)
	return res, nil
}

// Answer runs the generate phase: each question's prefix is sent, exactly len(answer) bytes are
// read back and compared byte for byte. The answers never leave this process.
func (e *Env) Answer(ctx context.Context, u *Unpacked, qs []Question, deadline time.Time, logDir, name string) (*Answers, error) {
	p := &phase{name: name, env: e, u: u, qs: qs, op: "generate", logDir: logDir, judge: judgeAnswer}
	r, err := p.run(ctx, deadline)
	if err != nil {
		return nil, err
	}
	a := &Answers{Vector: make(report.PassVector, len(qs)), Outcomes: r.outcomes, Times: r.times, Restarts: r.restarts, Loads: r.loads, Elapsed: r.elapsed, FirstNote: r.note}
	for i, o := range r.outcomes {
		a.Vector[i] = '0'
		if o == report.Pass {
			a.Vector[i] = '1'
		}
	}
	return a, nil
}

func judgeAnswer(q Question, r *response) (report.Outcome, string, float64) {
	if r.OutputB64 == nil || r.Bits != nil || r.Ready != nil {
		return report.Malformed, "malformed: a generate response is {\"seq\": N, \"output_b64\": \"…\"}", 0
	}
	b, err := base64.StdEncoding.Strict().DecodeString(*r.OutputB64)
	switch {
	case err != nil:
		return report.Malformed, fmt.Sprintf("malformed: output_b64 is not standard base64: %v", err), 0
	case len(b) != len(q.Answer):
		return report.WrongLength, fmt.Sprintf("wrong_length: %d bytes for %d", len(b), len(q.Answer)), 0
	case !bytes.Equal(b, q.Answer):
		return report.Wrong, "", 0
	}
	return report.Pass, "", 0
}

func judgeBits(q Question, r *response) (report.Outcome, string, float64) {
	if r.Bits == nil || r.OutputB64 != nil || r.Ready != nil {
		return report.Malformed, "malformed: a score response is {\"seq\": N, \"bits\": X}", 0
	}
	if b := *r.Bits; b < 0 || math.IsNaN(b) || math.IsInf(b, 0) {
		return report.Malformed, fmt.Sprintf("malformed: bits %v is not a finite number >= 0", b), 0
	}
	return report.Pass, "", *r.Bits
}

// Bits runs the score phase: each answer span's bits under the bundle's model, given its
// prefix. It returns bits per byte over all spans, or nil with the reason when any span was
// not scored (a diagnostic is all or nothing).
func (e *Env) Bits(ctx context.Context, u *Unpacked, qs []Question, deadline time.Time, logDir string) (bpb *float64, note string, r *phaseResult, err error) {
	p := &phase{name: "bits", env: e, u: u, qs: qs, op: "score", logDir: logDir, judge: judgeBits}
	r, err = p.run(ctx, deadline)
	if err != nil {
		return nil, "", nil, err
	}
	var bits float64
	var n int
	for i, o := range r.outcomes {
		if o != report.Pass {
			return nil, fmt.Sprintf("not measured: question %d was not scored (%s); %s", i+1, o, r.note), r, nil
		}
		bits += r.values[i]
		n += len(qs[i].Answer)
	}
	if n == 0 {
		return nil, "not measured: no answer bytes", r, nil
	}
	v := bits / float64(n)
	return &v, "", r, nil
}

var _ io.Writer = (*lineWriter)(nil)
