package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/spf13/cobra"
)

// verifyFlags is the flag group of `sealrun verify`.
type verifyFlags struct {
	key, bundle, report, audit, track, transcript, rebuild, tsaChain, witnessed, export string
	json                                                                                bool
	witness                                                                             witnessFlags
}

func (f *verifyFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "key", "", "the signer's public key (PEM), for example sealrun.pub")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "check the graded bundle file against the attestation")
	cmd.Flags().StringVar(&f.report, "report", "", "check the result report file against the attestation")
	cmd.Flags().StringVar(&f.audit, "audit", "", "check the audit log (audit.jsonl) head and entry count")
	cmd.Flags().StringVar(&f.track, "track", "", "check the track id and every pin against a track file")
	cmd.Flags().StringVar(&f.transcript, "transcript", "", "check a run directory's trajectory: its audit log, every body it hashes, transcript.json and transcript.html (implies --audit DIR/audit.jsonl)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print a machine-readable verdict")
	cmd.Flags().StringVar(&f.tsaChain, "tsa-chain", "", "check the RFC 3161 timestamp of the signature (in the Sigstore bundle beside it) with this timestamp authority's certificate chain (PEM)")
	f.witness.add(cmd)
	cmd.Flags().StringVar(&f.export, "export", "", "with --transcript: check that this export (sealrun export's trajectory.json, or an Inspect eval log holding the run, .json or .eval) is exactly what the run's transcript gives")
	cmd.Flags().StringVar(&f.witnessed, "witnessed", "", "with --witness: the run's witnessed proof (default: witnessed.json beside the attestation, as a publication carries it)")
	cmd.Flags().StringVar(&f.rebuild, "rebuild", "", "rebuild the binaries the build record hashes from this clone (or URL) of sealrun's repository, at its commit, and compare")
}

// verdict is what --json prints.
type verdict struct {
	Valid     bool              `json:"valid"`
	Reason    attest.Reason     `json:"reason,omitempty"`
	Detail    string            `json:"detail,omitempty"`
	KeyID     string            `json:"key_id,omitempty"`
	Checks    []string          `json:"checks"`
	Warnings  []string          `json:"warnings"`
	Track     *attest.TrackInfo `json:"track,omitempty"`
	Agent     *attest.Agent     `json:"agent,omitempty"`
	Task      *attest.TaskInfo  `json:"task,omitempty"`   // a task run's task
	Result    any               `json:"result,omitempty"` // in the predicate's shape (Predicate.ResultJSON)
	Seed      *int64            `json:"seed,omitempty"`
	Run       *attest.RunInfo   `json:"run,omitempty"`
	Statement string            `json:"statement_sha256,omitempty"`
	Build     *attest.Build     `json:"build,omitempty"`
	Ledger    *ledgerVerdict    `json:"ledger,omitempty"`
	// Transcript is what --transcript found.
	Transcript *transcriptVerdict `json:"transcript,omitempty"`
	// Rebuild is what --rebuild found.
	Rebuild *rebuildResult `json:"rebuild,omitempty"`
	// Timestamp is what --tsa-chain found.
	Timestamp *timestampVerdict `json:"timestamp,omitempty"`
	// Export is what --export found.
	Export *exportVerdict `json:"export,omitempty"`
	// Witnessed is what --witness found.
	Witnessed *witnessedVerdict `json:"witnessed,omitempty"`
	pred      *attest.Predicate // the verified predicate, for the text
}

// transcriptVerdict is what --transcript found of a run's trajectory.
type transcriptVerdict struct {
	Dir            string            `json:"dir"`
	Exchanges      int               `json:"exchanges"`
	Calls          int               `json:"calls"`
	Bodies         transcript.Counts `json:"bodies"`
	TranscriptJSON bool              `json:"transcript_json"` // present and exactly what the log and bodies give
	TranscriptHTML bool              `json:"transcript_html"`
	Notes          []string          `json:"notes"`
	Problems       []string          `json:"problems"`
}

// ledgerVerdict is where the run stands in its host's run ledger.
type ledgerVerdict struct {
	Origin   string `json:"origin"`
	Index    uint64 `json:"index"`
	HeadSize uint64 `json:"head_size"`
	HeadRoot string `json:"head_root"`
}

// verifyAttestation runs attest.VerifyFile with the flag group's files. Errors that are not
// verdicts come back as exit-2 errors.
func verifyAttestation(path string, f *verifyFlags) (*attest.Verified, error) {
	if f.key == "" {
		return nil, usage(errors.New("give the signer's public key with --key (for example sealrun.pub)"))
	}
	v, err := attest.VerifyFile(path, f.files())
	var vf *attest.VerificationFailure
	if err != nil && !errors.As(err, &vf) {
		return nil, ioError(err)
	}
	return v, err
}

