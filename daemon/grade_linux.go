package daemon

// Phase 5 of a run, grade: a run that ended as a run should is graded (an exam run on the
// hidden exam in two sealed phases, a task run by the task's own evaluation); a run that did
// not still gets its report.json, saying why.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/report"
)

// grade grades the run's final submission: the outcome and report.json's digest are set.
func (rs *runState) grade(ctx context.Context) {
	x, spec, t, out := rs.x, rs.spec, rs.t, rs.out
	x.state(spec.ID, api.StateGrading, "")
	var err error
	var graded func() // records the report and its outcome, once grading has not failed
	if t.Task != nil {
		var rep *report.Task
		rep, rs.reportSum, err = rs.gsvc.GradeTask(ctx, rs.now().Add(t.Budget.Grading))
		graded = func() { out.TaskReport, out.Status, out.Reason = rep, rep.Status, rep.Reason }
	} else {
		var rep *report.Exam
		rep, rs.reportSum, err = rs.gsvc.GradeFinal(ctx, rs.io.exam, rs.now().Add(t.Budget.Grading), rs.sealed, nil)
		graded = func() { out.Report, out.Status, out.Reason = rep, rep.Status, rep.Reason }
	}
	switch {
	case ctx.Err() != nil:
		out.Status, out.Reason = outcome.Invalid, "cancelled"
	case err != nil:
		out.Status, out.Reason = outcome.Invalid, "grading: "+err.Error()
	default:
		graded()
	}
}

// sealed journals the pass vector of an exam's first phase before its second may start.
func (rs *runState) sealed(v report.PassVector) error {
	e := api.Event{Time: time.Now().UTC(), Run: rs.spec.ID, Kind: api.EventSealed, Data: mustJSON(map[string]any{"pass_vector_sha256": v.SHA256(), "passed": v.Passed(), "questions": len(v)})}
	if rs.x.Journal != nil {
		if err := rs.x.Journal.Append(e); err != nil {
			return err // not sealed: phase 2 must not start
		}
	}
	if rs.x.onEvent != nil {
		rs.x.onEvent(e)
	}
	return nil
}

// reportUngraded writes report.json for a run that was not graded (or whose grading failed):
// its status and reason, no score.
func (rs *runState) reportUngraded() error {
	t, out := rs.t, rs.out
	head := ""
	if rs.hist != nil {
		head, _ = rs.hist.Head()
	}
	var err error
	switch {
	case t.Task != nil && out.TaskReport == nil:
		out.TaskReport, rs.reportSum, err = endTaskReport(rs.io.dir, t, rs.io.task, out.Status, out.Reason, head)
	case t.Task == nil && out.Report == nil:
		rep := &report.Exam{Format: report.ExamFormat, Status: out.Status, Reason: out.Reason,
			Track:       report.Track{ID: t.ID, Name: t.Name, Version: t.Version},
			Exam:        report.ExamInfo{SHA256: t.Exam.SHA256, Questions: int(t.Exam.Questions), ContextBytes: int(t.Exam.ContextBytes)},
			Score:       report.NewScore(0, int(t.Exam.Questions)),
			HistoryHead: head}
		if rs.reportSum, err = report.WriteExam(filepath.Join(rs.io.dir, "report.json"), rep); err == nil {
			out.Report = rep
		}
	}
	return err
}

// addUsage sums the run's model use from its audit log, prices it at the host's price of the
// run's model, and adds it to report.json (rewritten, its digest updated) for the attestation.
func (rs *runState) addUsage() error {
	f, err := os.Open(rs.io.log.Path())
	if err != nil {
		return fmt.Errorf("the run's audit log: %w", err)
	}
	facts, err := attest.ReadAudit(f, rs.x.Cfg.Prices.Price(rs.spec.Agent))
	f.Close()
	if err != nil {
		return fmt.Errorf("the run's audit log: %w", err)
	}
	u := facts.Usage
	rs.used, rs.attached = u, facts.Attaches
	path := filepath.Join(rs.io.dir, "report.json")
	switch out := rs.out; {
	case out.TaskReport != nil:
		out.TaskReport.Usage = u
		rs.reportSum, err = report.WriteTask(path, out.TaskReport)
	case out.Report != nil:
		out.Report.Usage = u
		rs.reportSum, err = report.WriteExam(path, out.Report)
	}
	return err
}
