package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/tpm"
)

func newTPMCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tpm",
		Short: "The host's TPM: enroll its keys, verify an enrollment, challenge it (docs/TPM.md)",
		Long: `The host's TPM 2.0 as a hardware root (docs/TPM.md): keys made inside it that never leave it.
enroll (on the host) writes what the operator publishes; verify checks an enrollment offline;
challenge and answer bind its attestation key to its EK, which no offline check can.`,
		Args: exactArgs(0, "a subcommand: enroll, verify, challenge, answer"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: enroll, verify, challenge or answer"))
		},
	}
	cmd.AddCommand(newTPMEnrollCmd(), newTPMVerifyCmd(), newTPMChallengeCmd(), newTPMAnswerCmd())
	return cmd
}

// openKeys opens the TPM at device and makes sealrun's keys in it.
func openKeys(device string) (*tpm.Keys, func(), error) {
	dev, err := tpm.Open(device)
	if err != nil {
		return nil, nil, err
	}
	k, err := tpm.LoadKeys(dev)
	if err != nil {
		dev.Close()
		return nil, nil, fmt.Errorf("TPM %s: %w", device, err)
	}
	return k, func() { dev.Close() }, nil
}

func pemPublic(pub any) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func newTPMEnrollCmd() *cobra.Command {
	var device, out string
	cmd := &cobra.Command{
		Use:   "enroll --device PATH --out DIR",
		Short: "Make sealrun's keys in the host's TPM and write what to publish of them",
		Long: `Enroll makes (again: they are the TPM's primary keys, nothing is stored) the attestation key and
the signing key in the TPM at --device (/dev/tpmrm0; or a swtpm socket), certifies the signing key
with the attestation key, reads the TPM's EK certificates, and writes into DIR:

  enrollment.json      all of it, for readers (sealrun tpm verify)
  signing-key.pem      the host's public key: sealrun.toml's keys.public, and what readers verify with
  attestation-key.pem  the key that signs the TPM's own statements (quotes, the certification)
  ek-N.pem             the EK certificates, as the TPM's maker issued them

Existing files are never overwritten.`,
		Args: exactArgs(0, "no arguments (use --device and --out)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if device == "" || out == "" {
				return usage(errors.New("give the TPM with --device (/dev/tpmrm0) and the directory to write into with --out"))
			}
			k, closeKeys, err := openKeys(device)
			if err != nil {
				return err
			}
			defer closeKeys()
			e, err := k.Enroll()
			if err != nil {
				return err
			}
			if _, err := tpm.VerifyEnrollment(e, nil, nil); err != nil {
				return fmt.Errorf("the TPM's own enrollment does not verify: %w", err)
			}
			files := map[string][]byte{}
			files["enrollment.json"], _ = json.MarshalIndent(e, "", "  ")
			files["enrollment.json"] = append(files["enrollment.json"], '\n')
			if files["signing-key.pem"], err = pemPublic(k.SigningKey()); err != nil {
				return err
			}
			if files["attestation-key.pem"], err = pemPublic(k.AttestationKey()); err != nil {
				return err
			}
			for i, der := range e.EKCertificates {
				files[fmt.Sprintf("ek-%d.pem", i)] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			for name := range files {
				if _, err := os.Lstat(filepath.Join(out, name)); err == nil {
					return fmt.Errorf("%s exists; enroll writes into an empty directory and overwrites nothing", filepath.Join(out, name))
				}
			}
			for name, b := range files {
				if err := fileio.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "enrolled the TPM at %s into %s: %d EK certificate(s), the attestation key, the signing key certified by it\n", device, out, len(e.EKCertificates))
			fmt.Fprintf(w, "publish: %s (and the EK certificates' CA, from the TPM's maker)\n", filepath.Join(out, "enrollment.json"))
			fmt.Fprintf(w, "sealrun.toml: keys.signing = \"tpm:%s\", keys.public = %q\n", device, filepath.Join(out, "signing-key.pem"))
			fmt.Fprintf(w, "and, for each run quoted and sealrund measured: [tpm] enrollment = %q\n", filepath.Join(out, "enrollment.json"))
			return nil
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "the TPM: /dev/tpmrm0, or a software TPM's socket")
	cmd.Flags().StringVar(&out, "out", "", "the directory to write the enrollment into")
	return cmd
}

// readEnrollment reads an enrollment's JSON strictly.
func newTPMVerifyCmd() *cobra.Command {
	var cas, intermediates []string
	var uncheckedEK bool
	cmd := &cobra.Command{
		Use:   "verify ENROLLMENT (--ek-ca CA.pem... [--ek-intermediate CERT.pem]... | --allow-unchecked-ek)",
		Short: "Check a host's TPM enrollment offline",
		Long: `Verify checks an enrollment (sealrun tpm enroll): both keys are ECDSA P-256 keys fixed to a TPM
and made inside it, the attestation key restricted; the attestation key certified the signing
key; and, with --ek-ca (the TPM maker's CA, which you obtain from the maker, not from the
operator), an EK certificate chains to it. Without --ek-ca the EK certificate cannot be checked,
and the enrollment is not valid unless you accept that by name (--allow-unchecked-ek). It says
what the check shows, and what it does not.`,
		Args: exactArgs(1, "the enrollment.json"),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := tpm.ReadEnrollment(args[0])
			if err != nil {
				return err
			}
			roots, err := tpm.CertPool(cas)
			if err != nil {
				return err
			}
			inter, err := tpm.CertPool(intermediates)
			if err != nil {
				return err
			}
			if inter != nil && roots == nil {
				return usage(errors.New("--ek-intermediate goes with --ek-ca: give the maker's root CA"))
			}
			if roots == nil && !uncheckedEK {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: NOT VALID: its EK certificate cannot be checked without the TPM maker's CA: give --ek-ca (from the maker, not the operator), or accept it unchecked with --allow-unchecked-ek\n", args[0])
				return &exitError{code: exitInvalid, err: errors.New("EK certificate unchecked"), quiet: true}
			}
			got, err := tpm.VerifyEnrollment(e, roots, inter)
			w := cmd.OutOrStdout()
			if err != nil {
				fmt.Fprintf(w, "%s: NOT VALID: %v\n", args[0], err)
				return &exitError{code: exitInvalid, err: err, quiet: true}
			}
			der, _ := x509.MarshalPKIXPublicKey(got.SigningKey)
			sum := sha256.Sum256(der)
			id := hex.EncodeToString(sum[:])
			fmt.Fprintf(w, "%s: VALID\nsigning key %s (ECDSA P-256, in a TPM, certified by its attestation key)\n", args[0], id)
			if got.EK != nil {
				fmt.Fprintf(w, "EK certificate issued by %s (serial %s), chained to the CA given\n", got.EK.Issuer, got.EK.SerialNumber)
				fmt.Fprintln(w, "A reader may conclude: a TPM made the signing key and keeps it; a TPM whose maker certified its EK exists. Not: that the attestation key is in that TPM (sealrun tpm challenge asks it), or anything about what the host ran (its quotes say what it measured).")
			} else {
				fmt.Fprintln(w, "EK certificate not checked (no --ek-ca; accepted unchecked with --allow-unchecked-ek): give the TPM maker's CA.")
				fmt.Fprintln(w, "A reader may conclude: a TPM made the signing key and keeps it, if the attestation key is a TPM's. Not: whose TPM (give --ek-ca, and challenge it).")
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&cas, "ek-ca", nil, "a root CA of the TPM's maker (PEM), for the EK certificate (repeatable)")
	cmd.Flags().BoolVar(&uncheckedEK, "allow-unchecked-ek", false, "without --ek-ca: take the enrollment with its EK certificate unchecked (the verdict says so)")
	cmd.Flags().StringArrayVar(&intermediates, "ek-intermediate", nil, "an intermediate CA certificate (PEM) between the root and the EK certificate (repeatable)")
	return cmd
}

// challengeFile is what sealrun tpm challenge writes for the host, and what answer reads.
type challengeFile struct {
	Format    string         `json:"format"`
	Challenge *tpm.Challenge `json:"challenge"`
}

const challengeFormat = "sealrun-tpm-challenge/v1"

func newTPMChallengeCmd() *cobra.Command {
	var out, secretFile, answer string
	cmd := &cobra.Command{
		Use:   "challenge ENROLLMENT --out CHALLENGE.json --secret SECRET | challenge --secret SECRET --answer HEX",
		Short: "Ask a host's TPM to show its attestation key is beside its EK, and check its answer",
		Long: `Challenge makes a credential from the enrollment's RSA EK certificate and its attestation key,
that only the TPM holding both can open (TPM2_MakeCredential's computation; no TPM here). Send
CHALLENGE.json to the host's operator, who runs sealrun tpm answer and sends back the hex it
prints; keep SECRET (mode 0600) and check the answer with --answer.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if secretFile == "" {
				return usage(errors.New("give --secret: where the secret is written (with --out) or read (with --answer)"))
			}
			if answer != "" {
				secret, err := fileio.ReadLimited(secretFile, "challenge secret", 1024)
				if err != nil {
					return err
				}
				got, err := hex.DecodeString(strings.TrimSpace(answer))
				if err != nil {
					return usage(fmt.Errorf("--answer: not hex (%v): give what sealrun tpm answer printed", err))
				}
				if err := tpm.CheckAnswer(secret, got); err != nil {
					fmt.Fprintf(cmd.OutOrStdout(), "answer: NOT VALID: %v\n", err)
					return &exitError{code: exitInvalid, err: err, quiet: true}
				}
				fmt.Fprintln(cmd.OutOrStdout(), "answer: VALID: the attestation key is in the TPM of the EK certificate challenged")
				return nil
			}
			if len(args) != 1 || out == "" {
				return usage(errors.New("give the enrollment and --out for the challenge (or --answer to check one)"))
			}
			e, err := tpm.ReadEnrollment(args[0])
			if err != nil {
				return err
			}
			ek := e.RSAEK()
			if ek == nil {
				return fmt.Errorf("%s has no RSA EK certificate: the challenge is made for the TCG's RSA 2048 EK", args[0])
			}
			c, secret, err := tpm.MakeChallenge(ek, e.AttestationKey)
			if err != nil {
				return err
			}
			for _, p := range []string{out, secretFile} {
				if _, err := os.Lstat(p); err == nil {
					return fmt.Errorf("%s exists; a challenge is written to new files", p)
				}
			}
			b, _ := json.MarshalIndent(challengeFile{Format: challengeFormat, Challenge: c}, "", "  ")
			if err := fileio.WriteFile(secretFile, secret, 0o600); err != nil {
				return err
			}
			if err := fileio.WriteFile(out, append(b, '\n'), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "challenge for EK %s (serial %s) and its attestation key: %s; keep %s\n", ek.Issuer, ek.SerialNumber, out, secretFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "where to write the challenge for the host")
	cmd.Flags().StringVar(&secretFile, "secret", "", "where the challenge's secret is kept (written with --out, read with --answer)")
	cmd.Flags().StringVar(&answer, "answer", "", "the host's answer (hex, as sealrun tpm answer printed it)")
	return cmd
}

func newTPMAnswerCmd() *cobra.Command {
	var device string
	cmd := &cobra.Command{
		Use:   "answer CHALLENGE.json --device PATH",
		Short: "Open a challenge with the host's TPM and print the secret to send back",
		Args:  exactArgs(1, "the challenge file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if device == "" {
				return usage(errors.New("give the TPM with --device (/dev/tpmrm0)"))
			}
			b, err := fileio.ReadLimited(args[0], "challenge", 64<<10)
			if err != nil {
				return err
			}
			var c challengeFile
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil || c.Format != challengeFormat || c.Challenge == nil {
				return fmt.Errorf("%s is not a challenge (sealrun tpm challenge writes one): %v", args[0], err)
			}
			k, closeKeys, err := openKeys(device)
			if err != nil {
				return err
			}
			defer closeKeys()
			secret, err := k.Activate(c.Challenge)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), hex.EncodeToString(secret))
			return nil
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "the TPM: /dev/tpmrm0, or a software TPM's socket")
	return cmd
}
