package grader

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
)

// QuestionsOf turns an exam (or the validation set, same format) into the questions a phase asks.
func QuestionsOf(ex *exams.Exam) []Question {
	qs := make([]Question, len(ex.Questions))
	for i, q := range ex.Questions {
		qs[i] = Question{ID: q.ID, Prefix: q.Prefix, Answer: q.Answer}
	}
	return qs
}

// Prepare unpacks the candidate at file into a fresh directory under WorkDir (name) and checks
// that the grader image has the entrypoint's program. A broken bundle is a *BundleError.
func (e *Env) Prepare(ctx context.Context, file, name string) (*Unpacked, error) {
	if err := os.MkdirAll(e.WorkDir, 0o711); err != nil {
		return nil, fmt.Errorf("grader work directory: %w", err)
	}
	os.Chmod(e.WorkDir, 0o711) // grader containers traverse it to their /bundle
	dst := filepath.Join(e.WorkDir, name)
	os.RemoveAll(dst)
	u, err := Unpack(ctx, file, dst, e.Bundle)
	if err != nil {
		return nil, err
	}
	if prog := u.Manifest.Program(); prog != "" {
		if err := findProgram(e.Rootfs, prog); err != nil {
			os.RemoveAll(dst)
			return nil, err
		}
	}
	return u, nil
}

// imagePath is the PATH every container starts with (sandbox baseEnv).
var imagePath = []string{"/usr/local/bin", "/usr/local/sbin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"}

// findProgram checks that the grader image has an executable prog on its PATH, resolving
// symlinks inside the rootfs only.
func findProgram(rootfs, prog string) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return fmt.Errorf("grader image rootfs: %w", err)
	}
	defer root.Close()
	for _, dir := range imagePath {
		name := strings.TrimPrefix(path.Join(dir, prog), "/")
		if st, err := root.Stat(name); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return nil
		}
		if st, err := root.Lstat(name); err == nil && st.Mode()&os.ModeSymlink != 0 {
			// An absolute link target (os.Root refuses to follow it): resolve it by hand.
			if t, err := root.Readlink(name); err == nil && path.IsAbs(t) {
				if st, err := root.Stat(strings.TrimPrefix(path.Clean(t), "/")); err == nil && st.Mode().IsRegular() {
					return nil
				}
			}
		}
	}
	return bundleErr(ManifestName, "the entrypoint's program %q is not in the grader image (PATH %s); use a program the image has (python3) or ship an executable in the bundle (\"./predict\")", prog, strings.Join(imagePath, ":"))
}

// Result is one hidden grading.
type Result struct {
	Bundle       *Unpacked
	BundleErr    error // *BundleError: the candidate could not be graded at all (the agent's fault)
	Answers      *Answers
	BitsPerByte  *float64
	BitsNote     string
	BitsElapsed  time.Duration
	BitsRestarts int
	BitsLoads    int
}

// Grade grades the candidate file on the exam: phase 1 in fresh grader containers (the daemon
// sends each prefix and reads back exactly the answer's length; the answers never enter a
// container), then seal(vector) — which must journal the pass vector durably — and only then
// phase 2, bits per byte on the answer spans, in fresh containers again. Phase 2 gets whatever
// time phase 1 left before deadline; when it runs out the diagnostic is null, the score stands.
// An error is the infrastructure's failure (the run is invalid); a broken bundle is in
// Result.BundleErr.
func (e *Env) Grade(ctx context.Context, file string, ex *exams.Exam, deadline time.Time, seal func(report.PassVector) error) (*Result, error) {
	res := &Result{}
	logDir := filepath.Join(e.WorkDir, "hidden")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	u, err := e.Prepare(ctx, file, "hidden-bundle")
	var be *BundleError
	switch {
	case errors.As(err, &be):
		res.BundleErr = err
		res.Answers = notRun(len(ex.Questions), err.Error())
		if seal != nil {
			if err := seal(res.Answers.Vector); err != nil {
				return nil, fmt.Errorf("seal pass vector: %w", err)
			}
		}
		return res, nil
	case err != nil:
		return nil, err
	}
	defer os.RemoveAll(u.Dir)
	res.Bundle = u
	qs := QuestionsOf(ex)
	if res.Answers, err = e.Answer(ctx, u, qs, deadline, logDir, "answers"); err != nil {
		return nil, err
	}
	if seal != nil {
		if err := seal(res.Answers.Vector); err != nil {
			return nil, fmt.Errorf("seal pass vector: %w", err)
		}
	}
	if everyNotRun(res.Answers) {
		res.BitsNote = "not measured: the entrypoint never answered"
		return res, nil
	}
	bpb, note, r, err := e.Bits(ctx, u, qs, deadline, logDir)
	if err != nil {
		return nil, err
	}
	res.BitsPerByte, res.BitsNote = bpb, note
	res.BitsElapsed, res.BitsRestarts, res.BitsLoads = r.elapsed, r.restarts, r.loads
	return res, nil
}

