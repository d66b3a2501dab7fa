package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/runner"
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
}

// Executor runs sealed runs on this host.
type Executor struct {
	Cfg     *Config
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
	Now    func() time.Time
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

	onEvent func(Event) // the daemon's live subscribers
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
	x.event(run, "hold", point)
	<-ctx.Done()
}

// Outcome is how a run ended.
type Outcome struct {
	Status      string
	Reason      string
	Report      *grader.Report     // an exam run's
	TaskReport  *grader.TaskReport // a task run's
	Attestation string             // path of result.att.json
}

// pins are a run's verified inputs.
type pins struct {
	controller, runner, grader string   // rootfs paths
	entrypoint                 []string // the scaffold's command (the controller image's)
	imageEnv                   []string // the controller image's own environment (its ENV)
	scaffold                   string   // the scaffold's name (the controller image's label)
	scaffoldEnv                []string // its per-run configuration (opencode: its rendered config)
	exam, validation           *exams.Exam
	kit                        *kits.Kit
	provider                   controller.ProviderConfig
	task                       *airs.Task // a task run's task, verified
	taskData                   string     // and its raw data directory, verified
	notes                      []string   // what Check noticed but does not refuse (versions)
}

// Check verifies every pin of the track for this host before anything is created: the three
// images in the store, the scaffold pin against the controller image's labels, the exam by
// SHA-256, the kit by its hash (every file) and the validation set in it (or, for a task track,
// the task and its raw data by their tree hashes), the provider of the agent. The error names
// the mismatch, the file and the fix.
func (x *Executor) Check(spec RunSpec) (*pins, error) {
	t := spec.Track
	var p pins
	var errs []error
	for _, im := range []struct {
		role string
		ref  policy.ImageRef
		dst  *string
	}{{"controller", t.Images.Controller, &p.controller}, {"runner", t.Images.Runner, &p.runner}, {"grader", t.Images.Grader, &p.grader}} {
		root, err := x.Store.Rootfs(im.ref.Digest)
		if err != nil {
			errs = append(errs, fmt.Errorf("track %s pins the %s image %s, which is not in the image store (%v); pull or import it (sealrun images pull %s)", t.Name, im.role, im.ref, err, im.ref))
			continue
		}
		*im.dst = root
	}
	if p.controller != "" {
		ep, name, env, err := x.scaffold(t)
		if err != nil {
			errs = append(errs, err)
		}
		p.entrypoint, p.scaffold, p.imageEnv = ep, name, env
	}
	if t.Task != nil {
		errs = append(errs, x.checkTask(t, &p)...)
	} else {
		errs = append(errs, x.checkExam(t, &p)...)
	}
	prov, ok := x.Cfg.Providers[spec.Agent.Provider]
	if spec.Agent.Provider == NoProvider {
		prov, ok = controller.NoProvider, true
	}
	if !ok {
		errs = append(errs, fmt.Errorf("the agent's provider %q is not configured in %s; add [providers.%s]", spec.Agent.Provider, x.Cfg.path, spec.Agent.Provider))
	}
	p.provider = prov
	if ok && p.scaffold == images.OpencodeScaffoldName {
		// opencode's config is rendered now, so that a provider or model it cannot take is
		// refused before anything is created.
		cfg, err := kits.OpencodeConfig(providerKind(prov), controller.GatewayURL(0), spec.Agent.Model, spec.Agent.Effort)
		if err != nil {
			errs = append(errs, fmt.Errorf("track %s pins the opencode scaffold: %v", t.Name, err))
		}
		p.scaffoldEnv = []string{"OPENCODE_CONFIG_CONTENT=" + cfg}
	}
	if t.Status != policy.StatusActive {
		errs = append(errs, fmt.Errorf("track %s %s is %s: it takes no new runs", t.Name, t.Version, t.Status))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkExam verifies an exam track's exam, kit and validation set.
func (x *Executor) checkExam(t *policy.Track, p *pins) []error {
	var errs []error
	var err error
	if p.exam, err = exams.Open(ContentPath(x.Cfg.StateDir, t.Exam.SHA256), t.Exam.SHA256); err != nil {
		errs = append(errs, fmt.Errorf("the hidden exam %s: %v; add it with sealrun content add EXAM", t.Exam.SHA256, err))
	} else if int64(len(p.exam.Questions)) != t.Exam.Questions || int64(p.exam.Header.ContextBytes) != t.Exam.ContextBytes {
		errs = append(errs, fmt.Errorf("the hidden exam has %d questions and %d bytes of context; the track says %d and %d", len(p.exam.Questions), p.exam.Header.ContextBytes, t.Exam.Questions, t.Exam.ContextBytes))
	}
	kitDir := KitPath(x.Cfg.StateDir, t.Kit.SHA256)
	if _, err := os.Stat(kitDir); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins kit %s, which is not in this host's kit store (%v); add it with sealrun content add KITDIR (sealrun kit build makes one)", t.Name, t.Kit.SHA256, unwrap(err)))
	} else if p.kit, err = kits.Open(kitDir); err != nil {
		errs = append(errs, fmt.Errorf("track %s: %w", t.Name, err))
	} else if err := p.kit.Check(t.Kit.SHA256, t.Name); err != nil {
		errs = append(errs, err)
	} else if f, ok := p.kit.File(kits.ValidationPath); !ok || f.SHA256 != t.Exam.ValidationSHA256 {
		errs = append(errs, fmt.Errorf("kit %s: %s has sha256 %s, track %s pins the validation set %s; the track and its kit disagree: rebuild the track from the kit", t.Kit.SHA256, kits.ValidationPath, f.SHA256, t.Name, t.Exam.ValidationSHA256))
	} else if p.validation, err = exams.Open(filepath.Join(p.kit.Dir, kits.ValidationPath), t.Exam.ValidationSHA256); err != nil {
		errs = append(errs, fmt.Errorf("kit %s: the validation set: %v", t.Kit.SHA256, err))
	}
	return errs
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

// Execute runs one sealed run from preparing to its signed attestation. The run directory is
// <state>/runs/<id>. An infrastructure failure makes the run invalid (never an error of
// Execute, which returns an error only when not even an attestation could be written).
func (x *Executor) Execute(ctx context.Context, spec RunSpec) (*Outcome, error) {
	now := x.Now
	if now == nil {
		now = time.Now
	}
	if err := x.checkSeams(); err != nil {
		return nil, err
	}
	t := spec.Track
	dir := filepath.Join(x.Cfg.StateDir, "runs", spec.ID)
	x.state(spec.ID, StatePreparing, "")
	x.hold(ctx, spec.ID, "preparing")
	if ctx.Err() != nil {
		return x.Invalidate(context.WithoutCancel(ctx), spec, "cancelled", time.Time{})
	}
	p, err := x.Check(spec)
	if err != nil {
		return nil, err
	}
	for _, n := range p.notes {
		x.event(spec.ID, "check_note", n)
	}
	for _, d := range []string{x.Cfg.StateDir, filepath.Join(x.Cfg.StateDir, "runs")} {
		os.MkdirAll(d, 0o711)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl")); err == nil {
		return nil, fmt.Errorf("run %s has run before (its audit log exists); a run id is executed once", spec.ID)
	}
	rio := &runIO{dir: dir, exam: p.exam, task: p.task, infraCh: make(chan struct{})}
	if rio.log, err = audit.Open(filepath.Join(dir, "audit.jsonl")); err != nil {
		return nil, err
	}
	defer rio.log.Close()
	rio.log.OnAppend(func(kind string, line []byte) {
		// Live only: the audit log itself is the durable record.
		if x.onEvent != nil {
			if s := activity(kind, line); s != "" {
				x.onEvent(Event{Time: time.Now().UTC(), Run: spec.ID, Kind: "activity", Reason: s})
			}
		}
	})

	run, err := x.Host.NewRun(ctx, spec.ID)
	if err != nil {
		return x.finish(ctx, spec, rio, nil, nil, nil, time.Time{}, time.Time{}, StateInvalid, "sandbox: "+err.Error())
	}
	defer run.Destroy(context.Background())
	ws := filepath.Join(dir, "workspace")
	if err := run.PrepareWorkspace(ws, t.Resources.Workspace); err != nil {
		return x.finish(ctx, spec, rio, nil, nil, nil, time.Time{}, time.Time{}, StateInvalid, "workspace: "+err.Error())
	}
	limits := x.Limits
	if limits.CPUs == 0 {
		limits.CPUs = float64(t.Resources.CPUs)
	}
	if limits.MemoryBytes == 0 {
		limits.MemoryBytes = t.Resources.Memory
	}
	if limits.CPUSet == "" {
		limits.CPUSet = spec.CPUSet
	}
	if r, w := x.Cfg.Resources.WorkspaceReadBPS, x.Cfg.Resources.WorkspaceWriteBPS; (r > 0 || w > 0) && len(limits.IODevices) == 0 {
		dev, err := sandbox.DeviceOf(ws)
		if err != nil {
			return x.finish(ctx, spec, rio, run, nil, nil, time.Time{}, time.Time{}, StateInvalid, "workspace I/O caps: "+err.Error())
		}
		limits.IOReadBPS, limits.IOWriteBPS, limits.IODevices = r, w, []string{dev}
	}

	gpus := &sandbox.GPUEdits{}
	if len(spec.GPUs) > 0 {
		if gpus, err = sandbox.ResolveGPUs(x.Cfg.cdiDirs(), spec.GPUs); err != nil {
			return x.finish(ctx, spec, rio, run, nil, nil, time.Time{}, time.Time{}, StateInvalid, "GPUs: "+err.Error())
		}
	}
	device := "cpu: " + grader.CPUModel()
	if len(spec.GPUs) > 0 {
		model, _ := gpuFacts(x.Cfg, spec.GPUs)
		device = "gpu: " + model
	}
	var taskJudge *grader.TaskJudging
	if p.task != nil {
		// Before the clock: the task's own preparation is not the agent's time.
		penv := &grader.Env{Run: run, Rootfs: p.grader, Image: t.Images.Grader.String(), Limits: limits, Device: device}
		dataDir, err := x.prepareTask(ctx, spec, rio, penv, ws, p)
		if err != nil {
			return x.finish(ctx, spec, rio, run, nil, nil, time.Time{}, time.Time{}, StateInvalid, "task preparation (the task's scripts, not the agent, failed): "+err.Error())
		}
		taskJudge = &grader.TaskJudging{Meta: &p.task.Meta, TaskDir: p.task.Dir, DataDir: dataDir, RawDir: p.taskData}
	}
	if err := x.seed(ws, t, p); err != nil {
		return x.finish(ctx, spec, rio, run, nil, nil, time.Time{}, time.Time{}, StateInvalid, "workspace seed: "+err.Error())
	}

	clock := t.Budget.Start(policy.Clock(now))
	started := clock.Start
	x.state(spec.ID, StateRunning, "")
	gw, err := controller.NewGateway(p.provider, spec.Agent, controller.WithGatewayAudit(rio.log), controller.WithBodiesDir(filepath.Join(dir, "gateway")), controller.WithGatewayInfraHandler(rio.onInfra))
	if err != nil {
		return x.finish(ctx, spec, rio, run, nil, nil, started, clock.Deadline, StateInvalid, "gateway: "+err.Error())
	}
	gl, err := sandbox.ListenGateway(ctx, run.GatewayNetns(), controller.DefaultPort)
	if err != nil {
		return x.finish(ctx, spec, rio, run, nil, nil, started, clock.Deadline, StateInvalid, "gateway: "+err.Error())
	}
	gsrv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go gsrv.Serve(gl)
	defer gsrv.Close()

	finalized := make(chan struct{})
	var finOnce sync.Once
	genv := &grader.Env{Run: run, Rootfs: p.grader, Image: t.Images.Grader.String(), Limits: limits, Device: device,
		Devices: gpus.Devices, Mounts: gpus.Mounts, GPUEnv: gpus.Env, Symlinks: gpus.Symlinks,
		Question: t.Budget.QuestionLimit, WorkDir: filepath.Join(dir, "grading"), Bundle: grader.DefaultLimits(t.Artifact.MaxGzipBytes)}
	gsvc, err := grader.NewService(grader.ServiceConfig{Env: genv, Track: t, Validation: p.validation, Task: taskJudge, Workspace: ws, Dir: dir, Audit: rio.log,
		Start: started, Now: now, OnInfra: rio.onInfra})
	if err != nil {
		return x.finish(ctx, spec, rio, run, nil, nil, started, clock.Deadline, StateInvalid, "grader: "+err.Error())
	}
	defer gsvc.Close()
	rsvc, err := runner.NewService(run, runner.WithClock(clock), runner.WithImage(p.runner), runner.WithWorkspace(ws), runner.WithShim(x.Cfg.Runner),
		runner.WithAudit(rio.log), runner.WithCallsDir(filepath.Join(dir, "calls")), runner.WithJudge(grader.Judge{Service: gsvc}),
		runner.WithLimits(limits), runner.WithInfraHandler(rio.onInfra), runner.WithGPUs(gpus),
		// The run ends on finalize once the agent has been sent its confirmation.
		runner.WithAnswered(func(verb string) {
			if verb == "finalize" {
				finOnce.Do(func() { close(finalized) })
			}
		}))
	if err != nil {
		return x.finish(ctx, spec, rio, run, gsvc, nil, started, clock.Deadline, StateInvalid, "runner: "+err.Error())
	}
	defer rsvc.Close()
	// The socket lives on the run's own small tmpfs: its bind mount in the controller then
	// shows "/agent.sock", not the state directory's path.
	sdir, err := run.SocketDir()
	sock := filepath.Join(sdir, "agent.sock")
	var sl net.Listener
	if err == nil {
		sl, err = runner.Listen(sock, int(run.SharedGID()))
	}
	if err != nil {
		return x.finish(ctx, spec, rio, run, gsvc, nil, started, clock.Deadline, StateInvalid, "agent socket: "+err.Error())
	}
	sctx, stopServing := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { rsvc.Serve(sctx, sl); close(served) }()
	defer func() { stopServing(); <-served; os.Remove(sock) }()

	ctl, err := controller.Start(ctx, run, controller.Config{Rootfs: p.controller, Entrypoint: p.entrypoint, ImageEnv: p.imageEnv, Workspace: ws, Runner: x.Cfg.Runner,
		Socket: sock, Agent: spec.Agent, Kind: providerKind(p.provider), Transcript: filepath.Join(dir, "transcript.log"), Limits: limits,
		Env: append([]string{"SEALRUN_RUN_ID=" + spec.ID, fmt.Sprintf("SEALRUN_SEED=%d", spec.Seed)}, p.scaffoldEnv...)})
	if err != nil {
		return x.finish(ctx, spec, rio, run, gsvc, nil, started, clock.Deadline, StateInvalid, "controller: "+err.Error())
	}
	timer := time.NewTimer(time.Until(clock.Deadline))
	defer timer.Stop()
	status, reason := "", ""
	select {
	case <-timer.C:
		x.event(spec.ID, "deadline", "")
	case <-finalized:
		x.event(spec.ID, "finalized", "")
		// Nothing new may start; the scaffold gets a moment to read the confirmation (its
		// runner client prints it) before it is frozen.
		rsvc.End()
		select {
		case <-ctl.Done():
		case <-time.After(time.Second):
		}
	case <-ctl.Done():
		x.event(spec.ID, "agent_exited", "the scaffold exited before the deadline; the run ends now")
	case <-rio.infraCh:
		status, reason = StateInvalid, "infrastructure: "+rio.infra.Error()
		// As at finalize: nothing new starts; the scaffold has a moment to read why.
		rsvc.End()
		select {
		case <-ctl.Done():
		case <-time.After(time.Second):
		}
	case <-ctx.Done():
		status, reason = StateInvalid, "cancelled"
	}
	rsvc.End()
	if err := ctl.Stop(context.Background()); err != nil && status == "" {
		status, reason = StateInvalid, "stop controller: "+err.Error()
	}
	stopServing()
	gsrv.Close()
	if st := gw.Stats(); status == "" && (st.Exhausted > 0 || st.ProviderLost > t.Budget.Wall/10) {
		status, reason = StateInvalid, fmt.Sprintf("provider outage: %d requests exhausted their retries, %s of provider time lost (controller/GATEWAY.md)", st.Exhausted, st.ProviderLost.Round(time.Second))
	}
	if status != "" {
		return x.finish(ctx, spec, rio, run, gsvc, nil, started, clock.Deadline, status, reason)
	}
	return x.finish(ctx, spec, rio, run, gsvc, nil, started, clock.Deadline, StateGrading, "")
}

func providerKind(p controller.ProviderConfig) string {
	if p.Kind != "" {
		return p.Kind
	}
	return p.Name
}

// seed fills a fresh workspace with the kit (hashed again while copied): the brief, the starter
// code, the training text and the public validation set; or a task run's files (seedTask). Every
// file the agent gets is the agent's: group-owned by the run (the workspace is setgid),
// group-writable.
func (x *Executor) seed(ws string, t *policy.Track, p *pins) error {
	if p.task != nil {
		if err := seedTask(ws, t, p.task); err != nil {
			return err
		}
	} else if err := p.kit.Seed(ws); err != nil {
		return err
	}
	if x.TestOverlay != "" {
		return os.CopyFS(ws, os.DirFS(x.TestOverlay))
	}
	return nil
}

// scaffold checks the track's scaffold pin against the controller image's labels and returns
// the scaffold's command (the image's entrypoint and command, or Executor.Entrypoint), its name
// and the image's own environment (controller/SCAFFOLD.md).
func (x *Executor) scaffold(t *policy.Track) ([]string, string, []string, error) {
	cf, err := x.Store.Config(t.Images.Controller.Digest)
	if err != nil {
		return nil, "", nil, fmt.Errorf("the controller image %s: %v", t.Images.Controller, err)
	}
	if err := controller.CheckImageEnv(cf.Config.Env); err != nil {
		return nil, "", nil, fmt.Errorf("the controller image %s: %w", t.Images.Controller, err)
	}
	labels := cf.Config.Labels
	var bad []string
	for _, l := range []struct{ key, want string }{
		{images.LabelScaffoldName, t.Scaffold.Name}, {images.LabelScaffoldVer, t.Scaffold.Version}, {images.LabelScaffoldConfig, t.Scaffold.ConfigSHA256},
	} {
		if got := labels[l.key]; got != l.want {
			bad = append(bad, fmt.Sprintf("label %s is %q, the track says %q", l.key, got, l.want))
		}
	}
	if len(bad) > 0 {
		return nil, "", nil, fmt.Errorf("track %s pins scaffold %s %s (config %s), but its controller image %s is not that scaffold: %s; use the image the scaffold was released in, or a track that pins this one",
			t.Name, t.Scaffold.Name, t.Scaffold.Version, t.Scaffold.ConfigSHA256, t.Images.Controller, strings.Join(bad, "; "))
	}
	name := labels[images.LabelScaffoldName]
	if len(x.Entrypoint) > 0 {
		return x.Entrypoint, name, cf.Config.Env, nil
	}
	cmd := append(append([]string(nil), cf.Config.Entrypoint...), cf.Config.Cmd...)
	if len(cmd) == 0 {
		return nil, "", nil, fmt.Errorf("the controller image %s has no command (entrypoint or cmd): it carries no scaffold; give it an ENTRYPOINT or CMD", t.Images.Controller)
	}
	return cmd, name, cf.Config.Env, nil
}

// finish grades (when the run reached grading), writes report.json, builds and signs the
// attestation, and records the end state.
func (x *Executor) finish(ctx context.Context, spec RunSpec, rio *runIO, run *sandbox.Run, gsvc *grader.Service, hist *grader.History, started, deadline time.Time, status, reason string) (*Outcome, error) {
	if hist == nil && gsvc != nil {
		hist = gsvc.History()
	}
	if ctx.Err() != nil && status != StateGrading {
		// Whatever failed once the run was cancelled failed because of the cancel.
		status, reason = StateInvalid, "cancelled"
	}
	gradeCtx := ctx
	ctx = context.WithoutCancel(ctx) // the end is recorded and attested even when cancelled
	now := x.Now
	if now == nil {
		now = time.Now
	}
	t := spec.Track
	out := &Outcome{Status: status, Reason: reason}
	var reportSum string
	if status == StateGrading {
		x.state(spec.ID, StateGrading, "")
		var err error
		var graded func() // records the report and its outcome, once grading has not failed
		if t.Task != nil {
			var rep *grader.TaskReport
			rep, reportSum, err = gsvc.GradeTask(gradeCtx, now().Add(t.Budget.Grading))
			graded = func() { out.TaskReport, out.Status, out.Reason = rep, rep.Status, rep.Reason }
		} else {
			var rep *grader.Report
			rep, reportSum, err = gsvc.GradeFinal(gradeCtx, rio.exam, now().Add(t.Budget.Grading), func(v grader.PassVector) error {
				e := Event{Time: time.Now().UTC(), Run: spec.ID, Kind: "sealed", Data: mustJSON(map[string]any{"pass_vector_sha256": v.SHA256(), "passed": v.Passed(), "questions": len(v)})}
				if x.Journal != nil {
					if err := x.Journal.Append(e); err != nil {
						return err // not sealed: phase 2 must not start
					}
				}
				if x.onEvent != nil {
					x.onEvent(e)
				}
				return nil
			}, nil)
			graded = func() { out.Report, out.Status, out.Reason = rep, rep.Status, rep.Reason }
		}
		switch {
		case gradeCtx.Err() != nil:
			out.Status, out.Reason = StateInvalid, "cancelled"
		case err != nil:
			out.Status, out.Reason = StateInvalid, "grading: "+err.Error()
		default:
			graded()
		}
	}
	if started.IsZero() {
		started = now()
		deadline = started.Add(t.Budget.Wall)
	}
	if t.Task != nil && out.TaskReport == nil {
		head := ""
		if hist != nil {
			head, _ = hist.Head()
		}
		rep, sum, err := endTaskReport(rio.dir, t, rio.task, out.Status, out.Reason, head)
		if err != nil {
			return nil, err
		}
		out.TaskReport, reportSum = rep, sum
	} else if t.Task == nil && out.Report == nil {
		rep := &grader.Report{Format: grader.ReportFormat, Status: out.Status, Reason: out.Reason,
			Track: grader.ReportTrack{ID: t.ID, Name: t.Name, Version: t.Version},
			Exam:  grader.ReportExam{SHA256: t.Exam.SHA256, Questions: int(t.Exam.Questions), ContextBytes: int(t.Exam.ContextBytes)},
			Score: grader.NewScore(0, int(t.Exam.Questions))}
		if hist != nil {
			rep.HistoryHead, _ = hist.Head()
		}
		var err error
		if reportSum, err = grader.WriteReport(filepath.Join(rio.dir, "report.json"), rep); err != nil {
			return nil, err
		}
		out.Report = rep
	}
	if f := x.failure.Load(); f != nil && (status != StateInvalid || reason == "cancelled") {
		// The journal or the ledger could not be written: nothing this run did can be recorded
		// as it should, so it does not count.
		status, reason = StateInvalid, "the daemon could not write its "+f.Error()
		out.Status, out.Reason = status, reason
	}
	finished := now()
	pred := attest.PredicateFromTrack(t)
	if t.Task != nil {
		pred.Task = taskInfo(t, out.TaskReport)
	}
	model := spec.Agent.Provider + "/" + spec.Agent.Model
	pred.Agent = attest.Agent{Model: model, ReasoningEffort: spec.Agent.Effort}
	pred.Seed = spec.Seed
	pred.Run = attest.RunInfo{ID: spec.ID, RerunOf: spec.RerunOf}
	pred.Host = x.hostFacts(ctx)
	b := x.Build
	if b == nil { // an executor made in-process (tests): the running binary
		cb, err := CurrentBuild(x.Version, x.Commit)
		if err != nil {
			return nil, err
		}
		b = &cb
	}
	build := *b
	build.SeamsUsed = x.seamsUsed()
	pred.Build = &build
	pred.Host.GPUModel, pred.Host.GPUDriver = gpuFacts(x.Cfg, spec.GPUs)
	pred.Timeline = attest.Timeline{Queued: spec.Queued.UTC(), Started: started.UTC(), Deadline: deadline.UTC(), Finished: finished.UTC()}
	if pred.Timeline.Queued.After(pred.Timeline.Started) {
		pred.Timeline.Queued = pred.Timeline.Started
	}
	pred.AirGap.Containers = []attest.AirGapContainer{}
	if run != nil {
		for _, role := range []sandbox.Role{sandbox.RoleController, sandbox.RoleRunner, sandbox.RoleGrader} {
			if ev, ok := run.Evidence()[role]; ok {
				pred.AirGap.Containers = append(pred.AirGap.Containers, attest.AirGapContainer{Role: string(role), Links: ev.Links, Addresses: ev.Addresses, Routes: ev.Routes, EgressBlocked: true})
			}
		}
	}
	pred.Submissions.History = []attest.Submission{}
	if hist != nil {
		for _, c := range hist.Candidates() {
			pred.Submissions.History = append(pred.Submissions.History, attest.Submission{Digest: c.ID, Size: c.Size, Time: c.Time.UTC(), ValidationScore: c.Score, Promoted: c.Promoted})
		}
	}
	pred.Submissions.Head, _ = attest.HistoryHead(pred.Submissions.History)
	head, n := rio.log.Head()
	pred.Audit = attest.Audit{Head: head, Entries: n}
	subjects := []attest.Subject{attest.NewSubject(attest.SubjectReport, reportSum)}
	graded := ""
	if rep := out.TaskReport; rep != nil {
		pred.Result = attest.Result{Status: out.Status, Reason: out.Reason}
		if out.Status == StateGraded {
			pred.Result.Value, pred.Result.ValidSubmission, pred.Result.Invalid = rep.Value, rep.Valid, rep.Invalid
		}
		graded = rep.Candidate.ID
	} else {
		rep := out.Report
		pred.Result = attest.Result{Status: out.Status, Reason: out.Reason, Questions: int(t.Exam.Questions), Passed: rep.Score.Passed, Score: rep.Score.Percent,
			PassVectorSHA256: rep.PassVectorSHA256, BitsPerByte: rep.BitsPerByte}
		graded = rep.Candidate.ID
	}
	if graded != "" {
		subjects = append(subjects, attest.NewSubject(attest.SubjectBundle, strings.TrimPrefix(graded, "sha256:")))
	}
	if x.Ledger != nil {
		ref, err := x.Ledger.Ref(spec.ID)
		if err != nil {
			return nil, fmt.Errorf("the ledger reference of run %s: %w", spec.ID, err)
		}
		pred.Ledger = ref
	}
	st := attest.NewStatement(pred, subjects...)
	x.hold(ctx, spec.ID, "sign")
	env, err := attest.Sign(ctx, st, x.Signer)
	if err != nil && out.Status != StateInvalid {
		st = attest.NewStatement(pred, subjects...)
		// A result that cannot be attested as it is becomes invalid, with the reason, and is
		// attested as such: every finished run gets an attestation.
		out.Status, out.Reason = StateInvalid, "attestation: "+err.Error()
		pred.Result.Status, pred.Result.Reason = out.Status, out.Reason
		env, err = attest.Sign(ctx, st, x.Signer)
	}
	if err != nil {
		return nil, fmt.Errorf("sign the attestation of run %s: %w", spec.ID, err)
	}
	attPath := filepath.Join(rio.dir, "result.att.json")
	if err := exams.WriteAtomic(attPath, 0o644, func(w io.Writer) error { _, err := w.Write(env); return err }); err != nil {
		return nil, fmt.Errorf("write the attestation: %w", err)
	}
	out.Attestation = attPath
	payload, err := st.Canonical()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(payload)
	if err := x.ledgerEnded(spec.ID, out.Status, out.Reason, hex.EncodeToString(sum[:])); err != nil {
		return nil, fmt.Errorf("the ledger's end of run %s: %w", spec.ID, err)
	}
	x.writeSummary(rio.dir, spec, out, pred)
	if err := WriteRunReport(rio.dir, RunReport{ID: spec.ID, Track: t.Name + " " + t.Version, Agent: spec.Agent.String(), Seed: spec.Seed,
		Status: out.Status, Reason: out.Reason, Passed: pred.Result.Passed, Questions: pred.Result.Questions, Metric: pred.MetricText(),
		Started: pred.Timeline.Started, Deadline: pred.Timeline.Deadline, Finished: pred.Timeline.Finished}); err != nil {
		x.event(spec.ID, "report_html_failed", err.Error())
	}
	result := map[string]any{"passed": pred.Result.Passed, "questions": pred.Result.Questions, "attestation": attPath}
	if pred.Task != nil {
		result = map[string]any{"metric": pred.Task.Metric, "value": pred.Result.Value, "valid_submission": pred.Result.ValidSubmission, "attestation": attPath}
	}
	x.emit(Event{Run: spec.ID, Kind: "result", Data: mustJSON(result)})
	x.state(spec.ID, out.Status, out.Reason)
	return out, nil
}

func (x *Executor) writeSummary(dir string, spec RunSpec, out *Outcome, p *attest.Predicate) {
	var b strings.Builder
	fmt.Fprintf(&b, "run        %s\n", spec.ID)
	fmt.Fprintf(&b, "track      %s %s (%s)\n", spec.Track.Name, spec.Track.Version, spec.Track.ID)
	fmt.Fprintf(&b, "agent      %s, seed %d\n", spec.Agent.String(), spec.Seed)
	fmt.Fprintf(&b, "status     %s", out.Status)
	if out.Reason != "" {
		fmt.Fprintf(&b, " (%s)", out.Reason)
	}
	if p.Task != nil {
		fmt.Fprintf(&b, "\ntask       %s (%s)\n", p.Task.Name, p.Task.SHA256)
		fmt.Fprintf(&b, "metric     %s\n", p.MetricText())
	} else {
		fmt.Fprintf(&b, "\nscore      %d/%d = %.2f%%\n", p.Result.Passed, p.Result.Questions, p.Result.Score)
	}
	fmt.Fprintf(&b, "candidates %d\n", len(p.Submissions.History))
	fmt.Fprintf(&b, "audit      %d entries, head %s\n", p.Audit.Entries, p.Audit.Head)
	fmt.Fprintf(&b, "verify     sealrun verify %s --key PUB --bundle <candidate> --report %s --audit %s\n",
		filepath.Join(dir, "result.att.json"), filepath.Join(dir, "report.json"), filepath.Join(dir, "audit.jsonl"))
	exams.WriteAtomic(filepath.Join(dir, "summary.txt"), 0o644, func(w io.Writer) error { _, err := io.WriteString(w, b.String()); return err })
}

func (x *Executor) hostFacts(ctx context.Context) attest.Host {
	h := attest.Host{Runtime: x.Host.Runtime.Kind, SealrunVersion: x.Version, SealrunCommit: x.Commit, Runtimes: map[string]string{}}
	if v, err := x.Host.Runtime.Version(ctx); err == nil {
		h.RuntimeVersion = v
	}
	for _, role := range sandbox.Roles {
		h.Runtimes[string(role)] = x.Host.RuntimeFor(role).VersionLine
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

func (x *Executor) state(run, state, reason string) {
	x.emit(Event{Run: run, Kind: "state", State: state, Reason: reason})
}

func (x *Executor) event(run, kind, reason string) {
	x.emit(Event{Run: run, Kind: kind, Reason: reason})
}

func (x *Executor) emit(e Event) {
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
	var deadline time.Time
	if !started.IsZero() {
		deadline = started.Add(spec.Track.Budget.Wall)
	}
	return x.finish(ctx, spec, rio, nil, nil, hist, started, deadline, StateInvalid, reason)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// activity is one line for a follower about an audit entry.
func activity(kind string, line []byte) string {
	e, ok := parseAuditLine(line)
	if !ok {
		return ""
	}
	switch kind {
	case "call":
		argv := strings.Join(e.Argv, " ")
		if len(argv) > 60 {
			argv = argv[:60] + "…"
		}
		return fmt.Sprintf("call %d %s: %s, exit %d, %s", e.Call, argv, e.Status(), e.Exit, e.End.Sub(e.Start).Round(100*time.Millisecond))
	case "gateway":
		s := fmt.Sprintf("model request %d %s: %d in %d ms, %d+%d tokens", e.Request, e.Path, e.HTTPStatus(), e.LatencyMS, e.Usage.Prompt, e.Usage.Completion)
		if len(e.Tries) > 1 {
			s += fmt.Sprintf(" (%d tries)", len(e.Tries))
		}
		return s
	case "submit":
		return "submitted " + short12(e.Candidate)
	case "submit_refused":
		return "submission refused: " + e.Reason
	case "validation":
		return fmt.Sprintf("validation of %s: %d/%d", short12(e.Candidate), e.Passed, e.Questions)
	case "promote":
		return "promoted " + short12(e.Candidate)
	case "finalize":
		return "finalized"
	}
	return ""
}

// gpuFacts is the model of each of a run's GPUs and the driver, as the NVIDIA driver reports them
// (sandbox.GPUFacts); a GPU the driver does not describe is named by its CDI name.
func gpuFacts(cfg *Config, names []string) (model, driver string) {
	if len(names) == 0 {
		return "", ""
	}
	facts, err := sandbox.GPUFacts(cfg.cdiDirs(), "/proc", names)
	if err != nil {
		return strings.Join(names, ", "), ""
	}
	return sandbox.GPUModelAndDriver(facts)
}
