package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/verify"
)

// exitFailed is a grading whose bundle could not be graded at all (the agent's fault), as
// `sealrun run --wait` reports a failed run.
const exitFailed = 3

// gradeFlags are the flags grade and regrade share.
type gradeFlags struct {
	sandboxFlags
	bundle, exam, track, image, logs string
	question, grading                time.Duration
	cpus                             float64
	memory                           int64
	fam                              examInput
	json                             bool
}

func (f *gradeFlags) addFlags(cmd *cobra.Command) {
	f.sandboxFlags.addFlags(cmd)
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "the candidate bundle (.tar.gz), for example <run>/candidates/<sha256>.tar.gz")
	cmd.Flags().StringVar(&f.exam, "exam", "", "the built exam (sealrun exam build)")
	cmd.Flags().StringVar(&f.logs, "logs", "", "keep the private grading logs (per-question outcomes, the bundle's stderr) in this directory")
	cmd.Flags().Float64Var(&f.cpus, "cpus", 1, "CPUs of each grader container")
	cmd.Flags().Int64Var(&f.memory, "memory", 4<<30, "memory of each grader container, bytes")
	cmd.Flags().StringSliceVar(&f.gpus, "gpu", nil, "CDI devices to give the grader (vendor/class=name)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print report.json instead of the summary")
}

// env builds the grading environment: a sandbox run of its own, torn down by the returned func.
func (f *gradeFlags) env(ctx context.Context, g *globals, cmd *cobra.Command, image string, question time.Duration, maxGzip int64) (*grader.Env, func(), error) {
	rootfs, err := imageRootfs(g, image)
	if err != nil {
		return nil, nil, fmt.Errorf("grader image %s: %w (build or pull it first: sealrun images build-local, sealrun images pull)", image, err)
	}
	edits, err := f.gpuEdits(cmd.ErrOrStderr())
	if err != nil {
		return nil, nil, err
	}
	h, err := f.host(g)
	if err != nil {
		f.sandboxFlags.Close()
		return nil, nil, err
	}
	run, err := h.NewRun(ctx, fmt.Sprintf("grade-%d", os.Getpid()))
	if err != nil {
		f.sandboxFlags.Close()
		return nil, nil, err
	}
	cleanupHost := f.sandboxFlags.Close
	work := f.logs
	var cleanup []func()
	if work == "" {
		tmp, err := os.MkdirTemp("", "sealrun-grade-")
		if err != nil {
			run.Destroy(context.Background())
			cleanupHost()
			return nil, nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(tmp) })
		work = filepath.Join(tmp, "grading")
		os.Chmod(tmp, 0o711)
	} else if work, err = filepath.Abs(work); err != nil {
		return nil, nil, err
	}
	device := "cpu: " + grader.CPUModel()
	if len(f.gpus) > 0 {
		device = "gpu: " + strings.Join(f.gpus, ", ")
	}
	e := &grader.Env{Run: run, Rootfs: rootfs, Image: image, Devices: edits.Devices, Mounts: edits.Mounts, GPUEnv: edits.Env, Symlinks: edits.Symlinks,
		Limits: sandbox.Limits{CPUs: f.cpus, MemoryBytes: f.memory}, Device: device, Question: question,
		WorkDir: work, Bundle: grader.DefaultLimits(maxGzip)}
	return e, func() {
		run.Destroy(context.Background())
		for _, c := range cleanup {
			c()
		}
		cleanupHost()
	}, nil
}

