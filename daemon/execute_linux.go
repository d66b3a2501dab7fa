package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
)

// RunSpec is what a run was asked to be.
type RunSpec struct {
	ID      string
	RerunOf string
	Track   *policy.Track
	Agent   controller.Agent
	Seed    int64
	Queued  time.Time
	User    string   // who launched it (peer credentials)
	GPUs    []string // CDI names of the GPUs the queue gave the run (the track's count)
	CPUSet  string   // the CPUs the queue gave the run (the track's count), "0-3"; "" for any
	// WantGPUs and Dispatcher are an outside scheduler's (RunRequest.GPUs, .Dispatcher).
	WantGPUs   []string
	Dispatcher string
	// Person and Proctors are a human run's: who attaches to its terminal, who may watch it.
	Person   *api.Person
	Proctors []string
}

// Executor runs sealed runs on this host.
type Executor struct {
	Cfg     *hostconfig.Config
	Host    *sandbox.Host
	Store   *images.Store
	Signer  signature.Signer
	Journal *Journal
	Version string // sealrun's version and commit, for the attestation
	Commit  string
	// Build is the running sealrund's (CurrentBuild), set by Main; nil: computed on first use.
	Build *attest.Build
	// Ledger is the host's run ledger: each run's attestation carries its queued entry.
	Ledger *ledger.Log
	// TSA is the host's timestamp authority ([timestamp]; nil: none): each attestation's
	// signature is timestamped, the token in result.sigstore.json beside it.
	TSA *attest.TSA
	// TPM is the host's TPM ([tpm]; nil: none): each run's statement is quoted, the quote in
	// result.tpm.json beside its attestation.
	TPM *HostTPM
	Now func() time.Time
	// The test seams, Entrypoint, TestOverlay, Hold and KillAfter, exist only in a test build
	// (TestSeams; -tags sealrun_testseams): a release build refuses to run with any set, and every
	// attestation lists those a run used (build.seams_used). Entrypoint replaces the controller image's command (the
	// image's scaffold labels are still checked against the track) and TestOverlay is a
	// directory copied into every workspace after the kit, so that tests change their scripted
	// agent and bundle between runs of one track. A run made with either is not the pinned
	// scaffold's; never set them in production.
	Entrypoint  []string
	TestOverlay string
	// Limits of every container of a run (the track's CPUs and memory when zero).
	Limits sandbox.Limits

	onEvent func(api.Event) // the daemon's live subscribers
	// sessions are the terminals of the human runs being served (human_linux.go).
	sessions sessions
	// onFail is told when the journal or the ledger cannot be written (Daemon.fail); failure
	// holds that error, and a run that sees it ends invalid.
	onFail  func(what string, err error)
	failure atomic.Pointer[brokenErr]

	// Hold is a failpoint for tests ("preparing" or "sign"): the run stops there until it is
	// cancelled (preparing) or the daemon is killed (sign). sealrund reads it from
	// SEALRUND_TEST_HOLD; never set it in production.
	Hold string
	// KillAfter is the crash failpoint of the fault tests ("KIND[:STATE][#N]", see
	// Journal.KillAfter), armed by New; SEALRUND_TEST_KILL_AFTER; never set it in production.
	KillAfter string
}

// hold blocks at a failpoint while ctx lasts (see Executor.Hold).
func (x *Executor) hold(ctx context.Context, run, point string) {
	if x.Hold != point {
		return
	}
	x.event(run, api.EventHold, point)
	<-ctx.Done()
}

// Outcome is how a run ended.
type Outcome struct {
	Status      outcome.Outcome
	Reason      string
	Report      *report.Exam // an exam run's
	TaskReport  *report.Task // a task run's
	Attestation string       // path of result.att.json
}

// runIO is one run's files and services, torn down by close.
type runIO struct {
	dir     string
	exam    *exams.Exam // the hidden exam, verified by Check at the start
	task    *airs.Task  // a task run's task, verified by Check (nil if it never was)
	log     *audit.Log
	mu      sync.Mutex
	infra   error
	infraCh chan struct{}
}

func (r *runIO) onInfra(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.infra == nil {
		r.infra = err
		close(r.infraCh)
	}
}

// runState is one run on its way through the phases of Execute: admit (admit_linux.go),
// prepare (prepare_linux.go), serve (serve_linux.go), then end: grade (grade_linux.go), sign
// (sign_linux.go) and record (record_linux.go). Each phase fills in what the later ones read;
// what a phase sets up is undone by close, last first, once the run has ended.
type runState struct {
	x    *Executor
	spec RunSpec
	t    *policy.Track
	now  func() time.Time
	io   *runIO
	pins *pins // admit's

	// prepare's
	run       *sandbox.Run
	ws        string
	limits    sandbox.Limits
	gpus      *sandbox.GPUEdits
	device    string // what the grader reports graded on ("cpu: MODEL", "gpu: MODEL")
	taskJudge *grader.TaskJudging

	// serve's (zero when the run ended before its clock started)
	clock             *policy.RunClock
	started, deadline time.Time      // deadline: moved by the pauses
	pauses            []attest.Pause // a human run's, granted by its operator
	gsvc              *grader.Service
	hist              *grader.History // gsvc's, or the one Invalidate opened

	// the end's
	out       *Outcome
	reportSum string               // report.json's SHA-256
	used      *policy.Usage        // the run's model use, from its audit log (addUsage)
	attached  []attest.HumanAttach // a human run's attaches, from its audit log (addUsage)

	closers []func()
}

