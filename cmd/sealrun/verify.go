package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/verify"
)

// verifyFlags is the flag group of `sealrun verify`.
type verifyFlags struct {
	key, bundle, report, audit, track, transcript, rebuild, tsaChain, witnessed, export string
	json                                                                                bool
	allow                                                                               []string
	witness                                                                             witnessFlags
	tpm                                                                                 tpmFlags
}

// tpmFlags are a reader's TPM flags: the host's enrollment and its maker's CAs.
type tpmFlags struct {
	enrollment       string
	roots, inter     []string
	allowUncheckedEK bool
}

func (f *tpmFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.enrollment, "tpm", "", "check each run's TPM quote (result.tpm.json beside its attestation) against the host's TPM enrollment (enrollment.json, as the operator publishes it): signed in that TPM, quoted over this statement, sealrund measured as recorded")
	cmd.Flags().StringArrayVar(&f.roots, "ek-ca", nil, "with --tpm: a root CA of the TPM's maker (PEM, from the maker) the EK certificate must chain to (repeatable)")
	cmd.Flags().StringArrayVar(&f.inter, "ek-intermediate", nil, "with --tpm: an intermediate CA certificate (PEM) between the maker's root and the EK certificate (repeatable)")
	cmd.Flags().BoolVar(&f.allowUncheckedEK, "allow-unchecked-ek", false, "with --tpm and no --ek-ca: take the enrollment with its EK certificate unchecked (the verdict says what that leaves open)")
}

func (f *tpmFlags) options() verify.TPMOptions {
	return verify.TPMOptions{Enrollment: f.enrollment, EKRoots: f.roots, EKIntermediates: f.inter, AllowUncheckedEK: f.allowUncheckedEK}
}

// check refuses the TPM flags without --tpm.
func (f *tpmFlags) check() error {
	if f.enrollment == "" && (len(f.roots) > 0 || len(f.inter) > 0 || f.allowUncheckedEK) {
		return usage(errors.New("--ek-ca, --ek-intermediate and --allow-unchecked-ek go with --tpm ENROLLMENT: the host's TPM enrollment"))
	}
	return nil
}

func (f *verifyFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.key, "key", "", "the signer's public key (PEM), for example sealrun.pub")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "check the graded bundle file against the attestation")
	cmd.Flags().StringVar(&f.report, "report", "", "check the result report file against the attestation")
	cmd.Flags().StringVar(&f.audit, "audit", "", "check the audit log (audit.jsonl) head and entry count")
	cmd.Flags().StringVar(&f.track, "track", "", "check the track id and every pin against a track file")
	cmd.Flags().StringVar(&f.transcript, "transcript", "", "check a run directory's trajectory: its audit log, every body it hashes, transcript.json and transcript.html (implies --audit DIR/audit.jsonl)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print the result as JSON (schema "+verify.Schema+", docs/VERIFY-JSON.md): every check, its outcome, each problem's file and reason")
	cmd.Flags().StringVar(&f.tsaChain, "tsa-chain", "", "check the RFC 3161 timestamp of the signature (in the Sigstore bundle beside it) with this timestamp authority's certificate chain (PEM)")
	f.witness.add(cmd)
	cmd.Flags().StringVar(&f.export, "export", "", "with --transcript: check that this export (sealrun export's trajectory.json, or an Inspect eval log holding the run, .json or .eval) is exactly what the run's transcript gives")
	cmd.Flags().StringVar(&f.witnessed, "witnessed", "", "with --witness: the run's witnessed proof (default: witnessed.json beside the attestation, as a publication carries it)")
	cmd.Flags().StringArrayVar(&f.allow, "allow-unchecked", nil, "with --transcript: a file of the run directory (or pattern) that may stay unchecked, e.g. transcript.json of another format; repeatable. The verdict lists them")
	cmd.Flags().StringVar(&f.rebuild, "rebuild", "", "rebuild the binaries the build record hashes from this clone (or URL) of sealrun's repository, at its commit, and compare")
	f.tpm.add(cmd)
}

