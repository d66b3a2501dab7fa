package daemon

// Phase 3 of a run, serve: the clock starts, the model gateway, the grader's and the runner's
// services and the agent socket come up, the scaffold's controller starts, and the run waits
// for its end: the deadline, finalize, the scaffold exiting, an infrastructure failure or a
// cancel. The compute-call limits and the clock are enforced in the runner (runner.Service),
// submissions and validations in the grader (grader.Service).

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/inflight"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/runner"
	"github.com/sealrun/sealrun/sandbox"
)

// serve runs the agent until the run ends and returns how: StateGrading when it ended as a run
// should (deadline, finalize, the scaffold done), else StateInvalid and the reason.
func (rs *runState) serve(ctx context.Context) (status, reason string) {
	x, spec, t := rs.x, rs.spec, rs.t
	// A human run waits for its person first (human_linux.go): its clock starts at the first
	// attach, or when human.start is over.
	var human *humanRun
	if hostconfig.IsHuman(spec.Agent.String()) {
		x.state(spec.ID, api.StateRunning, "")
		var st, why string
		if human, st, why = rs.openHuman(ctx); st != "" {
			return st, why
		}
	}
	rs.clock = t.Budget.Start(policy.Clock(rs.now))
	sched := rs.clock.Schedule()
	rs.started, rs.deadline = sched.Start, sched.Deadline
	if human == nil {
		x.state(spec.ID, api.StateRunning, "")
	} else {
		// The record's start and deadline are the clock's, not the wait's.
		data, _ := json.Marshal(map[string]time.Time{"started": rs.started.UTC(), "deadline": rs.deadline.UTC()})
		x.emit(api.Event{Run: spec.ID, Kind: api.EventClockStarted, Data: data})
		stopFlush, err := human.startRecording(rs)
		if err != nil {
			human.sess.End("the host failed")
			return api.StateInvalid, "infrastructure: " + err.Error()
		}
		defer func() {
			stopFlush()
			status, reason = human.end(rs, status, reason)
		}()
	}
	gw, err := controller.NewGateway(rs.pins.provider, spec.Agent, rs.io.log, controller.WithBodiesDir(filepath.Join(rs.io.dir, "gateway")), controller.WithGatewayInfraHandler(rs.io.onInfra),
		controller.WithSpendLimit(t.Budget.MaxTokens, t.Budget.MaxCost.Amount, rs.pins.price))
	if err != nil {
		return api.StateInvalid, "gateway: " + err.Error()
	}
	gl, err := sandbox.ListenGateway(ctx, rs.run.GatewayNetns(), controller.DefaultPort)
	if err != nil {
		return api.StateInvalid, "gateway: " + err.Error()
	}
	// The gateway's requests under way return before the run's end reads the audit log: each
	// appends its exchange's entry (inflight).
	exchanges := inflight.New()
	gsrv := &http.Server{Handler: exchanges.Wrap(gw), ReadHeaderTimeout: 10 * time.Second}
	go gsrv.Serve(gl)
	closeGateway := func() {
		gsrv.Close()
		if left := exchanges.Close(runner.DrainTimeout); left > 0 {
			x.event(spec.ID, api.EventGatewayRequestsLeft, fmt.Sprintf("%d gateway request(s) still running %s after the gateway closed: their audit entries may follow the run's end", left, runner.DrainTimeout))
		}
	}
	rs.onClose(closeGateway)
	if reason := rs.startGrader(); reason != "" {
		return api.StateInvalid, reason
	}
	finalized := make(chan struct{})
	rsvc, sock, stopServing, reason := rs.startRunner(finalized)
	if reason != "" {
		return api.StateInvalid, reason
	}
	startController := func() (*controller.Controller, error) {
		cfg := controller.Config{Rootfs: rs.pins.controller, Entrypoint: rs.pins.entrypoint, ImageEnv: rs.pins.imageEnv, Workspace: rs.ws, Runner: x.Cfg.Runner,
			Socket: sock, Agent: spec.Agent, Kind: providerKind(rs.pins.provider), Transcript: filepath.Join(rs.io.dir, "transcript.log"), Limits: rs.limits,
			Env: append([]string{"SEALRUN_RUN_ID=" + spec.ID, fmt.Sprintf("SEALRUN_SEED=%d", spec.Seed)}, rs.pins.scaffoldEnv...)}
		if human != nil {
			return controller.StartHuman(ctx, rs.run, cfg, human.sess, human.rec)
		}
		return controller.Start(ctx, rs.run, cfg)
	}
	// A controller whose scaffold never ran (the runtime failed to start it: sandbox.NeverRan)
	// is started once more, recorded: nothing of the agent's ran, and the clock it lost is seconds.
	var ctl *controller.Controller
	for attempt := 1; ; attempt++ {
		var err error
		ctl, err = startController()
		if err == nil {
			var pz *pauser
			if human != nil {
				pz = &pauser{rs: rs, ctl: ctl, rsvc: rsvc}
				human.pauser.Store(pz)
			}
			status, reason = rs.await(ctx, ctl, rsvc, finalized)
			if pz != nil { // a pause under way ends with the run: the shell and compute thawed to stop
				human.pauser.Store(nil)
				rs.pauses = append(rs.pauses, pz.stop("the run ended")...)
			}
			if status != "" || !rs.neverRan(ctl) {
				break
			}
			err = ctl.Exited()
			ctl.Stop(context.Background())
		}
		if attempt == 1 && sandbox.NeverRan(err) && ctx.Err() == nil && time.Now().Before(rs.deadline) {
			x.event(spec.ID, api.EventControllerRestarted, "the scaffold never ran (the host's fault), started again: "+err.Error())
			continue
		}
		return api.StateInvalid, "infrastructure: controller: " + err.Error()
	}
	rsvc.End()
	if err := ctl.Stop(context.Background()); err != nil && status == "" {
		status, reason = api.StateInvalid, "stop controller: "+err.Error()
	}
	stopServing()
	closeGateway()
	if st := gw.Stats(); status == "" && (st.Exhausted > 0 || st.ProviderLost > t.Budget.Wall/10) {
		status, reason = api.StateInvalid, fmt.Sprintf("provider outage: %d requests exhausted their retries, %s of provider time lost (controller/GATEWAY.md)", st.Exhausted, st.ProviderLost.Round(time.Second))
	}
	if status == "" {
		return api.StateGrading, ""
	}
	return status, reason
}

