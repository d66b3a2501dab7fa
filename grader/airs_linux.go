package grader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/sandbox"
)

// Where an AIRS task's scripts see their directories, inside their container, as upstream's
// harness passes them: --global-shared-data-dir (the raw data, read-only),
// --agent-data-mount-dir (the data directory the script fills) and --agent-log-dir (the agent's
// log directory: empty before the run, the submission's files after it, read-only). The task
// directory is the container's bundle (/bundle, read-only), so a script imports the task's other
// modules (utils.py …) as it does upstream.
const (
	TaskRawPath  = "/tmp/airs/global-shared-data"
	TaskDataPath = "/tmp/airs/agent-data"
	TaskLogPath  = "/tmp/airs/agent-log"
	// TaskEvalPath is evaluate.py's working directory: ./data is the evaluation's data
	// directory and ./logs the agent's log directory, both read-only, as upstream's checker
	// runs it (evaluate.py --submission-file ./data/submission.csv).
	TaskEvalPath = "/tmp/eval"
)

// taskArgs are the three directory arguments every upstream preparation script takes.
var taskArgs = []string{"--global-shared-data-dir", TaskRawPath, "--agent-data-mount-dir", TaskDataPath, "--agent-log-dir", TaskLogPath}

// The most a task script's output may be: stdout is read for the result, stderr kept as a tail.
const (
	maxScriptStdout = 1 << 20
	maxScriptStderr = 64 << 10
)

// ScriptRun is what one run of a task script did.
type ScriptRun struct {
	Script   string        `json:"script"`
	Exit     int           `json:"exit"`
	Seconds  float64       `json:"seconds"`
	TimedOut bool          `json:"timed_out,omitempty"`
	OOM      bool          `json:"oom,omitempty"`
	Stdout   string        `json:"-"` // capped at 1 MiB
	Stderr   string        `json:"-"` // its last 64 KiB
	Took     time.Duration `json:"-"`
}

// runTaskScript runs python3 /bundle/SCRIPT ARGS in a fresh grader-role container: no network,
// no devices, the task directory read-only at /bundle, the given mounts, cwd as given. A script
// that fails is reported in the ScriptRun; the error is for what kept it from running at all.
func runTaskScript(ctx context.Context, e *Env, taskDir, script string, args []string, cwd string, mounts []specs.Mount, timeout time.Duration) (*ScriptRun, error) {
	var out, errb tailBuffer
	out.max, errb.max, errb.tail = maxScriptStdout, maxScriptStderr, true
	start := time.Now()
	c, err := e.Run.Start(ctx, sandbox.ContainerConfig{
		Role: sandbox.RoleGrader, Rootfs: e.Rootfs, Args: append([]string{"python3", "-B", filepath.Join(sandbox.BundlePath, script)}, args...),
		Cwd: cwd, Bundle: taskDir, Limits: e.Limits, Extra: mounts, Stdout: &out, Stderr: &errb,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", script, err)
	}
	defer c.Destroy(context.Background())
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, werr := c.Wait(wctx)
	r := &ScriptRun{Script: script, Exit: code, Took: time.Since(start), OOM: c.OOMKilled()}
	r.Seconds = math.Round(r.Took.Seconds()*1000) / 1000
	if werr != nil {
		if wctx.Err() != nil && ctx.Err() == nil {
			r.TimedOut = true
		} else {
			var ce *sandbox.CommandError
			if !errors.As(werr, &ce) {
				return nil, fmt.Errorf("%s: %w", script, werr)
			}
		}
	}
	r.Stdout, r.Stderr = out.String(), errb.String()
	return r, nil
}

func bindRO(src, dst string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "nosuid", "nodev", "ro"}}
}

func bindRW(src, dst string) specs.Mount {
	return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "nosuid", "nodev", "noexec"}}
}

// sharedDir makes dir a directory the run's containers can write in (owner root, group the
// run's shared GID, setgid, 2770), as the workspace is.
func sharedDir(dir string, gid uint32) error {
	if err := os.MkdirAll(dir, 0o770); err != nil {
		return err
	}
	if err := os.Chown(dir, 0, int(gid)); err != nil {
		return err
	}
	return os.Chmod(dir, 0o2770|os.ModeSetgid)
}

