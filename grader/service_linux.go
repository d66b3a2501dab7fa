package grader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
)

// RefusedError is a request the grader declines, with the reason the agent sees. The runner's
// socket shows it as a refusal (exit 125).
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// RefusalReason marks the error as the agent's to read (runner.Judge).
func (e *RefusedError) RefusalReason() string { return e.Reason }

// RefusalReason marks a broken bundle as the agent's to read (runner.Judge).
func (e *BundleError) RefusalReason() string { return e.Error() }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// ServiceConfig is one run's grading.
type ServiceConfig struct {
	Env        *Env
	Track      *policy.Track
	Validation *exams.Exam // the public validation set, verified against the track
	Workspace  string      // the run's workspace on the host
	Dir        string      // the run's directory: candidates/, history.jsonl, report.json
	Audit      *audit.Log  // the run's audit log: submissions and the sealed pass vector too
	Start      time.Time   // the run's start (history offsets)
	Now        func() time.Time
	// OnFinalize ends the run when the agent finalizes (the daemon stops the controller).
	OnFinalize func()
	// OnInfra hears every failure of the host behind the agent's verbs (a full disk, a failed
	// grader container): the run is the infrastructure's failure (the daemon makes it invalid).
	// Refusals are the agent's and never reach it.
	OnInfra func(error)
	// Task makes the service an AIRS task's judge (Validation is then not needed).
	Task *TaskJudging
}

// Service is one run's judge: it serves submit, promote, finalize and history to the agent
// (runner.Judge) and grades the promoted candidate at the end.
type Service struct {
	cfg     ServiceConfig
	history *History
	busy    sync.Mutex // one submission scored at a time
	mu      sync.Mutex
	scoring string // candidate being validated
	seq     int
}

