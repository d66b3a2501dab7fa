package daemon

// Phase 2 of a run, prepare: the sandbox's run (UID range, cgroups, gateway namespace), the
// quota'd workspace, the limits every container of the run gets, the GPUs the queue gave it, a
// task's own preparation and the workspace's seed. All of it before the clock starts.

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
)

// prepare readies the run for its agent. It returns why the run cannot go on ("" when it can):
// the run then ends invalid with that reason.
func (rs *runState) prepare(ctx context.Context) string {
	x, spec, t, p := rs.x, rs.spec, rs.t, rs.pins
	run, err := x.Host.NewRun(ctx, spec.ID)
	if err != nil {
		return "sandbox: " + err.Error()
	}
	rs.run = run
	rs.onClose(func() {
		// The run's result stands (its end is recorded); what could not be removed is the host's
		// to clean, and someone must read that it is left: the journal and the run's followers
		// say so, sealrun doctor lists it, and sealrund's reap at its next start removes it.
		if err := run.Destroy(context.Background()); err != nil {
			x.event(spec.ID, api.EventTeardownFailed, err.Error()+"; sealrun doctor lists what is left, and sealrund removes it when it next starts (or sealrun sandbox reap, while it is stopped)")
		}
	})
	rs.ws = filepath.Join(rs.io.dir, "workspace")
	if err := run.PrepareWorkspace(rs.ws, t.Resources.Workspace); err != nil {
		return "workspace: " + err.Error()
	}
	if rs.limits, err = x.runLimits(spec, rs.ws); err != nil {
		return "workspace I/O caps: " + err.Error()
	}
	rs.gpus = &sandbox.GPUEdits{}
	if len(spec.GPUs) > 0 {
		if rs.gpus, err = sandbox.ResolveGPUs(x.Cfg.CDIDirs(), spec.GPUs); err != nil {
			return "GPUs: " + err.Error()
		}
	}
	rs.device = "cpu: " + grader.CPUModel()
	if len(spec.GPUs) > 0 {
		model, _ := gpuFacts(x.Cfg, spec.GPUs)
		rs.device = "gpu: " + model
	}
	if p.task != nil {
		// Before the clock: the task's own preparation is not the agent's time.
		penv := &grader.Env{Run: run, Rootfs: p.grader, Image: t.Images.Grader.String(), Limits: rs.limits, Device: rs.device}
		dataDir, err := x.prepareTask(ctx, spec, rs.io, penv, rs.ws, p)
		if err != nil {
			return "task preparation (the task's scripts, not the agent, failed): " + err.Error()
		}
		rs.taskJudge = &grader.TaskJudging{Meta: &p.task.Meta, TaskDir: p.task.Dir, DataDir: dataDir, RawDir: p.taskData}
	}
	if err := x.seed(rs.ws, t, p); err != nil {
		return "workspace seed: " + err.Error()
	}
	return ""
}

// runLimits are the limits of every container of a run: the executor's, else the track's CPUs
// and memory, the CPUs the queue gave the run, and the host's workspace I/O caps on the
// workspace's device.
func (x *Executor) runLimits(spec RunSpec, ws string) (sandbox.Limits, error) {
	t := spec.Track
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
			return limits, err
		}
		limits.IOReadBPS, limits.IOWriteBPS, limits.IODevices = r, w, []string{dev}
	}
	return limits, nil
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