func (x *Executor) newRunState(spec RunSpec, rio *runIO) *runState {
	now := x.Now
	if now == nil {
		now = time.Now
	}
	return &runState{x: x, spec: spec, t: spec.Track, now: now, io: rio}
}

// onClose registers f to run when the run's state is closed.
func (rs *runState) onClose(f func()) { rs.closers = append(rs.closers, f) }

// close undoes what the phases set up, last first.
func (rs *runState) close() {
	for i := len(rs.closers) - 1; i >= 0; i-- {
		rs.closers[i]()
	}
}

// Execute runs one sealed run from preparing to its signed attestation. The run directory is
// <state>/runs/<id>. An infrastructure failure makes the run invalid (never an error of
// Execute, which returns an error only when not even an attestation could be written).
func (x *Executor) Execute(ctx context.Context, spec RunSpec) (*Outcome, error) {
	rs, out, err := x.admit(ctx, spec)
	if rs == nil {
		return out, err
	}
	defer rs.close()
	status, reason := api.StateInvalid, rs.prepare(ctx)
	if reason == "" {
		status, reason = rs.serve(ctx)
	}
	return rs.end(ctx, status, reason)
}

// end grades the run when it reached grading (status StateGrading), writes report.json, builds,
// signs and writes the attestation, and records the end.
func (rs *runState) end(ctx context.Context, status, reason string) (*Outcome, error) {
	if rs.hist == nil && rs.gsvc != nil {
		rs.hist = rs.gsvc.History()
	}
	if ctx.Err() != nil && status != api.StateGrading {
		// Whatever failed once the run was cancelled failed because of the cancel.
		status, reason = api.StateInvalid, "cancelled"
	}
	rs.out = &Outcome{Status: outcome.Outcome(status), Reason: reason} // "grading" until the grader says
	if status == api.StateGrading {
		rs.grade(ctx)
	}
	ctx = context.WithoutCancel(ctx) // the end is recorded and attested even when cancelled
	if rs.started.IsZero() {
		rs.started = rs.now()
		rs.deadline = rs.started.Add(rs.t.Budget.Wall)
	}
	if err := rs.reportUngraded(); err != nil {
		return nil, err
	}
	if f := rs.x.failure.Load(); f != nil && (status != api.StateInvalid || reason == "cancelled") {
		// The journal or the ledger could not be written: nothing this run did can be recorded
		// as it should, so it does not count.
		rs.out.Status, rs.out.Reason = outcome.Invalid, "the daemon could not write its "+f.Error()
	}
	if err := rs.addUsage(); err != nil {
		return nil, err
	}
	pred, subjects, err := rs.predicate(ctx)
	if err != nil {
		return nil, err
	}
	st, err := rs.sign(ctx, pred, subjects)
	if err != nil {
		return nil, err
	}
	if err := rs.record(st, pred); err != nil {
		return nil, err
	}
	return rs.out, nil
}

func (x *Executor) state(run, state, reason string) {
	x.emit(api.Event{Run: run, Kind: api.EventState, State: state, Reason: reason})
}

func (x *Executor) event(run string, kind api.EventKind, reason string) {
	x.emit(api.Event{Run: run, Kind: kind, Reason: reason})
}

func (x *Executor) emit(e api.Event) {
	e.Time = time.Now().UTC()
	if x.Journal != nil {
		if err := x.Journal.Append(e); err != nil && x.onFail != nil {
			x.onFail("journal", err)
		}
	}
	if x.onEvent != nil {
		x.onEvent(e)
	}
}

// Invalidate attests a run that ends invalid without having run (cancelled while queued,
// refused at start, or cut by a daemon restart): report.json and result.att.json say why.
// started is when the run had started (zero if it never did).
func (x *Executor) Invalidate(ctx context.Context, spec RunSpec, reason string, started time.Time) (*Outcome, error) {
	dir := filepath.Join(x.Cfg.StateDir, "runs", spec.ID)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	rio := &runIO{dir: dir, task: storedTask(x.Cfg.StateDir, spec.Track), infraCh: make(chan struct{})}
	var err error
	if rio.log, err = audit.Open(filepath.Join(dir, "audit.jsonl")); err != nil {
		return nil, err
	}
	defer rio.log.Close()
	hist, err := grader.OpenHistory(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	defer hist.Close()
	rs := x.newRunState(spec, rio)
	rs.hist, rs.started = hist, started
	if !started.IsZero() {
		rs.deadline = started.Add(spec.Track.Budget.Wall)
	}
	return rs.end(ctx, api.StateInvalid, reason)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
