package grader

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/report"
)

// TaskJudging makes a Service the judge of an AIRS task (ServiceConfig.Task): a submission is
// the files matching the task's file_export_globs, there is no validation feedback (the task
// defines none), and the promoted submission is scored by the task's evaluate.py (GradeTask).
type TaskJudging struct {
	Meta    *airs.Metadata
	TaskDir string // the task directory (from the content store)
	// DataDir is prepare.py's output as it wrote it (the agent works on a copy); RawDir the
	// task's raw data. No agent container mounts either.
	DataDir, RawDir string
}

// submitTask packs the exported files of hostDir, records the candidate and answers.
func (s *Service) submitTask(ctx context.Context, rel, shown string, fail func(error) (string, error)) (string, error) {
	cand, err := PackExport(ctx, s.cfg.Workspace, rel, filepath.Join(s.cfg.Dir, "candidates"), s.cfg.Env.Bundle, s.cfg.Task.Meta.FileExportGlobs)
	if err != nil {
		return fail(err)
	}
	id := cand.Digest()
	prev, seen := s.history.Candidate(id)
	if err := s.history.AppendSubmission(HistoryEntry{Kind: KindSubmit, Time: s.now(), Candidate: id, Size: cand.Size, RawBytes: cand.RawBytes, Files: cand.Files}); err != nil {
		if s.history.Finalized() {
			return "", refused("%v", err)
		}
		return "", err
	}
	if seen {
		return fmt.Sprintf("candidate %s (%s gz) is the same as the one submitted at %s\n", short(id), iec(cand.Size), offset(prev.Time.Sub(s.cfg.Start))), nil
	}
	if err := s.audit(audit.KindSubmit, audit.Submit{Candidate: digest.Digest(id), Size: cand.Size, RawBytes: cand.RawBytes, Files: cand.Files, Dir: shown, Time: s.now()}); err != nil {
		return "", err
	}
	return fmt.Sprintf("candidate %s (%s gz, %d files matching %q) recorded\n"+
		"  this task gives no validation feedback: promote a candidate (runner promote ID) to have it scored\n"+
		"  by the task's evaluate.py on the hidden test labels (score your own validation split meanwhile)\n",
		short(id), iec(cand.Size), cand.Files, s.cfg.Task.Meta.FileExportGlobs), nil
}

// GradeTask scores the promoted candidate with the task's evaluate.py (a fresh container, no
// network, the labels read-only) within the grading budget and writes report.json. No promoted
// candidate is a failed run; a submission that yields no number is graded as an invalid
// submission (no value, the reason recorded). It returns the report and report.json's sha256.
func (s *Service) GradeTask(ctx context.Context, deadline time.Time) (*report.Task, string, error) {
	m := s.cfg.Task.Meta
	rep := report.NewTask(s.cfg.Track, m, outcome.Graded, "", s.cfg.Env.Image)
	rep.Device = s.cfg.Env.Device
	rep.HistoryHead, _ = s.history.Head()
	id := s.history.Promoted()
	if id == "" {
		rep.Status, rep.Reason = outcome.Failed, "no candidate was promoted"
	} else {
		info, _ := s.history.Candidate(id)
		rep.Candidate = report.Candidate{ID: digest.Digest(id), Size: info.Size}
		dir := filepath.Join(s.cfg.Env.WorkDir, "final-submission")
		os.RemoveAll(dir)
		if err := os.MkdirAll(s.cfg.Env.WorkDir, 0o711); err != nil {
			return nil, "", err
		}
		u, err := UnpackExport(ctx, s.CandidatePath(id), dir, s.cfg.Env.Bundle)
		if err != nil {
			return nil, "", fmt.Errorf("unpack the promoted candidate %s: %w", short(id), err)
		}
		os.Chmod(dir, 0o755)
		ev, err := EvaluateTask(ctx, s.cfg.Env, s.cfg.Task.TaskDir, s.cfg.Task.RawDir, s.cfg.Task.DataDir, u.Dir, s.cfg.Env.WorkDir, m.Info.Metric, time.Until(deadline))
		if err != nil {
			return nil, "", err
		}
		// evaluate.py's stderr may echo labels: it stays private, beside the other grading logs.
		fileio.WriteAtomic(filepath.Join(s.cfg.Env.WorkDir, "evaluate.stderr"), 0o600, func(w io.Writer) error {
			if ev.PrepareRun != nil && ev.PrepareRun != ev.Run {
				io.WriteString(w, "--- evaluate_prepare.py\n"+ev.PrepareRun.Stderr+"\n--- evaluate.py\n")
			}
			_, err := io.WriteString(w, ev.Run.Stderr)
			return err
		})
		rep.Value, rep.Invalid, rep.Seconds = ev.Value, ev.Invalid, ev.Run.Seconds
		rep.Valid = ev.Value != nil
		if ev.Result != "" {
			var compact json.RawMessage
			if json.Unmarshal([]byte(ev.Result), &compact) == nil {
				rep.Result = compact
			}
		}
		body := audit.Evaluated{Candidate: digest.Digest(id), Metric: rep.Metric, Value: rep.Value, ValidSubmission: rep.Valid, Invalid: rep.Invalid, Time: s.now()}
		if err := s.audit(audit.KindEvaluated, body); err != nil {
			return nil, "", err
		}
	}
	sum, err := report.WriteTask(filepath.Join(s.cfg.Dir, "report.json"), rep)
	if err != nil {
		return nil, "", err
	}
	return rep, sum, nil
}