// NewService opens the run's history (replaying it when it exists).
func NewService(cfg ServiceConfig) (*Service, error) {
	switch {
	case cfg.Env == nil || cfg.Track == nil || (cfg.Validation == nil && cfg.Task == nil):
		return nil, errors.New("grader service: an environment, the track and the validation set (or, for a task, the task) are required")
	case cfg.Task != nil && (cfg.Track.Task == nil || cfg.Task.Meta == nil || cfg.Task.TaskDir == "" || cfg.Task.DataDir == "" || cfg.Task.RawDir == ""):
		return nil, errors.New("grader service: a task judge needs a task track, the task's metadata, its directory and the grader-only data")
	case cfg.Workspace == "" || cfg.Dir == "":
		return nil, errors.New("grader service: the workspace and the run directory are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Start.IsZero() {
		cfg.Start = cfg.Now()
	}
	if cfg.Env.Bundle.MaxGzipBytes == 0 {
		cfg.Env.Bundle = DefaultLimits(cfg.Track.Artifact.MaxGzipBytes)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "candidates"), 0o700); err != nil {
		return nil, err
	}
	h, err := OpenHistory(filepath.Join(cfg.Dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, history: h}, nil
}

// History is the run's submission history.
func (s *Service) History() *History { return s.history }

// Close closes the history file.
func (s *Service) Close() error { return s.history.Close() }

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// audit appends the record body (one of package audit's, its time set) of kind to the run's
// audit log.
func (s *Service) audit(kind string, body any) error {
	if s.cfg.Audit == nil {
		return nil
	}
	_, _, err := s.cfg.Audit.Append(kind, body)
	return err
}

// CandidatePath is where a candidate's .tar.gz is stored.
func (s *Service) CandidatePath(id string) string {
	return filepath.Join(s.cfg.Dir, "candidates", strings.TrimPrefix(id, "sha256:")+".tar.gz")
}

// Submit packs hostDir (inside the workspace) into a candidate, records it, scores it on the
// validation set and returns the agent's answer. A broken bundle is refused, recorded as refused
// with its reason, and nothing is stored.
func (s *Service) Submit(ctx context.Context, hostDir string) (string, error) {
	if s.history.Finalized() {
		return "", refused("the run is finalized; nothing more can be submitted")
	}
	if !s.busy.TryLock() {
		s.mu.Lock()
		c := s.scoring
		s.mu.Unlock()
		return "", refused("a submission is being scored on the validation set (candidate %s); wait for it, then submit again", short(c))
	}
	defer s.busy.Unlock()
	rel, err := filepath.Rel(s.cfg.Workspace, hostDir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", refused("%s is not inside the workspace", hostDir)
	}
	shown := filepath.ToSlash(filepath.Join("/workspace", rel))
	fail := func(err error) (string, error) {
		var be *BundleError
		if errors.As(err, &be) {
			if herr := s.history.Append(HistoryEntry{Kind: KindRefused, Time: s.now(), Dir: shown, Reason: be.Error()}); herr != nil {
				return "", herr
			}
			s.audit(audit.KindSubmitRefused, audit.SubmitRefused{Dir: shown, Reason: be.Error(), Time: s.now()})
		}
		return "", err
	}
	if s.cfg.Task != nil {
		return s.submitTask(ctx, filepath.ToSlash(rel), shown, fail)
	}
	cand, err := Pack(ctx, s.cfg.Workspace, filepath.ToSlash(rel), filepath.Join(s.cfg.Dir, "candidates"), s.cfg.Env.Bundle)
	if err != nil {
		return fail(err)
	}
	id := cand.Digest()
	if prev, ok := s.history.Candidate(id); ok {
		if err := s.history.AppendSubmission(HistoryEntry{Kind: KindSubmit, Time: s.now(), Candidate: id, Size: cand.Size, RawBytes: cand.RawBytes, Files: cand.Files}); err != nil {
			if s.history.Finalized() {
				return "", refused("%v", err)
			}
			return "", err
		}
		return fmt.Sprintf("candidate %s (%s gz) is the same as the one submitted at %s; validation %s\n", short(id), iec(cand.Size), offset(prev.Time.Sub(s.cfg.Start)), validationText(prev)), nil
	}
	return s.validate(ctx, cand, fail)
}

// validate records a new candidate and scores it on the validation set; the answer says how it
// did. fail records a refusal of the bundle.
func (s *Service) validate(ctx context.Context, cand *Candidate, fail func(error) (string, error)) (string, error) {
	id := cand.Digest()
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.scoring = id
	s.mu.Unlock()
	u, err := s.cfg.Env.Prepare(ctx, cand.Path, fmt.Sprintf("validation-%d-bundle", n))
	if err != nil {
		os.Remove(cand.Path)
		return fail(err)
	}
	defer os.RemoveAll(u.Dir)
	entry := HistoryEntry{Kind: KindSubmit, Time: s.now(), Candidate: id, Size: cand.Size, RawBytes: cand.RawBytes, Files: cand.Files}
	if err := s.history.AppendSubmission(entry); err != nil {
		os.Remove(cand.Path)
		if s.history.Finalized() {
			return "", refused("%v", err)
		}
		return "", err
	}
	if err := s.audit(audit.KindSubmit, audit.Submit{Candidate: digest.Digest(id), Size: cand.Size, RawBytes: cand.RawBytes, Files: cand.Files, Time: s.now()}); err != nil {
		return "", err
	}

	deadline := s.cfg.Now().Add(s.cfg.Track.Budget.Grading)
	a, err := s.cfg.Env.Validate(ctx, u, s.cfg.Validation, deadline, fmt.Sprintf("validation-%d", n))
	if err != nil {
		return "", fmt.Errorf("validation of candidate %s: %w", short(id), err)
	}
	passed := a.Vector.Passed()
	score := report.NewScore(passed, len(a.Vector)).Percent
	v := HistoryEntry{Kind: KindValidation, Time: s.now(), Candidate: id, Passed: &passed, Questions: len(a.Vector), Score: &score, Reason: a.FirstNote}
	if err := s.history.Append(v); err != nil {
		return "", err
	}
	outcomes := map[string]int{}
	for o, n := range a.Count() {
		outcomes[string(o)] = n
	}
	if err := s.audit(audit.KindValidation, audit.Validation{Candidate: digest.Digest(id), Passed: &passed, Questions: len(a.Vector), Outcomes: outcomes, Time: s.now()}); err != nil {
		return "", err
	}
	info, _ := s.history.Candidate(id)
	var b strings.Builder
	fmt.Fprintf(&b, "candidate %s (%s gz, %d files); validation %s\n", short(id), iec(cand.Size), cand.Files, validationText(info))
	if a.FirstNote != "" {
		fmt.Fprintf(&b, "  note: %s\n", a.FirstNote)
	}
	b.WriteString("  validation is feedback only: promote a candidate (runner promote ID) to have it graded\n")
	return b.String(), nil
}

func validationText(c CandidateInfo) string {
	if !c.Validated {
		return "not scored"
	}
	return fmt.Sprintf("%d/%d (%.1f%%)", c.Passed, c.Questions, c.Score)
}

// Promote marks the candidate (a unique id prefix) as the one the hidden exam grades.
func (s *Service) Promote(_ context.Context, prefix string) (string, error) {
	id, err := s.history.Promote(prefix, s.now())
	if err != nil {
		return "", refused("%v", err)
	}
	if err := s.audit(audit.KindPromote, audit.Promote{Candidate: digest.Digest(id), Time: s.now()}); err != nil {
		return "", err
	}
	return fmt.Sprintf("promoted %s: %s it at the end unless you promote another\n", short(id), s.judge()), nil
}

// Finalize promotes prefix (when given) and ends the run now.
func (s *Service) Finalize(_ context.Context, prefix string) (string, error) {
	promoted, err := s.history.Finalize(prefix, s.now())
	if err != nil {
		return "", refused("%v", err)
	}
	if err := s.audit(audit.KindFinalize, audit.Finalize{Candidate: digest.Digest(promoted), Time: s.now()}); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("finalized: the run ends now; %s %s\n", s.judge(), short(promoted))
	if promoted == "" {
		msg = "finalized: the run ends now; no candidate was promoted, so the run scores 0\n"
	}
	if s.cfg.OnFinalize != nil {
		s.cfg.OnFinalize()
	}
	return msg, nil
}

// HistoryText is the history as the agent sees it (runner history).
func (s *Service) HistoryText(context.Context) (string, error) {
	return s.history.Table(s.cfg.Start), nil
}

// Judge adapts the service to the runner's verbs (runner.Judge), reporting host failures to
// OnInfra.
type Judge struct{ *Service }

// Submit answers runner submit.
func (j Judge) Submit(ctx context.Context, dir string) (string, error) {
	out, err := j.Service.Submit(ctx, dir)
	return out, j.infra(ctx, err)
}

// Promote answers runner promote.
func (j Judge) Promote(ctx context.Context, id string) (string, error) {
	out, err := j.Service.Promote(ctx, id)
	return out, j.infra(ctx, err)
}

// Finalize answers runner finalize.
func (j Judge) Finalize(ctx context.Context, id string) (string, error) {
	out, err := j.Service.Finalize(ctx, id)
	return out, j.infra(ctx, err)
}

// History answers runner history.
func (j Judge) History(ctx context.Context) (string, error) {
	out, err := j.HistoryText(ctx)
	return out, j.infra(ctx, err)
}

func (j Judge) infra(ctx context.Context, err error) error {
	var refusal interface{ RefusalReason() string }
	if err != nil && !errors.As(err, &refusal) && ctx.Err() == nil && j.cfg.OnInfra != nil {
		j.cfg.OnInfra(err)
		// The agent hears that the host failed, not the host's paths.
		return errors.New("the host failed (recorded for the operator); the run ends as the infrastructure's fault, not yours")
	}
	return err
}

// GradeFinal grades the promoted candidate on the verified exam (the daemon opened it against
// the track's hash) and writes report.json. seal journals the pass vector before phase 2 (it is
// appended to the audit log here first). With no promoted candidate the report is a failed run
// scoring 0. It returns the report and report.json's sha256.
func (s *Service) GradeFinal(ctx context.Context, ex *exams.Exam, deadline time.Time, seal func(report.PassVector) error, families map[string]string) (*report.Exam, string, error) {
	head, _ := s.history.Head()
	id := s.history.Promoted()
	var rep *report.Exam
	if id == "" {
		rep = &report.Exam{
			Format: report.ExamFormat, Status: outcome.Failed, Reason: "no candidate was promoted",
			Track:       report.Track{ID: s.cfg.Track.ID, Name: s.cfg.Track.Name, Version: s.cfg.Track.Version},
			Exam:        report.ExamInfo{SHA256: ex.SHA256, Questions: len(ex.Questions), ContextBytes: int(ex.Header.ContextBytes)},
			Score:       report.NewScore(0, len(ex.Questions)),
			Device:      s.cfg.Env.Device,
			GraderImage: s.cfg.Env.Image,
			Limits:      report.Limits{Grading: s.cfg.Track.Budget.Grading.String(), Question: s.cfg.Env.Question.String(), MaxRestarts: s.cfg.Env.maxRestarts()},
		}
	} else {
		info, _ := s.history.Candidate(id)
		sealed := func(v report.PassVector) error {
			if err := s.audit(audit.KindSealed, audit.Sealed{Candidate: digest.Digest(id), PassVectorSHA256: v.SHA256(), Passed: v.Passed(), Questions: len(v), Time: s.now()}); err != nil {
				return err
			}
			if seal != nil {
				return seal(v)
			}
			return nil
		}
		res, err := s.cfg.Env.Grade(ctx, s.CandidatePath(id), ex, deadline, sealed)
		if err != nil {
			return nil, "", err
		}
		rep = res.Report(s.cfg.Track, ex, report.Candidate{ID: digest.Digest(id), Size: info.Size}, s.cfg.Env, families)
	}
	rep.HistoryHead = head
	sum, err := report.WriteExam(filepath.Join(s.cfg.Dir, "report.json"), rep)
	if err != nil {
		return nil, "", err
	}
	return rep, sum, nil
}

// judge says what scores the promoted candidate, for the agent's messages.
func (s *Service) judge() string {
	if s.cfg.Task != nil {
		return "the task's evaluate.py scores"
	}
	return "the hidden exam grades"
}