// files are the flag group's files.
func (f *verifyFlags) files() attest.Files {
	a := f.audit
	if a == "" && f.transcript != "" {
		a = filepath.Join(f.transcript, "audit.jsonl")
	}
	return attest.Files{Key: f.key, Bundle: f.bundle, Report: f.report, Audit: a, Track: f.track}
}

// checkTranscript checks the run directory of --transcript against the verified predicate.
func checkTranscript(dir string, p *attest.Predicate) (*transcriptVerdict, error) {
	rep, err := transcript.Check(dir, p)
	if err != nil {
		return nil, err
	}
	v := &transcriptVerdict{Dir: dir, Exchanges: rep.Exchanges, Calls: rep.Calls, Bodies: rep.Bodies, TranscriptJSON: rep.Transcript,
		TranscriptHTML: rep.Page, Notes: append([]string{}, rep.Notes...), Problems: append([]string{}, rep.Problems...)}
	return v, nil
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "verify ATTESTATION --key PUB.pem [--bundle F] [--report F] [--audit F] [--track F] [--transcript RUNDIR] [--json]",
		Short: "Verify a signed result attestation offline",
		Long: `Verify checks a result.att.json offline: the DSSE envelope, exactly one signature valid for --key,
the payload type, the in-toto statement and predicate types, then — reading only the signed
payload — the subjects against --bundle/--report, the audit log against --audit, the predicate's
internal consistency, and the track id and pins against --track (reporting legacy or withdrawn
tracks). With --transcript RUNDIR (a run directory: as the daemon keeps it, gathered or
published), it checks the run's trajectory too: the audit log against the attestation, every
body that log hashes (each model request and response, each call's output) against its SHA-256
— present and intact, withheld by the operator, missing, or altered — and that transcript.json
and transcript.html are exactly what they give; a body missing or altered makes it not valid
(docs/TRANSCRIPT.md). attest/VERIFY.md shows how to do the same without sealrun.

With --tsa-chain PEM (the certificate chain a timestamp authority publishes) it checks the RFC
3161 timestamp of the attestation's signature, carried in the Sigstore bundle beside it
(result.sigstore.json; or give the bundle itself): signed by that authority for time-stamping,
over this signature. It prints the time the attestation existed by; none that checks makes it not
valid.

With --witness KEY (each a witness's public key, as you obtained it from the witness; repeatable)
and --witnesses N (default: all given) it checks the run's witnessed proof (witnessed.json beside
the attestation, as a publication carries it, or --witnessed FILE): a head of the host's ledger
signed with --key and cosigned by N of those witnesses, under which this run was queued (the
entry the attestation carries) and ended naming this very attestation. A proof that is missing,
of another run or result, or short of cosignatures makes it not valid (reason "witnessed").

With --export FILE and --transcript RUNDIR it recomputes an export of the run (sealrun export's
trajectory.json, or the run's sample in an Inspect eval log) from the run's transcript.json, which --transcript has just checked, as the
sealrun version the file names made it, and compares byte for byte: a file edited after, or made
from another transcript, makes it not valid (reason "export").

With --rebuild SRC (a clone or the URL of sealrun's repository) it rebuilds what ran: it checks
out the build record's commit in a directory of its own, runs make build with the recorded version
(the Go toolchain must be the recorded one; it says which to install otherwise, and warns when the
C compiler or C library differ from build.toolchain), and compares the SHA-256 of sealrund and of
each helper the record hashes (runner, runner-exec, sealrun-netns-hook, sealrun-hook-relay). A
binary that differs makes it not valid.

Exit status: 0 valid, 1 not valid (the reason is printed), 2 usage or I/O error.`,
		Example: `  sealrun verify result.att.json --key sealrun.pub
  sealrun verify result.att.json --key sealrun.pub --bundle bundle.tar.gz --audit audit.jsonl --track tracks/ari-v1.toml --json
  sealrun verify runs/r-20261126-101500-a1b2c3/result.att.json --key sealrun.pub --transcript runs/r-20261126-101500-a1b2c3
  sealrun verify runs/r-20261126-101500-a1b2c3/result.att.json --key sealrun.pub --witness witness.example.org+1a2b3c4d+AQ...
  sealrun verify result.att.json --key sealrun.pub --rebuild https://github.com/sealrun/sealrun`,
		Args: exactArgs(1, "one attestation file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := f.witness.verifiers()
			if err != nil {
				return err
			}
			if f.export != "" && f.transcript == "" {
				return usage(errors.New("--export is recomputed from the run's checked transcript: give --transcript RUNDIR too"))
			}
			if f.witnessed != "" && ws == nil {
				return usage(errors.New("--witnessed is checked against witnesses: give their keys with --witness"))
			}
			got, err := verifyAttestation(args[0], &f)
			var vf *attest.VerificationFailure
			if err != nil && !errors.As(err, &vf) {
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				return ioError(err)
			}
			out := verdict{Valid: err == nil, Checks: []string{}, Warnings: []string{}}
			if vf != nil {
				out.Reason, out.Detail = vf.Reason, vf.Detail
			} else {
				p := got.Statement.Predicate
				sum := sha256.Sum256(got.Payload)
				out.KeyID, out.Checks, out.Track, out.Agent, out.Result, out.Seed, out.Run = got.KeyID, got.Checks, &p.Track, &p.Agent, p.ResultJSON(), &p.Seed, &p.Run
				out.Task, out.pred = p.Task, p
				out.Statement = hex.EncodeToString(sum[:])
				out.Warnings = append(out.Warnings, got.Warnings...)
				out.Build = p.Build
				if got.Ledger != nil {
					out.Ledger = &ledgerVerdict{Origin: got.Ledger.Origin, Index: p.Ledger.Index, HeadSize: got.Ledger.Size, HeadRoot: hex.EncodeToString(got.Ledger.Root[:])}
				}
				if f.transcript != "" {
					if out.Transcript, err = checkTranscript(f.transcript, p); err != nil {
						return ioError(err)
					}
					out.Checks = append(out.Checks, "transcript")
					if len(out.Transcript.Problems) > 0 {
						out.Valid, out.Reason = false, attest.ReasonTranscript
						out.Detail = fmt.Sprintf("the trajectory in %s does not check: %s", f.transcript, strings.Join(out.Transcript.Problems, "; "))
						vf = &attest.VerificationFailure{Reason: attest.ReasonTranscript, Detail: out.Detail}
					}
				}
				if f.tsaChain != "" && vf == nil {
					ts, err := checkTimestamps(args[0], f.tsaChain)
					if errors.As(err, &vf) {
						out.Valid, out.Reason, out.Detail = false, vf.Reason, vf.Detail
					} else if err != nil {
						return err
					} else {
						out.Timestamp = ts
						out.Checks = append(out.Checks, "timestamp")
					}
				}
				if f.export != "" && vf == nil {
					ex, err := checkExport(f.export, f.transcript, p.Run.ID)
					if errors.As(err, &vf) {
						out.Valid, out.Reason, out.Detail = false, vf.Reason, vf.Detail
					} else if err != nil {
						return err
					} else {
						out.Export = ex
						out.Checks = append(out.Checks, "export")
					}
				}
				if ws != nil && vf == nil {
					wv, err := checkWitnessed(args[0], &f, ws, got)
					if errors.As(err, &vf) {
						out.Valid, out.Reason, out.Detail = false, vf.Reason, vf.Detail
					} else if err != nil {
						return err
					} else {
						out.Witnessed = wv
						out.Checks = append(out.Checks, "witnessed")
					}
				}
				if f.rebuild != "" && vf == nil {
					if out.Rebuild, err = rebuild(f.rebuild, p.Build, cmd.ErrOrStderr()); err != nil {
						return err
					}
					out.Checks = append(out.Checks, "rebuild")
					if !out.Rebuild.Same {
						out.Valid, out.Reason = false, "rebuild"
						out.Detail = fmt.Sprintf("commit %s built from %s does not give the binaries the attestation records", out.Rebuild.Commit, f.rebuild)
						vf = &attest.VerificationFailure{Reason: "rebuild", Detail: out.Detail}
					}
				}
			}
			w := cmd.OutOrStdout()
			if f.json {
				if err := printJSON(w, out); err != nil {
					return ioError(err)
				}
			} else {
				writeVerdict(w, args[0], out)
			}
			if vf != nil {
				return &exitError{code: exitInvalid, err: vf, quiet: true}
			}
			return nil
		},
	}
	f.addFlags(cmd)
	return cmd
}