// PrepareTask runs the task's prepare.py as upstream's harness does, in a fresh container with no
// network: the raw data read-only as --global-shared-data-dir, dataDir (created, empty) as
// --agent-data-mount-dir, an empty --agent-log-dir. dataDir then holds what the agent's data
// mount holds (train and test inputs, never the test labels). A script that exits non-zero,
// times out, is OOM-killed or writes nothing is an error naming it, with its stderr's tail: the
// task, not the agent, failed.
func PrepareTask(ctx context.Context, e *Env, taskDir, rawDir, dataDir string, timeout time.Duration) (*ScriptRun, error) {
	if err := absAll(&taskDir, &rawDir, &dataDir); err != nil {
		return nil, err
	}
	if err := sharedDir(dataDir, e.Run.SharedGID()); err != nil {
		return nil, fmt.Errorf("%s's data directory %s: %w", airs.PrepareFile, dataDir, err)
	}
	logDir := dataDir + ".log"
	if err := sharedDir(logDir, e.Run.SharedGID()); err != nil {
		return nil, err
	}
	defer os.RemoveAll(logDir)
	r, err := runTaskScript(ctx, e, taskDir, airs.PrepareFile, taskArgs, "/tmp",
		[]specs.Mount{bindRO(rawDir, TaskRawPath), bindRW(dataDir, TaskDataPath), bindRO(logDir, TaskLogPath)}, timeout)
	if err != nil {
		return nil, err
	}
	if why := r.failure(timeout); why != "" {
		return r, fmt.Errorf("the task's %s %s; its stderr ends:\n%s", airs.PrepareFile, why, lastLines(r.Stderr, 20))
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) == 0 {
		return r, fmt.Errorf("the task's %s exited 0 but wrote nothing into --agent-data-mount-dir (%s); upstream's tasks write train/ and test/ there. Its stderr ends:\n%s", airs.PrepareFile, TaskDataPath, lastLines(r.Stderr, 20))
	}
	return r, nil
}

// CopyShared copies the tree src to dst (created) for the run's containers: directories 2775 and
// files 0664, owned by root and the run's shared group. Symlinks and special files are refused
// by name: a script's output is plain files.
func CopyShared(src, dst string, gid uint32) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			if err := os.MkdirAll(to, 0o775); err != nil {
				return err
			}
			if err := os.Chown(to, 0, int(gid)); err != nil {
				return err
			}
			return os.Chmod(to, 0o2775|os.ModeSetgid)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o664)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
			return os.Chown(to, 0, int(gid))
		}
		return fmt.Errorf("%s: not a regular file or directory; a task's data directory holds files only", p)
	})
}

func (r *ScriptRun) failure(timeout time.Duration) string {
	switch {
	case r.TimedOut:
		return fmt.Sprintf("ran past its %s", timeout)
	case r.OOM:
		return "was killed by the OOM killer (the track's memory)"
	case r.Exit != 0:
		return fmt.Sprintf("exited %d", r.Exit)
	}
	return ""
}

// ResultMarker is the line after which evaluate.py prints its result JSON (the AIRS-Bench
// evaluation scripts' convention).
const ResultMarker = "--- EVALUATION RESULT ---"

// Evaluation is the scored outcome of a submission.
type Evaluation struct {
	Metric string   `json:"metric"`
	Value  *float64 `json:"value"` // nil: an invalid submission
	// Invalid says why the submission yields no number: it scores 0 normalized, as AIRS-Bench
	// counts it. An invalid submission is the agent's outcome, not an infrastructure failure.
	Invalid string     `json:"invalid,omitempty"`
	Result  string     `json:"result,omitempty"` // the result JSON as evaluate.py printed it
	Run     *ScriptRun `json:"run"`              // evaluate.py's (evaluate_prepare.py's when it failed)
	// PrepareRun is evaluate_prepare.py's.
	PrepareRun *ScriptRun `json:"prepare_run"`
}

