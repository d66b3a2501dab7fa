package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
)

// A sealed run of an AIRS task (a track with [task]) differs from an exam run in four places,
// and follows upstream's script protocol (airs/TASKS.md):
//
//   - Check verifies the task directory and the raw data directory in the content store against
//     the track's tree hashes (every file hashed again), validates the task's metadata.yaml, and
//     checks that the grader (evaluation) image has the Python distributions the task's
//     evaluate_container_python_requirements name and the runner image those of
//     container_python_requirements.
//   - Before the clock starts, prepare.py --global-shared-data-dir --agent-data-mount-dir
//     --agent-log-dir writes the agent's data into the run's task-data/ in a fresh grader-role
//     container with no network and the raw data read-only; the workspace's data/ gets a copy.
//     No agent-reachable container ever mounts task-data/ or the raw data.
//   - The workspace holds BRIEF.md (how this run works, then the task's project_description.md),
//     project_description.md, evaluate.py, utils.py and the task's other modules (never its
//     gold submissions or label scripts), and data/. The grader judges the task
//     (grader.TaskJudging): a submission is the files matching file_export_globs, with no
//     validation feedback.
//   - Grading runs evaluate_prepare.py (the submission as --agent-log-dir, a fresh copy of
//     task-data/ as --agent-data-mount-dir) and evaluate.py --submission-file
//     ./data/submission.csv on the promoted submission (grader.GradeTask); report.json is a task
//     report and the attestation a sealed-task-run predicate carrying the metric's value.

// TaskDataDir is the run directory's copy of prepare.py's output, as it wrote it: the agent
// works on its own copy (the workspace's data/); evaluation starts from this one.
const TaskDataDir = "task-data"

// checkTask verifies a task track's pins: the task directory and its raw data in the content
// store, each hashed again and compared with the track.
func (x *Executor) checkTask(t *policy.Track, p *pins) []error {
	var errs []error
	dir := api.TreePath(x.Cfg.StateDir, t.Task.SHA256)
	if _, err := os.Stat(dir); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins task %s (%s), which is not in this host's content store (%v); add it with sealrun content add TASKDIR", t.Name, t.Task.Name, t.Task.SHA256, fileio.Cause(err)))
	} else if task, err := airs.OpenStored(dir); err != nil {
		errs = append(errs, fmt.Errorf("track %s: the stored task %s: %v; add the task again (sealrun content add TASKDIR)", t.Name, t.Task.SHA256, err))
	} else if task.Hash != t.Task.SHA256 {
		errs = append(errs, fmt.Errorf("track %s pins task %s, but the stored copy hashes to %s: the content store is damaged; remove %s and add the task again", t.Name, t.Task.SHA256, task.Hash, dir))
	} else if task.Meta.Info.Name != t.Task.Name {
		errs = append(errs, fmt.Errorf("track %s names task %q, but the task it pins (%s) is %q; fix the track's task.name", t.Name, t.Task.Name, t.Task.SHA256, task.Meta.Info.Name))
	} else {
		p.task = task
	}
	if p.task != nil {
		errs = append(errs, checkTaskImages(t, p)...)
	}
	data := api.TreePath(x.Cfg.StateDir, t.Task.DataSHA256)
	if _, err := os.Stat(data); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins the raw data %s of task %s, which is not in this host's content store (%v); add it with sealrun content add DATADIR", t.Name, t.Task.DataSHA256, t.Task.Name, fileio.Cause(err)))
	} else if _, hash, err := airs.TreeHash(data, airs.MaxDataFiles, airs.MaxDataBytes); err != nil {
		errs = append(errs, fmt.Errorf("track %s: the stored raw data %s: %v; add it again (sealrun content add DATADIR)", t.Name, t.Task.DataSHA256, err))
	} else if hash != t.Task.DataSHA256 {
		errs = append(errs, fmt.Errorf("track %s pins the raw data %s, but the stored copy hashes to %s: the content store is damaged; remove %s and add the data again", t.Name, t.Task.DataSHA256, hash, data))
	} else {
		p.taskData = data
	}
	return errs
}

// checkTaskImages checks that the images a task track pins have what its metadata requires: the
// grader image (the evaluation image: prepare.py, evaluate_prepare.py and evaluate.py run there)
// has python3 and the distributions of evaluate_container_python_requirements and
// prepare_code_python_requirements; the runner image (the agent's compute) those of
// container_python_requirements. A requirement in another version than its exact pin is noted in
// p.notes, not refused.
func checkTaskImages(t *policy.Track, p *pins) []error {
	var errs []error
	m := &p.task.Meta
	for _, im := range []struct {
		role, rootfs string
		ref          policy.ImageRef
		field        string
		reqs         []string
	}{
		{"grader (evaluation)", p.grader, t.Images.Grader, "evaluate_container_python_requirements", m.EvaluateContainerPythonRequirements},
		{"grader (evaluation)", p.grader, t.Images.Grader, "prepare_code_python_requirements", m.PrepareCodePythonRequirements},
		{"runner", p.runner, t.Images.Runner, "container_python_requirements", m.ContainerPythonRequirements},
	} {
		if im.rootfs == "" {
			continue // the image is missing: said already
		}
		if im.field == "evaluate_container_python_requirements" {
			if root, err := os.OpenRoot(im.rootfs); err == nil {
				if _, err := root.Stat("usr/bin/python3"); err != nil {
					errs = append(errs, fmt.Errorf("track %s: the %s image %s has no /usr/bin/python3, and the task's scripts are Python; pin an image with Python as images.grader (sealrun task requirements TASKDIR prints a Debian recipe)", t.Name, im.role, im.ref))
				}
				root.Close()
			}
		}
		if len(im.reqs) == 0 {
			continue
		}
		have, err := airs.Installed(im.rootfs)
		if err != nil {
			errs = append(errs, fmt.Errorf("track %s: reading the %s image %s's Python distributions: %v", t.Name, im.role, im.ref, err))
			continue
		}
		missing, notes := airs.Unmet(have, im.reqs)
		for _, r := range missing {
			errs = append(errs, fmt.Errorf("track %s: task %s's %s names %s, which the %s image %s does not provide (no %s *.dist-info or *.egg-info in its site-packages); build an image that has it — sealrun task requirements TASKDIR says what Debian provides and what needs pip — and pin it in the track's images", t.Name, t.Task.Name, im.field, r.Name, im.role, im.ref, r.Name))
		}
		for _, n := range notes {
			p.notes = append(p.notes, fmt.Sprintf("the %s image: %s", im.role, n))
		}
	}
	return errs
}