func writeVerdict(w io.Writer, path string, v verdict) {
	if !v.Valid {
		fmt.Fprintf(w, "%s: NOT VALID (%s)\n  %s\n", path, v.Reason, v.Detail)
		if v.Rebuild != nil {
			writeRebuild(w, v.Rebuild)
		}
		return
	}
	r := v.pred.Result
	fmt.Fprintf(w, "%s: VALID\n", path)
	fmt.Fprintf(w, "  key        %s\n", v.KeyID)
	fmt.Fprintf(w, "  track      %s %s (%s), id %s\n", v.Track.Name, v.Track.Version, v.Track.Status, v.Track.ID)
	effort := v.Agent.ReasoningEffort
	if effort == "" {
		effort = "no effort setting"
	}
	fmt.Fprintf(w, "  agent      %s (%s), seed %d\n", v.Agent.Model, effort, *v.Seed)
	if v.Run != nil {
		rerun := ""
		if v.Run.RerunOf != "" {
			rerun = ", rerun of " + v.Run.RerunOf
		}
		fmt.Fprintf(w, "  run        %s%s\n", v.Run.ID, rerun)
	}
	if v.Task != nil {
		fmt.Fprintf(w, "  task       %s (%s), sha256 %s\n", v.Task.Name, v.Task.Kind, v.Task.SHA256)
		fmt.Fprintf(w, "  result     %s: %s", r.Status, v.pred.MetricText())
	} else {
		fmt.Fprintf(w, "  result     %s: %d/%d passed = %.2f%%", r.Status, r.Passed, r.Questions, r.Score)
	}
	if r.Reason != "" {
		fmt.Fprintf(w, " (%s)", r.Reason)
	}
	fmt.Fprintln(w)
	if b := v.Build; b != nil {
		kind := "release build"
		if b.TestSeams {
			kind = "TEST BUILD (test seams compiled in)"
		}
		tree := "clean tree"
		if b.Modified {
			tree = "modified tree"
		}
		fmt.Fprintf(w, "  build      sealrund %s, commit %s (%s), %s, sha256 %s, %s\n", b.Version, b.Commit, tree, b.GoVersion, b.DaemonSHA256, kind)
		if b.Toolchain != "" || len(b.Helpers) > 0 {
			fmt.Fprintf(w, "             helpers built with %s: %d hashed\n", orUnknown(b.Toolchain), len(b.Helpers))
		}
	} else {
		fmt.Fprintf(w, "  build      not recorded (an attestation from before sealrun recorded its build)\n")
	}
	if l := v.Ledger; l != nil {
		fmt.Fprintf(w, "  ledger     entry %d of %s, included under the signed head of size %d (root %s)\n", l.Index, l.Origin, l.HeadSize, l.HeadRoot)
	} else {
		fmt.Fprintf(w, "  ledger     none (an attestation from before the run ledger)\n")
	}
	if v.Rebuild != nil {
		writeRebuild(w, v.Rebuild)
	}
	if ex := v.Export; ex != nil {
		fmt.Fprintf(w, "  export     %s is exactly the %s export of this run's transcript (transcript.json sha256 %s, sealrun %s)\n", ex.File, ex.Format, ex.TranscriptSHA256, ex.Version)
	}
	if wv := v.Witnessed; wv != nil {
		notBy := ""
		if len(wv.NotBy) > 0 {
			notBy = "; not by " + strings.Join(wv.NotBy, ", ")
		}
		fmt.Fprintf(w, "  witnessed  queued (entry %d) and ended with this attestation (entry %d) under the head of size %d of %s, cosigned by %s%s\n", wv.Queued, wv.Ended, wv.HeadSize, wv.Origin, strings.Join(wv.By, ", "), notBy)
	}
	if ts := v.Timestamp; ts != nil {
		fmt.Fprintf(w, "  timestamp  existed before %s (%s, RFC 3161, in %s)\n", ts.Time.Format(time.RFC3339), ts.TSA, ts.Bundle)
	}
	fmt.Fprintf(w, "  checked    %s\n", strings.Join(v.Checks, ", "))
	for _, warn := range v.Warnings {
		fmt.Fprintf(w, "  warning    %s\n", warn)
	}
	if t := v.Transcript; t != nil {
		b := t.Bodies
		fmt.Fprintf(w, "  transcript %d model exchanges, %d calls; bodies %d intact, %d withheld, %d missing, %d altered", t.Exchanges, t.Calls, b.Intact, b.Withheld, b.Missing, b.Altered)
		switch {
		case t.TranscriptJSON && t.TranscriptHTML:
			fmt.Fprintf(w, "; transcript.json and transcript.html are what they give")
		case t.TranscriptJSON:
			fmt.Fprintf(w, "; transcript.json is what they give")
		}
		fmt.Fprintln(w)
		for _, n := range t.Notes {
			fmt.Fprintf(w, "             %s\n", n)
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "an unrecorded C toolchain"
	}
	return s
}
