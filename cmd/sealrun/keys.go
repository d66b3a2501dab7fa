package main

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/spf13/cobra"
)

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Create signing keys for attestations",
		Args:  exactArgs(0, "a subcommand: generate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: generate"))
		},
	}
	cmd.AddCommand(newKeysGenerateCmd())
	return cmd
}

// maxPassphraseBytes bounds a passphrase file.
const maxPassphraseBytes = 4096

// readPassphrase reads a passphrase file; one trailing newline is not part of the passphrase.
func readPassphrase(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	f, err := fileio.OpenRegular(path, "passphrase file")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxPassphraseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read passphrase file %s: %w", path, err)
	}
	if len(b) > maxPassphraseBytes {
		return nil, fmt.Errorf("passphrase file %s is over %d bytes; it should hold one passphrase", path, maxPassphraseBytes)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("passphrase file %s is empty; write the passphrase into it, or leave out --passphrase-file", path)
	}
	return b, nil
}

func newKeysGenerateCmd() *cobra.Command {
	var out, algo, passFile string
	cmd := &cobra.Command{
		Use:   "generate --out DIR [--algo ed25519|ecdsa-p256] [--passphrase-file F]",
		Short: "Create a key pair: DIR/sealrun.key (0600) and DIR/sealrun.pub",
		Long: `Generate writes a new signing key pair into DIR: sealrun.key (PKCS#8 PEM, mode 0600; encrypted
with scrypt and secretbox when --passphrase-file is given) and sealrun.pub (the public key to
publish next to results). Existing keys are never overwritten.`,
		Args: exactArgs(0, "no arguments (use --out DIR)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("give the directory for the keys with --out"))
			}
			if algo != attest.AlgoED25519 && algo != attest.AlgoECDSAP256 {
				return usage(fmt.Errorf("--algo %q: use %s or %s", algo, attest.AlgoED25519, attest.AlgoECDSAP256))
			}
			pass, err := readPassphrase(passFile)
			if err != nil {
				return err
			}
			if st, err := os.Stat(out); err == nil && !st.IsDir() {
				return fmt.Errorf("--out %s is a file; give a directory", out)
			}
			priv, pub, id, err := attest.GenerateKeys(out, algo, pass)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "private key  %s (keep it secret; mode 0600", priv)
			if len(pass) > 0 {
				fmt.Fprint(w, ", encrypted")
			}
			fmt.Fprintf(w, ")\npublic key   %s (publish it with your results)\nkey id       %s\nalgorithm    %s\n", pub, id, algo)
			if line, err := reviewerLine(pub); err == nil {
				fmt.Fprintf(w, "as reviewer  %s (a track's [amendments] reviewers entry)\n", line)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write sealrun.key and sealrun.pub into (created if missing)")
	cmd.Flags().StringVar(&algo, "algo", attest.AlgoED25519, "key algorithm: ed25519 or ecdsa-p256")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "encrypt the private key with the passphrase in this file")
	return cmd
}

// reviewerLine is how a track names the public key in the PEM file pub as a reviewer
// ([amendments] reviewers): the base64 of its PKIX DER, on one line.
func reviewerLine(pub string) (string, error) {
	_, k, err := attest.LoadVerifier(pub)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(der), nil
}