// startGrader starts the grader's service: submissions, validations and, at the end, the
// final grading, each in a grader container of the run.
func (rs *runState) startGrader() (reason string) {
	t, p := rs.t, rs.pins
	genv := &grader.Env{Run: rs.run, Rootfs: p.grader, Image: t.Images.Grader.String(), Limits: rs.limits, Device: rs.device,
		Devices: rs.gpus.Devices, Mounts: rs.gpus.Mounts, GPUEnv: rs.gpus.Env, Symlinks: rs.gpus.Symlinks,
		Question: t.Budget.QuestionLimit, WorkDir: filepath.Join(rs.io.dir, "grading"), Bundle: grader.DefaultLimits(t.Artifact.MaxGzipBytes)}
	gsvc, err := grader.NewService(grader.ServiceConfig{Env: genv, Track: t, Validation: p.validation, Task: rs.taskJudge, Workspace: rs.ws, Dir: rs.io.dir, Audit: rs.io.log,
		Start: rs.started, Now: rs.now, OnInfra: rs.io.onInfra})
	if err != nil {
		return "grader: " + err.Error()
	}
	rs.gsvc = gsvc
	rs.onClose(func() { gsvc.Close() })
	return ""
}

// startRunner starts the runner's service on the agent socket. finalized is closed once the
// agent has been sent the confirmation of its finalize. stopServing stops taking calls.
func (rs *runState) startRunner(finalized chan struct{}) (rsvc *runner.Service, sock string, stopServing func(), reason string) {
	x := rs.x
	var finOnce sync.Once
	rsvc, err := runner.NewService(rs.run, runner.Config{Clock: rs.clock, Image: rs.pins.runner, Workspace: rs.ws, Shim: x.Cfg.Runner,
		Audit: rs.io.log, CallsDir: filepath.Join(rs.io.dir, "calls")}, runner.WithJudge(grader.Judge{Service: rs.gsvc}),
		runner.WithLimits(rs.limits), runner.WithInfraHandler(rs.io.onInfra), runner.WithGPUs(rs.gpus),
		// The run ends on finalize once the agent has been sent its confirmation.
		runner.WithAnswered(func(verb string) {
			if verb == "finalize" {
				finOnce.Do(func() { close(finalized) })
			}
		}))
	if err != nil {
		return nil, "", nil, "runner: " + err.Error()
	}
	rs.onClose(func() { rsvc.Close() })
	// The socket lives on the run's own small tmpfs: its bind mount in the controller then
	// shows "/agent.sock", not the state directory's path.
	sdir, err := rs.run.SocketDir()
	sock = filepath.Join(sdir, "agent.sock")
	var sl net.Listener
	if err == nil {
		sl, err = runner.Listen(sock, int(rs.run.SharedGID()))
	}
	if err != nil {
		return nil, "", nil, "agent socket: " + err.Error()
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { rsvc.Serve(sctx, sl); close(served) }()
	// Stopping waits for Serve, which returns once every request under way has (its audit entry
	// written).
	stopServing = func() { stop(); <-served }
	rs.onClose(func() { stopServing(); os.Remove(sock) })
	return rsvc, sock, stopServing, ""
}

// neverRan: the controller's container ended without its scaffold having run.
func (rs *runState) neverRan(ctl *controller.Controller) bool {
	select {
	case <-ctl.Done():
		return sandbox.NeverRan(ctl.Exited())
	default:
		return false
	}
}

// FinalWords is how long a scaffold has, after its finalize was confirmed (or a failure ended
// the run), to print the confirmation and say its last words before it is frozen; the run
// ends sooner when the scaffold exits. Nothing it does then counts: the runner takes no call.
// One second lost the last tool call's line of opencode's output under load (its printer
// follows its own event stream): the transcript must show every call.
const FinalWords = 5 * time.Second

// await waits for the run's end. The status is "" when the run ended as a run should.
func (rs *runState) await(ctx context.Context, ctl *controller.Controller, rsvc *runner.Service, finalized chan struct{}) (status, reason string) {
	x, id := rs.x, rs.spec.ID
	timer := time.NewTimer(time.Until(rs.deadline))
	defer timer.Stop()
	// The deadline moves when a pause ends (a human run's): the timer follows the clock, and
	// is not set while the clock stands still.
	defer func() { rs.deadline = rs.clock.Schedule().Deadline }()
	// After finalize or a failure nothing new may start; the scaffold gets FinalWords to read
	// the confirmation or why (its runner client prints it), and to print it, before it is
	// frozen: it ends sooner when the scaffold exits.
	wind := func() {
		rsvc.End()
		select {
		case <-ctl.Done():
		case <-time.After(FinalWords):
		}
	}
	for {
		changed := rs.clock.Changed()
		timer.Stop()
		var deadline <-chan time.Time
		if _, paused := rs.clock.Paused(); !paused {
			timer.Reset(time.Until(rs.clock.Schedule().Deadline))
			deadline = timer.C
		}
		select {
		case <-changed:
			continue
		case <-deadline:
			x.event(id, api.EventDeadline, "")
		case <-finalized:
			x.event(id, api.EventFinalized, "")
			wind()
		case <-ctl.Done():
			if err := ctl.Exited(); err != nil {
				if sandbox.NeverRan(err) {
					return "", "" // serve starts it again, once
				}
				return api.StateInvalid, "infrastructure: controller: " + err.Error()
			}
			x.event(id, api.EventAgentExited, ctl.Ended()+" before the deadline; the run ends now")
		case <-rs.io.infraCh:
			status, reason = api.StateInvalid, "infrastructure: "+rs.io.infra.Error()
			wind()
		case <-ctx.Done():
			status, reason = api.StateInvalid, "cancelled"
		}
		return status, reason
	}
}