func newGradeCmd(g *globals) *cobra.Command {
	var f gradeFlags
	cmd := &cobra.Command{
		Use:   "grade --bundle B.tar.gz --exam EXAM (--track T | --image REF) [--json]",
		Short: "Grade a bundle on an exam exactly as a run does: pass vector, score, bits per byte",
		Long: `Grade runs the hidden-exam grading of a sealed run on one bundle, on this host: the bundle is
unpacked under the bundle rules, its entrypoint runs in fresh grader containers (no network, the
bundle read-only), sealrun sends each question's prefix and compares exactly the answer's length,
then computes bits per byte on the answer spans (grader/PROTOCOL.md).

With --track, the exam must be the track's hidden exam or its validation set (by SHA-256), and the
track gives the grader image, the artifact limit and the time limits. Without a track, give the
grader image with --image; --question-limit and --grading set the limits.

Exit status: 0 graded, 3 the bundle could not be graded at all (broken bundle: the reason is
printed), 1 bad input, 2 usage or a failure of this host. Needs root.`,
		Example: `  sealrun grade --bundle candidate.tar.gz --exam exam.sealrun --track tracks/ari-v1.toml
  sealrun grade --bundle example.tar.gz --exam exam.sealrun --image sealrun.local/python@sha256:<hex> --documents docs.jsonl`,
		Args: exactArgs(0, "no arguments (use --bundle, --exam, --track)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.bundle == "" || f.exam == "" {
				return usage(errors.New("give the bundle with --bundle and the exam with --exam"))
			}
			t, image, ex, err := f.gradeInputs()
			if err != nil {
				return err
			}
			families, err := f.fam.families(cmd)
			if err != nil {
				return err
			}
			rep, workDir, err := f.grade(cmd, g, image, ex, t, families)
			if err != nil {
				return err
			}
			if err := printReport(cmd.OutOrStdout(), rep, f.json); err != nil {
				return ioError(err)
			}
			if f.logs != "" && !f.json {
				fmt.Fprintf(cmd.OutOrStdout(), "logs               %s (private: per-question outcomes, the bundle's stderr)\n", workDir)
			}
			if rep.Status == outcome.Failed {
				return &exitError{code: exitFailed, err: errors.New(rep.Reason), quiet: true}
			}
			return nil
		},
	}
	f.addFlags(cmd)
	cmd.Flags().StringVar(&f.track, "track", "", "the track (exam pin, grader image, limits)")
	cmd.Flags().StringVar(&f.image, "image", "", "the grader image (name@sha256:<hex> or a digest from sealrun images ls); default: the track's")
	cmd.Flags().DurationVar(&f.question, "question-limit", 30*time.Second, "per-question limit without --track")
	cmd.Flags().DurationVar(&f.grading, "grading", 30*time.Minute, "grading limit (both phases) without --track")
	f.fam.addFlags(cmd, false)
	return cmd
}

// grade grades --bundle in a grading environment of its own (torn down after) and returns the
// report and the directory of the grading logs.
func (f *gradeFlags) grade(cmd *cobra.Command, g *globals, image string, ex *exams.Exam, t *policy.Track, families map[string]string) (*report.Exam, string, error) {
	ctx := cmd.Context()
	e, done, err := f.env(ctx, g, cmd, image, t.Budget.QuestionLimit, t.Artifact.MaxGzipBytes)
	if err != nil {
		return nil, "", err
	}
	defer done()
	rep, err := gradeFile(ctx, e, f.bundle, ex, t, families)
	return rep, e.WorkDir, err
}

// gradeFile grades one bundle file and builds its report.
func gradeFile(ctx context.Context, e *grader.Env, bundle string, ex *exams.Exam, t *policy.Track, families map[string]string) (*report.Exam, error) {
	sum, err := fileio.SHA256(bundle)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(bundle)
	if err != nil {
		return nil, err
	}
	res, err := e.Grade(ctx, bundle, ex, time.Now().Add(t.Budget.Grading), nil)
	if err != nil {
		return nil, err
	}
	return res.Report(t, ex, report.Candidate{ID: digest.Digest("sha256:" + sum), Size: st.Size()}, e, families), nil
}

func printReport(w io.Writer, r *report.Exam, asJSON bool) error {
	if asJSON {
		return printJSON(w, r)
	}
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%-18s %s\n", k, fmt.Sprintf(format, args...)) }
	row("bundle", "%s (%d bytes gzipped)", r.Candidate.ID, r.Candidate.Size)
	row("exam", "%s (%d questions, %d bytes of context)", r.Exam.SHA256, r.Exam.Questions, r.Exam.ContextBytes)
	if r.Track.ID != "" {
		row("track", "%s %s, id %s", r.Track.Name, r.Track.Version, r.Track.ID)
	}
	row("status", "%s", r.Status)
	if r.Reason != "" {
		row("reason", "%s", r.Reason)
	}
	row("score", "%d/%d passed = %.2f%%", r.Score.Passed, r.Score.Questions, r.Score.Percent)
	for _, fam := range slices.Sorted(maps.Keys(r.Families)) {
		s := r.Families[fam]
		row("  "+fam, "%d/%d = %.1f%%", s.Passed, s.Questions, s.Percent)
	}
	var outs []string
	for _, o := range []report.Outcome{report.Pass, report.Wrong, report.WrongLength, report.Malformed, report.Timeout, report.Crash, report.NotRun} {
		if n := r.Outcomes[o]; n > 0 {
			outs = append(outs, fmt.Sprintf("%s %d", o, n))
		}
	}
	row("outcomes", "%s", strings.Join(outs, ", "))
	row("restarts", "%d answering, %d scoring", r.Restarts.Answers, r.Restarts.Bits)
	if r.BitsPerByte != nil {
		row("bits per byte", "%.4f (diagnostic, not the score)", *r.BitsPerByte)
	} else {
		row("bits per byte", "null: %s", r.BitsPerByteNote)
	}
	row("pass vector", "%s", r.PassVector)
	row("pass vector sha256", "%s", r.PassVectorSHA256)
	row("device", "%s", r.Device)
	row("timings", "answers %.1fs (p50 %.2f ms, max %.2f ms per question), bits %.1fs, %d entrypoint starts",
		float64(r.Timings.AnswersMS)/1000, r.Timings.QuestionP50MS, r.Timings.QuestionMaxMS, float64(r.Timings.BitsMS)/1000, r.Timings.EntrypointLoads)
	return nil
}

