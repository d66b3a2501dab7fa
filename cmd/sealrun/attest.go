package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/verify"
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
prints the key, the subjects, the result and the model's usage in words, and every field of the
predicate, one per line by its path (attest/PREDICATE.md), in the signed payload's order. The
optional file checks of verify apply too.`,
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
			if !r.Valid {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: NOT VALID (%s)\n  %s\n", args[0], r.Reason, r.Detail)
				return &exitError{code: exitInvalid, err: fmt.Errorf("%s: not valid (%s)", r.Path, r.Reason), quiet: true}
			}
			writePredicate(cmd.OutOrStdout(), r.Run.Verified)
			return nil
		},
	}
	f.addFlags(cmd)
	cmd.Flags().Lookup("json").Hidden = true
	return cmd
}

// writePredicate prints a verified attestation for a reader: the key, the subjects and the
// result in words, then every field of the predicate, one per line, by its path as
// attest/PREDICATE.md names it (predicateFields).
func writePredicate(out io.Writer, v *attest.Verified) {
	p := v.Statement.Predicate
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("verified", "signature by key %s", v.KeyID)
	for _, s := range v.Statement.Subject {
		row("subject", "%s sha256:%s", s.Name, s.Digest["sha256"])
	}
	r := p.Result
	if p.Task != nil {
		row("result", "%s: %s", r.Status, p.MetricText())
	} else {
		row("result", "%s: %d/%d passed = %.2f%%", r.Status, r.Passed, r.Questions, r.Score)
	}
	if u := p.Usage; u != nil {
		s := fmt.Sprintf("%d model requests, %d tokens in (%d cached), %d out", u.Requests, u.Tokens.Input, u.Tokens.CachedInput, u.Tokens.Output)
		if c := u.Cost; c != nil {
			s += fmt.Sprintf(", cost %s %s at the prices of %s", policy.FormatMoney(c.Amount), c.Price.Currency, c.Price.Taken)
		}
		row("usage", "%s", s)
	}
	for _, warn := range v.Warnings {
		row("warning", "%s", warn)
	}
	row("", "")
	for _, f := range predicateFields(v.Payload) {
		row(f[0], "%s", f[1])
	}
	w.Flush()
}

// predicateFields are every field of the statement's predicate, in the signed payload's order
// (RFC 8785: keys sorted), as
// [path, value]: objects by key ("budget.wall"), lists of objects by index
// ("submissions.history[0].digest"), lists of values joined; strings as they are, "" as "".
func predicateFields(statement []byte) [][2]string {
	var doc struct{ Predicate json.RawMessage }
	if json.Unmarshal(statement, &doc) != nil {
		return nil
	}
	var out [][2]string
	var walk func(path string, raw json.RawMessage)
	walk = func(path string, raw json.RawMessage) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				k, _ := dec.Token()
				var v json.RawMessage
				dec.Decode(&v)
				key := fmt.Sprint(k)
				if path != "" {
					key = path + "." + key
				}
				walk(key, v)
			}
		case json.Delim('['):
			var items []json.RawMessage
			for dec.More() {
				var v json.RawMessage
				dec.Decode(&v)
				items = append(items, v)
			}
			scalar := true
			for _, it := range items {
				if t := bytes.TrimSpace(it); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
					scalar = false
				}
			}
			if scalar {
				vals := make([]string, len(items))
				for i, it := range items {
					vals[i] = scalarText(it)
				}
				out = append(out, [2]string{path, "[" + strings.Join(vals, ", ") + "]"})
				return
			}
			for i, it := range items {
				walk(fmt.Sprintf("%s[%d]", path, i), it)
			}
		default:
			out = append(out, [2]string{path, scalarText(raw)})
		}
	}
	walk("", doc.Predicate)
	return out
}

// scalarText is a JSON value as a reader reads it: a string unquoted, but quoted (escapes
// shown) when empty or when it holds a line break or another control character; anything else
// as written.
func scalarText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" || strings.ContainsFunc(s, unicode.IsControl) {
			return strconv.Quote(s)
		}
		return s
	}
	return string(bytes.TrimSpace(raw))
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
	if err := fileio.WriteFile(out, env, 0o644); err != nil {
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
	if err := fileio.WriteFile(bundlePath, bundle, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", bundlePath, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: signed (%d bytes); %s: the same as a Sigstore bundle (v0.3, for cosign)\ncheck it with: sealrun verify %s --key <public key>\n", out, len(env), bundlePath, out)
	return nil
}
