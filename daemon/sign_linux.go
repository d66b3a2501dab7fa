package daemon

// Phase 6 of a run, sign: the attestation's predicate is built from the track, the host, the
// build, the run's timeline, its air-gap evidence, its submissions, its audit log's head, its
// result and its ledger reference; the statement is signed and written as result.att.json.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/buildinfo"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/sandbox"
)

// predicate is the run's attestation predicate and its subjects (report.json and the graded
// bundle).
func (rs *runState) predicate(ctx context.Context) (*attest.Predicate, []attest.Subject, error) {
	x, spec, t := rs.x, rs.spec, rs.t
	finished := rs.now() // before the host's facts are gathered (the runtime's version is a process)
	pred := attest.PredicateFromTrack(t)
	if t.Task != nil {
		pred.Task = taskInfo(t, rs.out.TaskReport)
	}
	pred.Agent = attest.Agent{Model: spec.Agent.Provider + "/" + spec.Agent.Model, ReasoningEffort: spec.Agent.Effort}
	pred.Seed = spec.Seed
	pred.Run = attest.RunInfo{ID: spec.ID, RerunOf: spec.RerunOf}
	pred.Host = x.hostFacts(ctx)
	b := x.Build
	if b == nil { // an executor made in-process (tests): the running binary
		cb, err := buildinfo.CurrentBuild(x.Version, x.Commit)
		if err != nil {
			return nil, nil, err
		}
		b = &cb
	}
	build := *b
	build.SeamsUsed = x.seamsUsed()
	pred.Build = &build
	pred.Host.GPUModel, pred.Host.GPUDriver = gpuFacts(x.Cfg, spec.GPUs)
	pred.Timeline = attest.Timeline{Queued: spec.Queued.UTC(), Started: rs.started.UTC(), Deadline: rs.deadline.UTC(), Finished: finished.UTC()}
	for _, p := range rs.pauses {
		p.Start, p.End = p.Start.UTC(), p.End.UTC()
		pred.Timeline.Pauses = append(pred.Timeline.Pauses, p)
	}
	if pred.Timeline.Queued.After(pred.Timeline.Started) {
		pred.Timeline.Queued = pred.Timeline.Started
	}
	if hostconfig.IsHuman(spec.Agent.String()) {
		pred.Human = people(spec, rs.attached, finished)
	}
	rs.evidence(pred)
	pred.Usage = rs.used
	if x.TPM != nil {
		pred.TPM = x.TPM.Info()
	} else {
		pred.TPM = &attest.TPMInfo{None: attest.TPMNone}
	}
	subjects := rs.result(pred)
	if x.Ledger != nil {
		ref, err := x.Ledger.Ref(spec.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("the ledger reference of run %s: %w", spec.ID, err)
		}
		pred.Ledger = ref
	}
	return pred, subjects, nil
}

// evidence adds what the run left to check: each role's network namespace as its hook saw it,
// the submission history and the audit log's head.
func (rs *runState) evidence(pred *attest.Predicate) {
	pred.AirGap.Containers = []attest.AirGapContainer{}
	if rs.run != nil {
		for _, role := range []sandbox.Role{sandbox.RoleController, sandbox.RoleRunner, sandbox.RoleGrader} {
			if ev, ok := rs.run.Evidence()[role]; ok {
				pred.AirGap.Containers = append(pred.AirGap.Containers, attest.AirGapContainer{Role: string(role), Links: ev.Links, Addresses: ev.Addresses, Routes: ev.Routes, EgressBlocked: true})
			}
		}
	}
	pred.Submissions.History = []attest.Submission{}
	if rs.hist != nil {
		for _, c := range rs.hist.Candidates() {
			pred.Submissions.History = append(pred.Submissions.History, attest.Submission{Digest: digest.Digest(c.ID), Size: c.Size, Time: c.Time.UTC(), ValidationScore: c.Score, Promoted: c.Promoted})
		}
	}
	pred.Submissions.Head, _ = attest.HistoryHead(pred.Submissions.History)
	head, n := rs.io.log.Head()
	pred.Audit = attest.Audit{Head: head, Entries: n}
}

// result sets the predicate's result from the outcome and returns the statement's subjects.
func (rs *runState) result(pred *attest.Predicate) []attest.Subject {
	out := rs.out
	subjects := []attest.Subject{attest.NewSubject(attest.SubjectReport, rs.reportSum)}
	graded := ""
	if rep := out.TaskReport; rep != nil {
		pred.Result = attest.Result{Status: out.Status, Reason: out.Reason}
		if out.Status == outcome.Graded {
			pred.Result.Value, pred.Result.ValidSubmission, pred.Result.Invalid = rep.Value, rep.Valid, rep.Invalid
		}
		graded = string(rep.Candidate.ID)
	} else {
		rep := out.Report
		pred.Result = attest.Result{Status: out.Status, Reason: out.Reason, Questions: int(rs.t.Exam.Questions), Passed: rep.Score.Passed, Score: rep.Score.Percent,
			PassVectorSHA256: rep.PassVectorSHA256, BitsPerByte: rep.BitsPerByte}
		graded = string(rep.Candidate.ID)
	}
	if graded != "" {
		subjects = append(subjects, attest.NewSubject(attest.SubjectBundle, strings.TrimPrefix(graded, "sha256:")))
	}
	return subjects
}