func newRegradeCmd(g *globals) *cobra.Command {
	var f gradeFlags
	var vf verifyFlags
	var attPath string
	cmd := &cobra.Command{
		Use:   "regrade --attestation ATT --key PUB.pem --bundle B.tar.gz --exam EXAM [--report report.json] [--track T]",
		Short: "Regrade an attested bundle and compare its pass vector with the attestation's",
		Long: `Regrade is the third party's check of a published result. It verifies the attestation with
--key and that --bundle is its graded bundle and --exam its exam (by SHA-256), grades the bundle
on this host exactly as the run did (the attested grader image, from the local image store), and
compares the pass vector's SHA-256 with the attested one.

With --report (the run's report.json, checked against the attestation) the regrade uses the
run's question limit and, on a difference, lists the questions that differ and the devices of both
gradings; with --track, the track's. Without either, the question limit is 30s.

Exit status: 0 same pass vector, 1 different (the differences are printed) or not valid, 2 usage or
a failure of this host. Needs root.`,
		Example: `  sealrun regrade --attestation result.att.json --key sealrun.pub --bundle candidate.tar.gz --exam exam.sealrun --report report.json`,
		Args:    exactArgs(0, "no arguments (use --attestation, --key, --bundle, --exam)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attPath == "" {
				return usage(errors.New("give the run's attestation with --attestation"))
			}
			if f.bundle == "" || f.exam == "" {
				return usage(errors.New("give the graded bundle with --bundle and the exam with --exam"))
			}
			vf.bundle, vf.track = f.bundle, f.track
			return regrade(cmd, g, &f, &vf, attPath)
		},
	}
	f.addFlags(cmd)
	cmd.Flags().StringVar(&attPath, "attestation", "", "the run's result.att.json")
	cmd.Flags().StringVar(&vf.key, "key", "", "the signer's public key (PEM)")
	cmd.Flags().StringVar(&vf.report, "report", "", "the run's report.json (checked against the attestation)")
	cmd.Flags().StringVar(&f.track, "track", "", "the track file (checked against the attestation)")
	return cmd
}

// regrade verifies the attestation, grades its bundle as the run did and compares the pass
// vectors (sealrun regrade).
func regrade(cmd *cobra.Command, g *globals, f *gradeFlags, vf *verifyFlags, attPath string) error {
	r, err := verify.Run(attPath, vf.options(nil, cmd.ErrOrStderr()))
	if err != nil {
		return verifyError(err)
	}
	if !r.Valid {
		return invalid(fmt.Errorf("%s: not valid (%s): %s", attPath, r.Reason, r.Detail))
	}
	p := r.Run.Predicate
	if p.Result.Status != outcome.Graded {
		return fmt.Errorf("the attestation's result is %s (%s): there is no graded pass vector to regrade", p.Result.Status, p.Result.Reason)
	}
	ex, err := openExam(f.exam, p.Exam.SHA256)
	if err != nil {
		return err
	}
	attested, err := readReport(vf.report)
	if err != nil {
		return err
	}
	t, err := regradeTrack(p, attested, vf.report, f.track)
	if err != nil {
		return err
	}
	rep, _, err := f.grade(cmd, g, p.Images.Grader, ex, t, nil)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if f.json {
		printReport(w, rep, true)
	}
	if rep.PassVectorSHA256 == p.Result.PassVectorSHA256 {
		if !f.json {
			fmt.Fprintf(w, "regrade matches: pass vector sha256 %s, %d/%d passed (attested %d/%d)\n", rep.PassVectorSHA256, rep.Score.Passed, rep.Score.Questions, p.Result.Passed, p.Result.Questions)
		}
		return nil
	}
	printDifference(w, p, rep, attested, ex)
	return &exitError{code: exitInvalid, err: errors.New("regrade differs"), quiet: true}
}