// prepareTask runs the task's prepare.py (before the clock) into the run's task-data directory
// and copies its output into the workspace's data/, the agent's data mount. The audit log
// records the script's exit and time.
func (x *Executor) prepareTask(ctx context.Context, spec RunSpec, rio *runIO, e *grader.Env, ws string, p *pins) (string, error) {
	dataDir := filepath.Join(rio.dir, TaskDataDir)
	start := time.Now()
	r, err := grader.PrepareTask(ctx, e, p.task.Dir, p.taskData, dataDir, spec.Track.Budget.Grading)
	if r != nil {
		if _, _, aerr := rio.log.Append(audit.KindTaskPrepare, audit.TaskPrepare{Script: r.Script, Exit: r.Exit, Seconds: r.Seconds, TimedOut: r.TimedOut, OOM: r.OOM}); aerr != nil && err == nil {
			err = aerr
		}
	}
	if err != nil {
		return "", err
	}
	ran := time.Since(start)
	if err := grader.CopyShared(dataDir, filepath.Join(ws, "data"), e.Run.SharedGID()); err != nil {
		return "", fmt.Errorf("copy prepare.py's output into the workspace: %w", err)
	}
	x.event(spec.ID, api.EventTaskPrepared, fmt.Sprintf("%s exit %d in %.1fs; copied into the workspace in %.1fs", r.Script, r.Exit, r.Seconds, (time.Since(start)-ran).Seconds()))
	return dataDir, nil
}

// seedTask writes the task's files the agent gets into the workspace (airs.Task.AgentFiles):
// BRIEF.md (taskBrief, then the description), project_description.md, evaluate.py and the
// task's other modules.
func seedTask(ws string, t *policy.Track, task *airs.Task) error {
	brief := taskBrief(t, &task.Meta)
	for _, f := range task.AgentFiles() {
		b, err := os.ReadFile(filepath.Join(task.Dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ws, f), b, 0o664); err != nil {
			return err
		}
		if f == airs.DescriptionFile {
			brief += string(b)
		}
	}
	return os.WriteFile(filepath.Join(ws, "BRIEF.md"), []byte(brief), 0o664)
}

// taskBrief is what BRIEF.md says before the task's own description: how this sealed run works.
func taskBrief(t *policy.Track, m *airs.Metadata) string {
	dir := "lower"
	if !m.MetricLowerIsBetter {
		dir = "higher"
	}
	return fmt.Sprintf(`# Sealed run of the AIRS-Bench task %s

This is a sealed run (sealrun track %s %s). You have %s in all. Every computation (training,
inference, Python) goes through the runner command, which runs it in the runner container:

    runner python3 train.py            # one call at most %s; runner time_left says what is left
    runner submit DIR                  # records the files of DIR matching %s
    runner promote ID                  # picks the submission to be scored
    runner finalize                    # ends the run (or let the deadline end it)

The data is in ./data: train/ with labels, test/ without. The task's evaluate.py is here to read;
it is run for you on the promoted submission after the run, against the hidden test labels, and
records %s (%s is better). There is no score before that: judge your work on your own
validation split of the training data. In the last %s of the run, new computations are refused;
submit, promote and finalize still work.

---

`, m.Info.Name, t.Name, t.Version, t.Budget.Wall, t.Budget.CallLimit, strings.Join(m.FileExportGlobs, ", "), m.Info.Metric, dir, t.Budget.Reserve)
}

// taskInfo is the attested task: what its report says of it (report.NewTask: the track's
// pins and, from the verified metadata, the metric and its scoring).
func taskInfo(t *policy.Track, rep *report.Task) *attest.TaskInfo {
	r := rep.Task
	return &attest.TaskInfo{Kind: t.Task.Kind, Name: r.Name, SHA256: r.SHA256, DataSHA256: r.DataSHA256,
		Metric: rep.Metric, LowerIsBetter: r.LowerIsBetter, SOTA: r.SOTA, Optimal: r.Optimal, Worst: r.Worst}
}

// endTaskReport writes the task report of a run that ended without evaluation (invalid, or
// failed before grading) and returns its sha256.
func endTaskReport(dir string, t *policy.Track, task *airs.Task, status outcome.Outcome, reason, head string) (*report.Task, string, error) {
	var m *airs.Metadata
	if task != nil {
		m = &task.Meta
	}
	rep := report.NewTask(t, m, status, reason, t.Images.Grader.String())
	rep.HistoryHead = head
	sum, err := report.WriteTask(filepath.Join(dir, "report.json"), rep)
	return rep, sum, err
}

// storedTask is the task a task track pins, from the content store, if it is there and whole
// (for runs that end before Check: their attestation still names the metric).
func storedTask(state string, t *policy.Track) *airs.Task {
	if t.Task == nil {
		return nil
	}
	task, err := airs.OpenStored(api.TreePath(state, t.Task.SHA256))
	if err != nil || task.Hash != t.Task.SHA256 {
		return nil
	}
	return task
}