// sign signs the statement and writes result.att.json. A result that cannot be attested as it
// is becomes invalid, with the reason, and is attested as such: every finished run gets an
// attestation.
func (rs *runState) sign(ctx context.Context, pred *attest.Predicate, subjects []attest.Subject) (*attest.Statement, error) {
	x, id, out := rs.x, rs.spec.ID, rs.out
	st := attest.NewStatement(pred, subjects...)
	x.hold(ctx, id, "sign")
	env, err := attest.Sign(ctx, st, x.Signer)
	if err != nil && out.Status != outcome.Invalid {
		st = attest.NewStatement(pred, subjects...)
		out.Status, out.Reason = outcome.Invalid, "attestation: "+err.Error()
		pred.Result.Status, pred.Result.Reason = out.Status, out.Reason
		env, err = attest.Sign(ctx, st, x.Signer)
	}
	if err == nil && x.TPM != nil {
		// The quote binds the signed statement; one the TPM does not give is the host's fault:
		// the run is invalid, and says why in a statement without a quote.
		if qerr := rs.quote(env); qerr != nil {
			out.Status, out.Reason = outcome.Invalid, "TPM quote: "+qerr.Error()
			pred.Result.Status, pred.Result.Reason = out.Status, out.Reason
			pred.TPM = &attest.TPMInfo{None: "the TPM's quote failed: " + qerr.Error()}
			st = attest.NewStatement(pred, subjects...)
			env, err = attest.Sign(ctx, st, x.Signer)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sign the attestation of run %s: %w", id, err)
	}
	attPath := filepath.Join(rs.io.dir, "result.att.json")
	if err := fileio.WriteAtomic(attPath, 0o644, func(w io.Writer) error { _, err := w.Write(env); return err }); err != nil {
		return nil, fmt.Errorf("write the attestation: %w", err)
	}
	out.Attestation = attPath
	if x.TSA != nil {
		x.timestamp(ctx, id, env, attPath)
	}
	return st, nil
}

// timestamp asks the host's timestamp authority for a timestamp of the attestation's signature
// and writes the Sigstore bundle beside it (result.sigstore.json) with the token. An authority
// that fails (three tries) costs the run nothing: the bundle is written without it, and the log
// and the run's journal say why.
func (x *Executor) timestamp(ctx context.Context, id string, env []byte, attPath string) {
	sig, err := attest.EnvelopeSignature(env)
	if err != nil {
		return
	}
	var token []byte
	for try := 1; try <= 3; try++ {
		tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		token, err = x.TSA.Timestamp(tctx, http.DefaultClient, sig)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try) * time.Second)
	}
	var tokens [][]byte
	if err != nil {
		x.event(id, api.EventTimestampFailed, err.Error())
	} else {
		tokens = append(tokens, token)
	}
	pub, perr := x.Signer.PublicKey()
	hint := ""
	if perr == nil {
		hint, _ = attest.KeyID(pub)
	}
	b, berr := attest.SigstoreBundle(env, hint, tokens...)
	if berr == nil {
		berr = fileio.WriteFile(attest.BundlePath(attPath), b, 0o644)
	}
	if berr != nil {
		x.event(id, api.EventTimestampFailed, "write the Sigstore bundle: "+berr.Error())
	}
}

func (x *Executor) hostFacts(ctx context.Context) attest.Host {
	h := attest.Host{Runtime: x.Host.Runtime.Kind, SealrunVersion: x.Version, SealrunCommit: x.Commit, Runtimes: map[string]string{}}
	if v, err := x.Host.Runtime.Version(ctx); err == nil {
		h.RuntimeVersion = v
	}
	for _, role := range sandbox.Roles {
		h.Runtimes[string(role)] = x.Host.RuntimeFor(role).VersionLine
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

// gpuFacts is the model of each of a run's GPUs and the driver, as the NVIDIA driver reports them
// (sandbox.GPUFacts); a GPU the driver does not describe is named by its CDI name.
func gpuFacts(cfg *hostconfig.Config, names []string) (model, driver string) {
	if len(names) == 0 {
		return "", ""
	}
	facts, err := sandbox.GPUFacts(cfg.CDIDirs(), "/proc", names)
	if err != nil {
		return strings.Join(names, ", "), ""
	}
	return sandbox.GPUModelAndDriver(facts)
}