// readReport reads the run's report.json given with --report (nil without one).
func readReport(path string) (*report.Exam, error) {
	if path == "" {
		return nil, nil
	}
	data, err := fileio.ReadLimited(path, "report", 16<<20)
	if err != nil {
		return nil, ioError(err)
	}
	r := &report.Exam{}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("report %s: %v", path, err)
	}
	return r, nil
}

// regradeTrack is the track a regrade grades under: the attested one's identity, grading budget
// and artifact limit, with the question limit of the run's report, else of --track, else 30s.
func regradeTrack(p *attest.Predicate, attested *report.Exam, reportPath, trackFile string) (*policy.Track, error) {
	question := 30 * time.Second
	if attested != nil {
		var err error
		if question, err = time.ParseDuration(attested.Limits.Question); err != nil {
			return nil, fmt.Errorf("report %s: limits.question %q: %v", reportPath, attested.Limits.Question, err)
		}
	}
	grading, _ := time.ParseDuration(p.Budget.Grading)
	t := &policy.Track{ID: p.Track.ID, Name: p.Track.Name, Version: p.Track.Version, Budget: policy.Budget{Grading: grading, QuestionLimit: question}, Artifact: policy.Artifact{MaxGzipBytes: p.Budget.MaxGzipBytes}}
	if trackFile != "" {
		lt, err := policy.Load(trackFile)
		if err != nil {
			return nil, err
		}
		if attested == nil {
			t.Budget.QuestionLimit = lt.Budget.QuestionLimit
		}
	}
	return t, nil
}

// printDifference says how a regrade's pass vector differs from the attested one, question by
// question when the run's report is at hand.
func printDifference(w io.Writer, p *attest.Predicate, rep, attested *report.Exam, ex *exams.Exam) {
	fmt.Fprintf(w, "regrade DIFFERS: pass vector sha256 %s, attested %s\n", rep.PassVectorSHA256, p.Result.PassVectorSHA256)
	fmt.Fprintf(w, "  regraded %d/%d passed on %s; attested %d/%d\n", rep.Score.Passed, rep.Score.Questions, rep.Device, p.Result.Passed, p.Result.Questions)
	if attested == nil {
		fmt.Fprintln(w, "  give --report report.json to see which questions differ")
		return
	}
	fmt.Fprintf(w, "  the run graded on %s (grader image %s)\n", attested.Device, attested.GraderImage)
	ids := make([]string, len(ex.Questions))
	for i, q := range ex.Questions {
		ids[i] = q.ID
	}
	for _, d := range report.DiffVectors(ids, report.PassVector(attested.PassVector), report.PassVector(rep.PassVector)) {
		fmt.Fprintf(w, "  %s\n", d)
	}
}

// gradeInputs are what grade grades under: the track (--track, else one made of the limit flags),
// the grader image (--image, else the track's) and the exam (the track's, when a track is given).
func (f *gradeFlags) gradeInputs() (*policy.Track, string, *exams.Exam, error) {
	t := &policy.Track{Budget: policy.Budget{Grading: f.grading, QuestionLimit: f.question}, Artifact: policy.Artifact{MaxGzipBytes: 16 << 20}}
	image := f.image
	if f.track != "" {
		var err error
		if t, err = policy.Load(f.track); err != nil {
			return nil, "", nil, err
		}
		if image == "" {
			image = t.Images.Grader.String()
		}
	} else if image == "" {
		return nil, "", nil, usage(errors.New("give --track (its grader image and limits) or the grader image with --image"))
	}
	ex, err := openExam(f.exam, "")
	if err != nil {
		return nil, "", nil, err
	}
	if f.track != "" && ex.SHA256 != t.Exam.SHA256 && ex.SHA256 != t.Exam.ValidationSHA256 {
		return nil, "", nil, fmt.Errorf("exam %s has sha256 %s, but track %s pins the hidden exam %s and the validation set %s; give the exam the track pins (or grade without --track, with --image)", f.exam, ex.SHA256, f.track, t.Exam.SHA256, t.Exam.ValidationSHA256)
	}
	return t, image, ex, nil
}