// Validate scores an unpacked candidate on the public validation set (feedback only); the
// private logs go to WorkDir/name.
func (e *Env) Validate(ctx context.Context, u *Unpacked, val *exams.Exam, deadline time.Time, name string) (*Answers, error) {
	logDir := filepath.Join(e.WorkDir, name)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	return e.Answer(ctx, u, QuestionsOf(val), deadline, logDir, "validation")
}

func notRun(n int, why string) *Answers {
	a := &Answers{Vector: make(report.PassVector, n), Outcomes: make([]report.Outcome, n), Times: make([]time.Duration, n), FirstNote: why}
	for i := range a.Vector {
		a.Vector[i], a.Outcomes[i] = '0', report.NotRun
	}
	return a
}

func everyNotRun(a *Answers) bool {
	for _, o := range a.Outcomes {
		if o != report.NotRun {
			return false
		}
	}
	return true
}

// Report builds report.json's content for a grading. The status is graded when the bundle
// answered at least once, failed (the agent's fault) when it could not be graded at all.
func (r *Result) Report(t *policy.Track, ex *exams.Exam, cand report.Candidate, e *Env, families map[string]string) *report.Exam {
	a := r.Answers
	rep := &report.Exam{
		Format:      report.ExamFormat,
		Track:       report.Track{ID: t.ID, Name: t.Name, Version: t.Version},
		Exam:        report.ExamInfo{SHA256: ex.SHA256, Questions: len(ex.Questions), ContextBytes: int(ex.Header.ContextBytes)},
		Candidate:   cand,
		Status:      outcome.Graded,
		Score:       report.NewScore(a.Vector.Passed(), len(a.Vector)),
		PassVector:  string(a.Vector),
		Outcomes:    a.Count(),
		BitsPerByte: r.BitsPerByte, BitsPerByteNote: r.BitsNote,
		Device:      e.Device,
		GraderImage: e.Image,
		Limits:      report.Limits{Grading: t.Budget.Grading.String(), Question: e.Question.String(), MaxRestarts: e.maxRestarts()},
		Restarts:    report.Restarts{Answers: a.Restarts, Bits: r.BitsRestarts},
	}
	rep.PassVectorSHA256 = a.Vector.SHA256()
	ids := make([]string, len(ex.Questions))
	for i, q := range ex.Questions {
		ids[i] = q.ID
	}
	rep.Families = report.FamilyScores(ids, a.Vector, families)
	rep.Timings = timings(a, r)
	switch {
	case r.BundleErr != nil:
		rep.Status, rep.Reason = outcome.Failed, r.BundleErr.Error()
	case everyNotRun(a):
		rep.Status, rep.Reason = outcome.Failed, "the bundle never answered: "+a.FirstNote
	case a.FirstNote != "":
		rep.Reason = a.FirstNote
	}
	return rep
}

func timings(a *Answers, r *Result) report.Timings {
	var ts []time.Duration
	for i, t := range a.Times {
		if a.Outcomes[i] != report.NotRun {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	t := report.Timings{AnswersMS: a.Elapsed.Milliseconds(), BitsMS: r.BitsElapsed.Milliseconds(), EntrypointLoads: a.Loads + r.BitsLoads}
	if len(ts) > 0 {
		ms := func(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }
		t.QuestionP50MS, t.QuestionMaxMS = ms(ts[len(ts)/2]), ms(ts[len(ts)-1])
	}
	return t
}

// CPUModel is the host CPU's model name from /proc/cpuinfo, for the report's device.
func CPUModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
