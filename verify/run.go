package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/transcript"
)

// RunOptions are what one run's check is given: the signer's key and, for each further check,
// its input. A check whose input is not given is not applicable, and the result says so.
type RunOptions struct {
	Key    string // the signer's public key (PEM)
	Bundle string // the graded bundle the attestation names
	Report string // the result report
	Audit  string // the audit log (default with Transcript: its audit.jsonl)
	Track  string // the track file
	// Transcript is the run's directory: its audit log, every body that log hashes, and
	// transcript.json, transcript.html and report.html, each what they give.
	Transcript string
	// AllowUnchecked names files of the run directory (base names, or path.Match patterns on
	// them) that may stay unchecked: a transcript.json of another format, say. Any other file
	// of the trajectory no check covers fails the transcript check.
	AllowUnchecked []string
	// Export is an export of the run (trajectory.json, or an Inspect eval log holding it),
	// recomputed from the checked transcript; it needs Transcript.
	Export string
	// TSAChain is a timestamp authority's chain: the attestation's signature must carry its
	// RFC 3161 timestamp (in the Sigstore bundle beside it).
	TSAChain string
	// Witnesses (Quorum of them, default all) must have cosigned the run's witnessed proof
	// (Witnessed; default witnessed.json beside the attestation).
	Witnesses []*witness.Verifier
	Quorum    int
	Witnessed string
	// Rebuild is a clone or URL of sealrun's repository: the binaries the build record hashes
	// are rebuilt from its commit and compared. Progress gets a line per step.
	Rebuild  string
	Progress io.Writer
	// TPM is the host's TPM enrollment and its maker's CAs: the run's quote (result.tpm.json
	// beside the attestation) must check against them.
	TPM TPMOptions
}

// RunDetails is what one run's attestation says, and what each further check found.
type RunDetails struct {
	KeyID             string            `json:"key_id,omitempty"`
	AttestationChecks []string          `json:"attestation_checks"` // what attest.Verify checked, in order
	Warnings          []string          `json:"warnings"`
	Track             *attest.TrackInfo `json:"track,omitempty"`
	Agent             *attest.Agent     `json:"agent,omitempty"`
	Task              *attest.TaskInfo  `json:"task,omitempty"`   // a task run's task
	Result            any               `json:"result,omitempty"` // in the predicate's shape (Predicate.ResultJSON)
	Seed              *int64            `json:"seed,omitempty"`
	Run               *attest.RunInfo   `json:"run,omitempty"`
	Statement         string            `json:"statement_sha256,omitempty"`
	Build             *attest.Build     `json:"build,omitempty"`
	Ledger            *LedgerEntry      `json:"ledger,omitempty"`
	Transcript        *Transcript       `json:"transcript,omitempty"`
	Timestamp         *Timestamp        `json:"timestamp,omitempty"`
	Export            *Export           `json:"export,omitempty"`
	Witnessed         *Witnessed        `json:"witnessed,omitempty"`
	Rebuild           *Rebuild          `json:"rebuild,omitempty"`
	TPM               *TPM              `json:"tpm,omitempty"`
	// NoTPM is why the run has no quote, as its attestation says (absent where it has one).
	NoTPM string `json:"no_tpm,omitempty"`
	// Predicate is the verified predicate, Verified the whole attestation as attest.Verify read
	// it (nil when it did not verify).
	Predicate *attest.Predicate `json:"-"`
	Verified  *attest.Verified  `json:"-"`
}

// LedgerEntry is where the run stands in its host's run ledger.
type LedgerEntry struct {
	Origin   string `json:"origin"`
	Index    uint64 `json:"index"`
	HeadSize uint64 `json:"head_size"`
	HeadRoot string `json:"head_root"`
}

// Transcript is what the transcript check found of a run's trajectory.
type Transcript struct {
	Dir            string            `json:"dir"`
	Exchanges      int               `json:"exchanges"`
	Calls          int               `json:"calls"`
	Bodies         transcript.Counts `json:"bodies"`
	TranscriptJSON bool              `json:"transcript_json"` // present and exactly what the log and bodies give
	TranscriptHTML bool              `json:"transcript_html"`
	ReportHTML     bool              `json:"report_html"`
	Notes          []string          `json:"notes"`
}

