package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/policy"
)

// A sealed run of an AIRS task (a track with [task]) differs from an exam run in four places:
//
//   - Check verifies the task directory and the raw data directory in the content store against
//     the track's tree hashes (every file hashed again) and validates the task's metadata.yaml.
//   - Before the clock starts, the task's prepare.py writes the agent's data into the workspace's
//     data/ and evaluate_prepare.py writes the labelled test data into the run's task-grader/
//     directory; each in its own fresh grader-role container with no network and the raw data
//     read-only. No agent-reachable container ever mounts task-grader/ or the raw data.
//   - The workspace holds BRIEF.md (how this run works, then the task's project_description.md),
//     project_description.md, evaluate.py (and utils.py) as the paper gives them to agents, and
//     data/. The grader judges the task (grader.TaskJudging): a submission is the files matching
//     file_export_globs, with no validation feedback.
//   - Grading runs evaluate.py on the promoted submission (grader.GradeTask), report.json is a
//     task report and the attestation a sealed-task-run predicate carrying the metric's value.

// TaskGraderDir is the run directory's grader-only directory: evaluate_prepare.py's output.
const TaskGraderDir = "task-grader"

// checkTask verifies a task track's pins: the task directory and its raw data in the content
// store, each hashed again and compared with the track.
func (x *Executor) checkTask(t *policy.Track, p *pins) []error {
	var errs []error
	dir := TreePath(x.Cfg.StateDir, t.Task.SHA256)
	if _, err := os.Stat(dir); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins task %s (%s), which is not in this host's content store (%v); add it with sealrun content add TASKDIR", t.Name, t.Task.Name, t.Task.SHA256, unwrap(err)))
	} else if task, err := airs.Open(dir); err != nil {
		errs = append(errs, fmt.Errorf("track %s: the stored task %s: %v; add the task again (sealrun content add TASKDIR)", t.Name, t.Task.SHA256, err))
	} else if task.Hash != t.Task.SHA256 {
		errs = append(errs, fmt.Errorf("track %s pins task %s, but the stored copy hashes to %s: the content store is damaged; remove %s and add the task again", t.Name, t.Task.SHA256, task.Hash, dir))
	} else if task.Meta.Info.Name != t.Task.Name {
		errs = append(errs, fmt.Errorf("track %s names task %q, but the task it pins (%s) is %q; fix the track's task.name", t.Name, t.Task.Name, t.Task.SHA256, task.Meta.Info.Name))
	} else {
		p.task = task
	}
	data := TreePath(x.Cfg.StateDir, t.Task.DataSHA256)
	if _, err := os.Stat(data); err != nil {
		errs = append(errs, fmt.Errorf("track %s pins the raw data %s of task %s, which is not in this host's content store (%v); add it with sealrun content add DATADIR", t.Name, t.Task.DataSHA256, t.Task.Name, unwrap(err)))
	} else if _, hash, err := airs.TreeHash(data, airs.MaxDataFiles, airs.MaxDataBytes); err != nil {
		errs = append(errs, fmt.Errorf("track %s: the stored raw data %s: %v; add it again (sealrun content add DATADIR)", t.Name, t.Task.DataSHA256, err))
	} else if hash != t.Task.DataSHA256 {
		errs = append(errs, fmt.Errorf("track %s pins the raw data %s, but the stored copy hashes to %s: the content store is damaged; remove %s and add the data again", t.Name, t.Task.DataSHA256, hash, data))
	} else {
		p.taskData = data
	}
	return errs
}

// prepareTask runs the task's two preparation scripts (before the clock): the agent's data into
// ws/data, the labels into the run's task-grader directory. The audit log records each script's
// exit and time.
func (x *Executor) prepareTask(ctx context.Context, spec RunSpec, rio *runIO, e *grader.Env, ws string, p *pins) (string, error) {
	graderDir := filepath.Join(rio.dir, TaskGraderDir)
	start := time.Now()
	runs, err := grader.PrepareTask(ctx, e, p.task.Dir, p.taskData, filepath.Join(ws, "data"), graderDir, spec.Track.Budget.Grading)
	var done []string
	for _, r := range runs {
		done = append(done, fmt.Sprintf("%s exit %d in %.1fs", r.Script, r.Exit, r.Seconds))
		if _, _, aerr := rio.log.Append("task_prepare", map[string]any{"script": r.Script, "exit": r.Exit, "seconds": r.Seconds, "timed_out": r.TimedOut, "oom": r.OOM}); aerr != nil && err == nil {
			err = aerr
		}
	}
	if err != nil {
		return "", err
	}
	x.event(spec.ID, "task_prepared", fmt.Sprintf("%s (%.1fs in all)", strings.Join(done, ", "), time.Since(start).Seconds()))
	return graderDir, nil
}

// seedTask writes the task's files the agent gets into the workspace: BRIEF.md (taskBrief, then
// the description), the task's project_description.md, evaluate.py and utils.py (as AIRS-Bench
// gives them to agents).
func seedTask(ws string, t *policy.Track, task *airs.Task) error {
	brief := taskBrief(t, &task.Meta)
	for _, f := range []string{airs.DescriptionFile, airs.EvaluateFile, airs.UtilsFile} {
		b, err := os.ReadFile(filepath.Join(task.Dir, f))
		if os.IsNotExist(err) && f == airs.UtilsFile {
			continue
		}
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

// taskInfo is the attested task: what its report says of it (grader.NewTaskReport: the track's
// pins and, from the verified metadata, the metric and its scoring).
func taskInfo(t *policy.Track, rep *grader.TaskReport) *attest.TaskInfo {
	r := rep.Task
	return &attest.TaskInfo{Kind: t.Task.Kind, Name: r.Name, SHA256: r.SHA256, DataSHA256: r.DataSHA256,
		Metric: rep.Metric, LowerIsBetter: r.LowerIsBetter, SOTA: r.SOTA, Optimal: r.Optimal, Worst: r.Worst}
}

// endTaskReport writes the task report of a run that ended without evaluation (invalid, or
// failed before grading) and returns its sha256.
func endTaskReport(dir string, t *policy.Track, task *airs.Task, status, reason, head string) (*grader.TaskReport, string, error) {
	var m *airs.Metadata
	if task != nil {
		m = &task.Meta
	}
	rep := grader.NewTaskReport(t, m, status, reason, t.Images.Grader.String())
	rep.HistoryHead = head
	sum, err := grader.WriteTaskReport(filepath.Join(dir, "report.json"), rep)
	return rep, sum, err
}

// storedTask is the task a task track pins, from the content store, if it is there and whole
// (for runs that end before Check: their attestation still names the metric).
func storedTask(state string, t *policy.Track) *airs.Task {
	if t.Task == nil {
		return nil
	}
	task, err := airs.Open(TreePath(state, t.Task.SHA256))
	if err != nil || task.Hash != t.Task.SHA256 {
		return nil
	}
	return task
}