// options turns the flags into the reader's options.
func (f *verifyFlags) options(ws []*witness.Verifier, progress io.Writer) verify.RunOptions {
	return verify.RunOptions{Key: f.key, Bundle: f.bundle, Report: f.report, Audit: f.audit, Track: f.track, Transcript: f.transcript,
		AllowUnchecked: f.allow, Export: f.export, TSAChain: f.tsaChain, Witnesses: ws, Quorum: f.witness.quorum, Witnessed: f.witnessed,
		Rebuild: f.rebuild, Progress: progress, TPM: f.tpm.options()}
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

With --tpm ENROLLMENT (the host's TPM enrollment, sealrun tpm enroll's enrollment.json, as the
operator publishes it) and --ek-ca CA.pem (the TPM maker's CA, from the maker; or
--allow-unchecked-ek) it checks the run's hardware root: the enrollment (its signing key fixed to
a TPM, certified by its attestation key, its EK certificate chained to the maker's CA), that the
attestation was signed with that key, and the TPM's quote beside it (result.tpm.json): by that
attestation key, over this statement's SHA-256, of the PCRs the statement names, with sealrund's
event log of that boot replaying to the quoted PCR and the sealrund measured last being the build
the attestation records (with --rebuild, the build its source gives). The verdict says what may
then be concluded, and what may not. A run without a quote, or whose quote does not check, makes
it not valid (reason "tpm"); without --tpm, a run with no quote says "no hardware root".

Exit status: 0 valid, 1 not valid (the reason is printed), 2 usage or I/O error.`,
		Example: `  sealrun verify result.att.json --key sealrun.pub
  sealrun verify result.att.json --key sealrun.pub --bundle bundle.tar.gz --audit audit.jsonl --track tracks/ari-v1.toml --json
  sealrun verify runs/r-20261126-101500-a1b2c3/result.att.json --key sealrun.pub --transcript runs/r-20261126-101500-a1b2c3
  sealrun verify runs/r-20261126-101500-a1b2c3/result.att.json --key sealrun.pub --witness witness.example.org+1a2b3c4d+AQ...
  sealrun verify result.att.json --key sealrun.pub --rebuild https://github.com/sealrun/sealrun
  sealrun verify runs/r-20261126-101500-a1b2c3/result.att.json --key sealrun.pub --tpm enrollment.json --ek-ca maker-root.pem`,
		Args: exactArgs(1, "one attestation file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := f.witness.verifiers()
			if err != nil {
				return err
			}
			if err := f.tpm.check(); err != nil {
				return err
			}
			r, err := verify.Run(args[0], f.options(ws, cmd.ErrOrStderr()))
			if err != nil {
				return verifyError(err)
			}
			return printResult(cmd.OutOrStdout(), r, f.json, writeVerdict)
		},
	}
	f.addFlags(cmd)
	return cmd
}

func writeVerdict(w io.Writer, res *verify.Result) {
	v, path := res.Run, res.Path
	if !res.Valid {
		fmt.Fprintf(w, "%s: NOT VALID (%s)\n  %s\n", path, res.Reason, res.Detail)
		if v.Rebuild != nil {
			verify.WriteRebuild(w, v.Rebuild)
		}
		return
	}
	r := v.Predicate.Result
	fmt.Fprintf(w, "%s: %s\n", path, res.Verdict)
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
		fmt.Fprintf(w, "  result     %s: %s", r.Status, v.Predicate.MetricText())
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
		verify.WriteRebuild(w, v.Rebuild)
	}
	if v.TPM != nil {
		verify.WriteTPM(w, v.TPM)
	} else if v.NoTPM != "" {
		fmt.Fprintf(w, "  tpm        none: %s\n", v.NoTPM)
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
	fmt.Fprintf(w, "  checked    %s\n", strings.Join(append(append([]string{}, v.AttestationChecks...), passed(res)...), ", "))
	if na := notApplicable(res); len(na) > 0 {
		fmt.Fprintf(w, "  not made   %s\n", strings.Join(na, "; "))
	}
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
		if t.ReportHTML {
			fmt.Fprintf(w, "; report.html is what the attestation and the log give")
		}
		fmt.Fprintln(w)
		for _, n := range t.Notes {
			fmt.Fprintf(w, "             %s\n", n)
		}
	}
	for _, u := range res.Unchecked {
		fmt.Fprintf(w, "  unchecked  %s: %s (allowed with --allow-unchecked)\n", u.File, u.Why)
	}
}

// passed names the checks beyond the attestation's own that passed.
func passed(r *verify.Result) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Outcome == verify.Passed && c.Name != "attestation" {
			out = append(out, c.Name)
		}
	}
	return out
}

// notApplicable says which checks were not made, and why.
func notApplicable(r *verify.Result) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Outcome == verify.NotApplicable {
			out = append(out, c.Name+": "+c.Why)
		}
	}
	return out
}

// printResult prints a reader's result, as data (--json, the schema verify.Schema) or for a
// person, and turns a verdict that is not valid into exit status 1.
func printResult(w io.Writer, r *verify.Result, asJSON bool, text func(io.Writer, *verify.Result)) error {
	if asJSON {
		if err := printJSON(w, r); err != nil {
			return ioError(err)
		}
	} else {
		text(w, r)
	}
	if !r.Valid {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%s: not valid (%s)", r.Path, r.Reason), quiet: true}
	}
	return nil
}

// verifyError turns what stopped a check into the CLI's exit status.
func verifyError(err error) error {
	var e *verify.Error
	if errors.As(err, &e) && e.Kind == verify.Usage {
		return usage(e.Err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return ioError(err)
}

func orUnknown(s string) string {
	if s == "" {
		return "an unrecorded C toolchain"
	}
	return s
}