// EvaluateTask scores a submission as upstream's harness does, each script in a fresh container
// with no network: evaluate_prepare.py with the raw data, a copy of dataDir (prepare.py's output,
// untouched by the agent) made in workDir as --agent-data-mount-dir, and the submission's files
// read-only as --agent-log-dir (it writes test_with_labels and copies submission.csv in); then
// evaluate.py --submission-file ./data/submission.csv in a directory whose ./data is that copy
// and ./logs the submission, both read-only. It reads the JSON object printed after ResultMarker
// (or, without the marker, the last line that is a JSON object) and takes the metric's value. Any
// way the submission yields no finite number is an invalid submission, said in Invalid; the error
// is for what kept the scripts from running at all.
func EvaluateTask(ctx context.Context, e *Env, taskDir, rawDir, dataDir, submissionDir, workDir, metric string, timeout time.Duration) (*Evaluation, error) {
	if err := absAll(&taskDir, &rawDir, &dataDir, &submissionDir, &workDir); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	evalData := filepath.Join(workDir, "evaluation-data")
	os.RemoveAll(evalData)
	if err := CopyShared(dataDir, evalData, e.Run.SharedGID()); err != nil {
		return nil, fmt.Errorf("copy the task's data for evaluation: %w", err)
	}
	ev := &Evaluation{Metric: metric}
	pr, err := runTaskScript(ctx, e, taskDir, airs.EvaluatePrepareFile, taskArgs, "/tmp",
		[]specs.Mount{bindRO(rawDir, TaskRawPath), bindRW(evalData, TaskDataPath), bindRO(submissionDir, TaskLogPath)}, time.Until(deadline))
	if err != nil {
		return nil, err
	}
	ev.PrepareRun = pr
	if why := pr.failure(timeout); why != "" {
		// Upstream's evaluate_prepare.py copies the submission in: a missing or unreadable one
		// fails it. That is the submission's outcome, with the script's words.
		ev.Invalid = fmt.Sprintf("%s %s: %s", airs.EvaluatePrepareFile, why, lastLines(pr.Stderr, 3))
		ev.Run = pr
		return ev, nil
	}
	mounts := []specs.Mount{bindRO(evalData, TaskEvalPath+"/data"), bindRO(submissionDir, TaskEvalPath+"/logs")}
	r, err := runTaskScript(ctx, e, taskDir, airs.EvaluateFile, []string{"--submission-file", "./data/submission.csv"}, TaskEvalPath, mounts, time.Until(deadline))
	if err != nil {
		return nil, err
	}
	ev.Run = r
	if why := r.failure(timeout); why != "" {
		ev.Invalid = fmt.Sprintf("evaluate.py %s: %s", why, lastLines(r.Stderr, 3))
		return ev, nil
	}
	res, why := parseResult(r.Stdout)
	if why != "" {
		ev.Invalid = why
		return ev, nil
	}
	ev.Result = res
	var obj map[string]any
	json.Unmarshal([]byte(res), &obj)
	v, ok := obj[metric]
	if !ok {
		ev.Invalid = fmt.Sprintf("evaluate.py's result %s has no %q (the task's logging_info.metric)", clipText(res, 200), metric)
		return ev, nil
	}
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		ev.Invalid = fmt.Sprintf("evaluate.py's %q is %s, not a finite number", metric, clipText(fmt.Sprint(v), 60))
		return ev, nil
	}
	ev.Value = &f
	return ev, nil
}

// parseResult finds evaluate.py's result JSON object in its stdout.
func parseResult(stdout string) (string, string) {
	text := stdout
	if i := strings.LastIndex(stdout, ResultMarker); i >= 0 {
		text = stdout[i+len(ResultMarker):]
		dec := json.NewDecoder(strings.NewReader(text))
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return "", fmt.Sprintf("evaluate.py printed %q but no JSON object after it (%v)", ResultMarker, err)
		}
		return strings.TrimSpace(text[:dec.InputOffset()]), ""
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var obj map[string]any
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &obj) == nil {
			return l, ""
		}
	}
	return "", fmt.Sprintf("evaluate.py printed no result JSON (neither %q and an object, nor a line that is one)", ResultMarker)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// tailBuffer keeps the first max bytes of what it is written, or with tail the last max.
type tailBuffer struct {
	buf  bytes.Buffer
	max  int
	tail bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if !b.tail {
		if room := b.max - b.buf.Len(); room > 0 {
			b.buf.Write(p[:min(room, len(p))])
		}
		return n, nil
	}
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return n, nil
}

func (b *tailBuffer) String() string { return b.buf.String() }

// absAll makes each path absolute (mount sources must be).
func absAll(paths ...*string) error {
	for _, p := range paths {
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}
