package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/renameio/v2/maybe"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/spf13/cobra"
)

func newAttestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "attest",
		Short: "Inspect and sign result attestations",
		Args:  exactArgs(0, "a subcommand: inspect or sign"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: inspect or sign"))
		},
	}
	cmd.AddCommand(newAttestInspectCmd(), newAttestSignCmd())
	return cmd
}

func newAttestInspectCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use:   "inspect ATTESTATION --key PUB.pem",
		Short: "Verify an attestation, then print its predicate readably",
		Long: `Inspect verifies the attestation exactly as verify does (nothing unverified is ever shown), then
prints every field of the predicate for people. The optional file checks of verify apply too.`,
		Args: exactArgs(1, "one attestation file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			got, err := verifyAttestation(args[0], &f)
			if err != nil {
				var vf *attest.VerificationFailure
				if errors.As(err, &vf) {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: NOT VALID (%s)\n  %s\n", args[0], vf.Reason, vf.Detail)
					return &exitError{code: exitInvalid, err: err, quiet: true}
				}
				return err
			}
			writePredicate(cmd.OutOrStdout(), got)
			return nil
		},
	}
	f.addFlags(cmd)
	cmd.Flags().Lookup("json").Hidden = true
	return cmd
}

// writePredicate prints a verified attestation for a reader. It is long because it is one row per
// field of the predicate, in attest/PREDICATE.md's order.
func writePredicate(out io.Writer, v *attest.Verified) {
	p := v.Statement.Predicate
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("verified", "signature by key %s", v.KeyID)
	for _, s := range v.Statement.Subject {
		row("subject", "%s sha256:%s", s.Name, s.Digest["sha256"])
	}
	row("track", "%s %s (%s), id %s", p.Track.Name, p.Track.Version, p.Track.Status, p.Track.ID)
	if p.Task != nil {
		row("task", "%s (%s), sha256 %s, raw data sha256 %s", p.Task.Name, p.Task.Kind, p.Task.SHA256, p.Task.DataSHA256)
		dir := "higher"
		if p.Task.LowerIsBetter {
			dir = "lower"
		}
		row("metric", "%s, %s is better; SOTA %g, optimum %g", p.Task.Metric, dir, p.Task.SOTA, p.Task.Optimal)
	} else {
		row("exam", "%d questions, sha256 %s", p.Exam.Questions, p.Exam.SHA256)
	}
	row("controller image", "%s", p.Images.Controller)
	row("runner image", "%s", p.Images.Runner)
	row("grader image", "%s", p.Images.Grader)
	if p.Task == nil {
		row("kit", "sha256 %s", p.Kit.SHA256)
	}
	row("scaffold", "%s %s, config sha256 %s", p.Scaffold.Name, p.Scaffold.Version, p.Scaffold.ConfigSHA256)
	row("agent", "%s, reasoning effort %q, seed %d", p.Agent.Model, p.Agent.ReasoningEffort, p.Seed)
	row("budget", "wall %s, call limit %s, reserve %s, grading %s, artifact %d bytes", p.Budget.Wall, p.Budget.CallLimit, p.Budget.Reserve, p.Budget.Grading, p.Budget.MaxGzipBytes)
	row("host", "GPU %q driver %q, %s %s, kernel %s, sealrun %s (%s)", p.Host.GPUModel, p.Host.GPUDriver, p.Host.Runtime, p.Host.RuntimeVersion, p.Host.Kernel, p.Host.SealrunVersion, p.Host.SealrunCommit)
	if len(p.Host.Runtimes) > 0 {
		var rs []string
		for _, role := range []string{"controller", "runner", "grader"} {
			if v := p.Host.Runtimes[role]; v != "" {
				rs = append(rs, role+": "+v)
			}
		}
		row("runtimes", "%s", strings.Join(rs, "; "))
	}
	for _, c := range p.AirGap.Containers {
		row("air gap "+c.Role, "links [%s] addresses [%s] routes [%s] egress blocked %v", strings.Join(c.Links, " "), strings.Join(c.Addresses, " "), strings.Join(c.Routes, "; "), c.EgressBlocked)
	}
	row("timeline", "queued %s, started %s, deadline %s, finished %s", ts(p.Timeline.Queued), ts(p.Timeline.Started), ts(p.Timeline.Deadline), ts(p.Timeline.Finished))
	row("submissions", "%d, chain head %s", len(p.Submissions.History), p.Submissions.Head)
	for i, s := range p.Submissions.History {
		mark := ""
		if s.Promoted {
			mark = ", promoted"
		}
		row(fmt.Sprintf("  #%d", i+1), "%s %s, %d bytes, validation %.2f%%%s", ts(s.Time), s.Digest, s.Size, s.ValidationScore, mark)
	}
	row("audit log", "%d entries, chain head %s", p.Audit.Entries, p.Audit.Head)
	r := p.Result
	if p.Task != nil {
		row("result", "%s: %s", r.Status, p.MetricText())
	} else {
		row("result", "%s: %d/%d passed = %.2f%%", r.Status, r.Passed, r.Questions, r.Score)
	}
	if r.Reason != "" {
		row("reason", "%s", r.Reason)
	}
	if p.Task == nil {
		row("pass vector", "sha256 %s", r.PassVectorSHA256)
		if r.BitsPerByte != nil {
			row("bits per byte", "%.4f", *r.BitsPerByte)
		} else {
			row("bits per byte", "not measured")
		}
	}
	for _, warn := range v.Warnings {
		row("warning", "%s", warn)
	}
	w.Flush()
}