// Export is what the export check found.
type Export struct {
	File             string `json:"file"`
	Format           string `json:"format"`
	TranscriptSHA256 string `json:"transcript_sha256"`
	Version          string `json:"sealrun_version"`
}

// Run checks one run offline: the attestation (its DSSE envelope, exactly one signature valid
// for o.Key, the statement and predicate, the files it binds as given), then each check o asks
// for — the trajectory, an export, the timestamp, the witnessed proof, the rebuild. Each is a
// Check of the result; one not asked for is not applicable. A run that does not check is a
// Result that is not Valid; an error is for what stopped the check itself (*Error).
func Run(att string, o RunOptions) (*Result, error) {
	switch {
	case o.Key == "":
		return nil, usageErr(opt.New("verify.RunOptions", "Key", "none given: give the signer's public key (a PEM file, for example sealrun.pub)"))
	case o.Export != "" && o.Transcript == "":
		return nil, usageErr(opt.New("verify.RunOptions", "Export", "is recomputed from the run's checked transcript (its run directory)", "Transcript"))
	case o.Witnessed != "" && len(o.Witnesses) == 0:
		return nil, usageErr(opt.New("verify.RunOptions", "Witnessed", "is checked against witnesses: their keys", "Witnesses"))
	}
	if o.Quorum == 0 {
		o.Quorum = len(o.Witnesses)
	}
	host, enrollFail, err := openTPM(o.TPM)
	if err != nil {
		return nil, err
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	r := &Result{Kind: "run", Path: att, Run: &RunDetails{AttestationChecks: []string{}, Warnings: []string{}}}
	d := r.Run
	audit := o.Audit
	if audit == "" && o.Transcript != "" {
		audit = filepath.Join(o.Transcript, "audit.jsonl")
	}
	got, err := attest.VerifyFile(att, attest.Files{Key: o.Key, Bundle: o.Bundle, Report: o.Report, Audit: audit, Track: o.Track})
	var vf *attest.VerificationFailure
	switch {
	case errors.As(err, &vf):
		r.fail("attestation", Problem{File: att, Reason: vf.Detail})
		r.Reason, r.Detail = string(vf.Reason), vf.Detail
		for _, c := range []string{"transcript", "export", "timestamp", "witnessed", "rebuild", "tpm"} {
			r.skip(c, "the attestation did not verify")
		}
		return r.finishRun(), nil
	case err != nil:
		return nil, ioErr(err)
	}
	r.pass("attestation")
	p := got.Statement.Predicate
	sum := sha256.Sum256(got.Payload)
	d.KeyID, d.AttestationChecks, d.Track, d.Agent, d.Result, d.Seed, d.Run = got.KeyID, got.Checks, &p.Track, &p.Agent, p.ResultJSON(), &p.Seed, &p.Run
	d.Task, d.Predicate, d.Verified, d.Build = p.Task, p, got, p.Build
	d.Statement = hex.EncodeToString(sum[:])
	d.Warnings = append(d.Warnings, got.Warnings...)
	if got.Ledger != nil {
		d.Ledger = &LedgerEntry{Origin: got.Ledger.Origin, Index: p.Ledger.Index, HeadSize: got.Ledger.Size, HeadRoot: hex.EncodeToString(got.Ledger.Root[:])}
	}

	if o.Transcript == "" {
		r.skip("transcript", "no run directory given (--transcript)")
	} else if err := r.transcript(o, p); err != nil {
		return nil, err
	}

	switch {
	case o.Export == "":
		r.skip("export", "no export given (--export)")
	case r.Check("transcript").Outcome != Passed:
		r.fail("export", Problem{File: o.Export, Reason: "not recomputed: the transcript it is made from did not check"})
	default:
		ex, err := checkExport(o.Export, o.Transcript, p.Run.ID)
		if errors.As(err, &vf) {
			r.fail("export", Problem{File: o.Export, Reason: vf.Detail})
		} else if err != nil {
			return nil, err
		} else {
			d.Export = ex
			r.pass("export")
		}
	}

	if o.TSAChain == "" {
		r.skip("timestamp", "no timestamp authority's chain given (--tsa-chain)")
	} else {
		ts, err := checkTimestamps(att, o.TSAChain)
		if errors.As(err, &vf) {
			r.fail("timestamp", Problem{Reason: vf.Detail})
		} else if err != nil {
			return nil, err
		} else {
			d.Timestamp = ts
			r.pass("timestamp")
		}
	}

	if len(o.Witnesses) == 0 {
		r.skip("witnessed", "no witness's key given (--witness)")
	} else {
		wv, err := checkWitnessed(att, &o, got)
		if errors.As(err, &vf) {
			r.fail("witnessed", Problem{Reason: vf.Detail})
		} else if err != nil {
			return nil, err
		} else {
			d.Witnessed = wv
			r.pass("witnessed")
		}
	}

	if o.Rebuild == "" {
		r.skip("rebuild", "no repository given to rebuild from (--rebuild)")
	} else {
		rb, err := rebuild(o.Rebuild, p.Build, progress)
		var nr *notRebuildableError
		switch {
		case errors.As(err, &nr):
			r.fail("rebuild", Problem{Reason: nr.Error()})
		case err != nil:
			return nil, err
		case !rb.Same:
			d.Rebuild = rb
			r.fail("rebuild", Problem{Reason: fmt.Sprintf("commit %s built from %s does not give the binaries the attestation records", rb.Commit, o.Rebuild)})
		default:
			d.Rebuild = rb
			r.pass("rebuild")
		}
	}

	if p.TPM != nil && p.TPM.None != "" {
		d.NoTPM = p.TPM.None
	} else if p.TPM == nil {
		d.NoTPM = "the attestation says nothing of a TPM (made before hosts said so)"
	}
	switch {
	case enrollFail != nil:
		r.fail("tpm", Problem{File: o.TPM.Enrollment, Reason: enrollFail.Detail})
	case host == nil && p.TPM != nil && p.TPM.AttestationKey != "":
		r.skip("tpm", "the run carries a TPM quote ("+attest.TPMQuoteFile+"); give the host's enrollment (--tpm) to check it")
	case host == nil:
		r.skip("tpm", "no hardware root: "+d.NoTPM)
	default:
		rq, err := readRunQuote(filepath.Join(filepath.Dir(att), attest.TPMQuoteFile))
		if err != nil {
			r.fail("tpm", Problem{File: attest.TPMQuoteFile, Reason: err.Error()})
			break
		}
		t, err := host.check(got, rq, r.Check("rebuild").Outcome == Passed)
		if errors.As(err, &vf) {
			r.fail("tpm", Problem{Reason: vf.Detail})
		} else if err != nil {
			return nil, err
		} else {
			d.TPM = t
			r.pass("tpm")
		}
	}
	return r.finishRun(), nil
}

// finishRun is finish, keeping the attestation's own reason code where it failed.
func (r *Result) finishRun() *Result {
	reason, detail := r.Reason, r.Detail
	r.finish()
	if reason != "" {
		r.Reason, r.Detail = reason, detail
	}
	return r
}

// transcript is the check "transcript": the run directory's trajectory against the verified
// predicate, strictly: every file of it that hangs on the audit log is checked, or allowed to
// stay unchecked by name.
func (r *Result) transcript(o RunOptions, p *attest.Predicate) error {
	dir := o.Transcript
	rep, err := transcript.Check(dir, p)
	if err != nil {
		return ioErr(err)
	}
	t := &Transcript{Dir: dir, Exchanges: rep.Exchanges, Calls: rep.Calls, Bodies: rep.Bodies, TranscriptJSON: rep.Transcript,
		TranscriptHTML: rep.Page, Notes: append([]string{}, rep.Notes...)}
	r.Run.Transcript = t
	var ps []Problem
	for _, pr := range rep.Problems {
		ps = append(ps, problemOf(pr))
	}
	// A page or transcript that is there but was not compared (another format, another
	// sealrun's page) is unchecked: a failure unless the reader allows it.
	for _, f := range []struct {
		name string
		ok   bool
	}{{"transcript.json", rep.Transcript}, {"transcript.html", rep.Page}} {
		if _, err := os.Stat(filepath.Join(dir, f.name)); err == nil && !f.ok {
			r.uncheckedInRun(&ps, o.AllowUnchecked, f.name, "not compared: "+joinNotes(rep.Notes))
		}
	}
	// The amendments beside it, which its transcript says: each signed with the key, named by its
	// statement's SHA-256, of this run and this attestation. One that is not would have the page
	// say what no host signed.
	if names, err := os.ReadDir(filepath.Join(dir, transcript.AmendmentsDir)); err == nil {
		v, _, kerr := attest.LoadVerifier(o.Key)
		// The run's track names who signs its amendments beside the host: its track.toml, as
		// the attestation names it.
		track, terr := policy.Load(filepath.Join(dir, "track.toml"))
		if terr == nil && track.ID != p.Track.ID {
			terr = fmt.Errorf("track.toml is track %s; the run's attestation names %s", track.ID, p.Track.ID)
		}
		for _, n := range names {
			rel := transcript.AmendmentsDir + "/" + n.Name()
			env, _, rerr := readWhole(filepath.Join(dir, transcript.AmendmentsDir, n.Name()))
			if kerr != nil || rerr != nil {
				ps = append(ps, Problem{File: rel, Reason: fmt.Sprintf("cannot be checked: %v", errors.Join(kerr, rerr))})
				continue
			}
			if e, err := attest.EnvelopeOf(env); err == nil {
				env = e
			}
			a, err := attest.VerifyAmendment(env, v)
			switch {
			case err != nil:
				ps = append(ps, Problem{File: rel, Reason: fmt.Sprintf("an amendment that does not verify with the key: %v", err)})
			case n.Name() != string(a.Digest)+".att.json":
				ps = append(ps, Problem{File: rel, Reason: "not named by its statement's SHA-256 (" + string(a.Digest) + ")"})
			case a.Statement.Predicate.Run != p.Run.ID || string(a.Statement.Amended()) != r.Run.Statement:
				ps = append(ps, Problem{File: rel, Reason: fmt.Sprintf("an amendment of run %s's attestation %s…, not of this one", a.Statement.Predicate.Run, a.Statement.Amended()[:12])})
			case terr != nil:
				ps = append(ps, Problem{File: rel, Reason: fmt.Sprintf("cannot be checked: the run's track names who signs its amendments beside the host, and %v", terr)})
			default:
				if err := a.CheckReviewer(track); err != nil {
					ps = append(ps, Problem{File: rel, Reason: err.Error()})
				}
			}
		}
	}
	if have, missing, err := readWhole(filepath.Join(dir, transcript.RunPageFile)); !missing {
		if want, werr := transcript.RunPage(dir, p); err == nil && werr == nil && string(have) == string(want) {
			t.ReportHTML = true
		} else {
			ps = append(ps, Problem{File: transcript.RunPageFile, Reason: "not the page its attestation and audit log give (a page made by another sealrun, or edited)"})
		}
	}
	if len(ps) > 0 {
		r.fail("transcript", ps...)
	} else {
		r.pass("transcript")
	}
	return nil
}

func (r *Result) uncheckedInRun(ps *[]Problem, allow []string, name, why string) {
	if allowed(name, allow) {
		r.Unchecked = append(r.Unchecked, Unchecked{File: name, Why: why})
		return
	}
	*ps = append(*ps, Problem{File: name, Reason: "unchecked: " + why + "; a reader who accepts that names it with --allow-unchecked " + name})
}

func joinNotes(ns []string) string {
	if len(ns) == 0 {
		return "no reason given"
	}
	out := ns[0]
	for _, n := range ns[1:] {
		out += "; " + n
	}
	return out
}

// checkExport recomputes the export in file from the run directory dir (whose transcript was
// checked against the attestation of run).
func checkExport(file, dir, run string) (*Export, error) {
	b, err := fileio.ReadLimited(file, "export", 1<<30)
	if err != nil {
		return nil, ioErr(err)
	}
	ex, err := export.Recompute(b, dir)
	if err != nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonExport, Detail: fmt.Sprintf("%s: %v", file, err)}
	}
	if ex.Run != run {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonExport, Detail: fmt.Sprintf("%s: an export of run %s, not of %s", file, ex.Run, run)}
	}
	return &Export{File: file, Format: ex.Format, TranscriptSHA256: ex.TranscriptSHA256, Version: ex.Version}, nil
}