// maxPredicateBytes bounds a predicate file given to attest sign.
const maxPredicateBytes = attest.MaxEnvelopeBytes / 2

func newAttestSignCmd() *cobra.Command {
	var predPath, keyRef, passFile, out string
	var subjects []string
	cmd := &cobra.Command{
		Use:   "sign --predicate PRED.json --subject NAME=sha256:HEX [--subject ...] --key PRIV.pem --out ATT",
		Short: "Wrap a predicate in a statement and sign it (fixtures, countersigning)",
		Long: `Sign wraps a sealed-run predicate (attest/PREDICATE.md) in an in-toto statement with the given
subjects and signs it in a DSSE envelope — the same library code the daemon uses for graded runs.
The predicate is checked first: sign refuses anything verify would reject. --key is a PEM private
key file or a KMS key URI (scheme://...) resolved through sigstore's KMS interface.`,
		Example: `  sealrun attest sign --predicate pred.json --subject report.json=sha256:<hex> \
      --subject bundle.tar.gz=sha256:<hex> --key keys/sealrun.key --out result.att.json`,
		Args: exactArgs(0, "no arguments (use the flags)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case predPath == "":
				return usage(errors.New("give the predicate JSON with --predicate"))
			case keyRef == "":
				return usage(errors.New("give the private key with --key"))
			case out == "":
				return usage(errors.New("give the output file with --out"))
			case len(subjects) == 0:
				return usage(errors.New("give at least the report subject: --subject report.json=sha256:<hex>"))
			}
			subs, err := parseSubjects(subjects)
			if err != nil {
				return usage(err)
			}
			pred, err := readPredicate(predPath)
			if err != nil {
				return err
			}
			pass, err := readPassphrase(passFile)
			if err != nil {
				return ioError(err)
			}
			return signPredicate(cmd, keyRef, pass, attest.NewStatement(pred, subs...), out)
		},
	}
	cmd.Flags().StringVar(&predPath, "predicate", "", "the predicate JSON (attest/PREDICATE.md)")
	cmd.Flags().StringArrayVar(&subjects, "subject", nil, "NAME=sha256:HEX; repeat for each subject (report.json required, bundle.tar.gz when graded)")
	cmd.Flags().StringVar(&keyRef, "key", "", "private key PEM file, or KMS key URI")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "passphrase of an encrypted private key")
	cmd.Flags().StringVar(&out, "out", "", "the attestation file to write (atomically); a Sigstore bundle NAME.sigstore.json is written beside it")
	return cmd
}

// parseSubjects reads --subject NAME=sha256:HEX flags.
func parseSubjects(subjects []string) ([]attest.Subject, error) {
	var subs []attest.Subject
	for _, s := range subjects {
		name, digest, ok := strings.Cut(s, "=")
		hexd, isSHA := strings.CutPrefix(digest, "sha256:")
		if !ok || name == "" || !isSHA || !sha256Hex.MatchString(hexd) {
			return nil, fmt.Errorf("--subject %q: expected NAME=sha256:<64 lowercase hex>", s)
		}
		subs = append(subs, attest.NewSubject(name, hexd))
	}
	return subs, nil
}

// readPredicate reads a sealed-run predicate file, refusing unknown fields and trailing data.
func readPredicate(path string) (*attest.Predicate, error) {
	data, err := fileio.ReadLimited(path, "predicate", maxPredicateBytes)
	if err != nil {
		return nil, err
	}
	if len(data) > maxPredicateBytes {
		return nil, fmt.Errorf("predicate %s is over %d bytes", path, maxPredicateBytes)
	}
	var pred attest.Predicate
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pred); err != nil {
		return nil, fmt.Errorf("predicate %s is not a sealed-run predicate: %v (fields: attest/PREDICATE.md)", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("predicate %s has data after the JSON object", path)
	}
	return &pred, nil
}

// signPredicate signs the statement with the key (a PEM file or a KMS URI) and writes the
// envelope to out and the same as a Sigstore bundle beside it.
func signPredicate(cmd *cobra.Command, keyRef string, pass []byte, st *attest.Statement, out string) error {
	signer, err := attest.LoadSigner(cmd.Context(), keyRef, pass)
	if err != nil {
		return ioError(err)
	}
	env, err := attest.Sign(cmd.Context(), st, signer)
	if err != nil {
		return err
	}
	if err := maybe.WriteFile(out, env, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	pub, err := signer.PublicKey()
	if err != nil {
		return err
	}
	hint, err := attest.KeyID(pub)
	if err != nil {
		return err
	}
	bundle, err := attest.SigstoreBundle(env, hint)
	if err != nil {
		return err
	}
	bundlePath := attest.BundlePath(out)
	if err := maybe.WriteFile(bundlePath, bundle, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", bundlePath, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: signed (%d bytes); %s: the same as a Sigstore bundle (v0.3, for cosign)\ncheck it with: sealrun verify %s --key <public key>\n", out, len(env), bundlePath, out)
	return nil
}
