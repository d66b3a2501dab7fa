package main

import (
	"errors"
	"fmt"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/publish"
	"github.com/spf13/cobra"
)

func newPublishCmd() *cobra.Command {
	var keys, tracks, ledgers, redact []string
	var out, suite, signKey, passFile string
	var humanBaseline bool
	cmd := &cobra.Command{
		Use:   "publish --out DIR --key PUB.pem [--key ...] [--sign-key HOST.key] [--track T.toml ...] [--ledger L ...] [--suite exam|airs] [--human-baseline] [--redact all|RUN|RUN:gateway-N|RUN:call-N|RUN:terminal-N] RESULTS...",
		Short: "Write a self-contained directory of results a reader can check offline (verify-publication)",
		Long: `Publish verifies every attestation under RESULTS (results directories as sealrun results gather
writes them, or attestation files) with the keys, and writes DIR: each run's directory as gathered
(attestation, report, track, audit log, bundle, ...) with its trajectory — every model request
and response and every call's output its audit log hashes (gateway/, calls/), and its
transcript.json and transcript.html made from them — the tracks, the public keys, the run ledgers
given, the leaderboard as JSON, Markdown and HTML (the AIRS suite: JSON and Markdown) built from
those attestations alone, publication.json, VERIFY.md with the exact commands a reader runs
(sealrun and cosign), and SHA256SUMS over every file — signed with the host's key when --sign-key
is given (SHA256SUMS.dsse.json, a DSSE envelope whose payload is SHA256SUMS), so that a mirror
cannot add, drop or swap a file unseen. Every attestation is published: graded,
failed, invalid and their reruns.

--redact withholds bodies for operators who may not release prompts: "all" (every body of every
run), RUN (every body of one run), RUN:gateway-N (model exchange N's request and response),
RUN:call-N (compute call N's output) or RUN:terminal-N (segment N of a human run's terminal
recording); repeatable, or comma-separated. The audit logs keep every
hash, and each transcript says what was withheld. A scaffold resends its conversation, so the
requests after exchange N carry what N said again: withhold from there on, or the whole run
(docs/TRANSCRIPT.md).

Publish refuses an attestation that does not verify, a run without a track file (give --track),
a gathered run without the bodies its audit log hashes (gather it again, or --redact it), and,
with --ledger, a board whose runs the ledgers do not account for (a run missing, not ended or
withheld). DIR must not exist; it appears whole, by rename, or not at all.`,
		Example: `  sealrun ledger export --out ledger-node01.jsonl
  sealrun publish --out /srv/www/ari-v1-2026-11 --key /etc/sealrun/keys/sealrun.pub \
      --sign-key /etc/sealrun/keys/sealrun.key --ledger ledger-node01.jsonl /shared/results
  sealrun verify-publication /srv/www/ari-v1-2026-11
  sealrun publish --out /srv/www/ari-v1-hashes --key /etc/sealrun/keys/sealrun.pub --redact all /shared/results`,
		Args: minArgs(1, "results directories or attestation files"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("--out is required: the publication directory to create"))
			}
			if len(keys) == 0 {
				return usage(errors.New("give the public key(s) that signed the runs with --key (a PEM file or a directory of *.pub files)"))
			}
			if suite != leaderboard.SuiteExam && suite != leaderboard.SuiteAIRS {
				return usage(fmt.Errorf("--suite %q: use exam (the default) or airs", suite))
			}
			if suite == leaderboard.SuiteAIRS && len(ledgers) > 0 {
				return usage(errors.New("--ledger is for the exam suite's board for now (sealrun leaderboard --suite airs does not account for runs against ledgers)"))
			}
			var signer signature.Signer
			if signKey != "" {
				var pass []byte
				if passFile != "" {
					var err error
					if pass, err = readPassphrase(passFile); err != nil {
						return usage(err)
					}
				}
				var err error
				if signer, err = attest.LoadSigner(cmd.Context(), signKey, pass); err != nil {
					return usage(fmt.Errorf("--sign-key: %w", err))
				}
			}
			s, err := publish.Write(publish.Options{Out: out, Suite: suite, Keys: keys, Tracks: tracks, Ledgers: ledgers, Inputs: args, Log: cmd.ErrOrStderr(), Redact: redact, Version: version, HumanBaseline: humanBaseline, Signer: signer})
			if err != nil {
				return publishError(err)
			}
			witnessed := ""
			if s.Ledgers > 0 {
				witnessed = fmt.Sprintf(" (%d runs under a cosigned head)", s.Witnessed)
			}
			check := "sealrun verify-publication " + out + " --key KEY"
			if s.Witnessed > 0 {
				check += " --witness WITNESS_KEY"
			}
			if s.Timestamped > 0 {
				check += " --tsa-chain TSA-CHAIN.pem"
			}
			manifest := "its list of files signed (" + publish.ManifestFile + ")"
			if !s.Signed {
				manifest = "its list of files unsigned (give the host's key with --sign-key to sign it)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d runs, %d tracks, %d keys, %d ledgers%s, %d files, %s; check it with: %s (VERIFY.md says more)\n",
				out, s.Runs, s.Tracks, s.Keys, s.Ledgers, witnessed, s.Files, manifest, check)
			return nil
		},
	}
	cmd.Flags().StringVar(&signKey, "sign-key", "", "the host's private key (PEM, or a KMS URI), whose public half is among --key: signs the publication's list of files ("+publish.ManifestFile+")")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "passphrase of an encrypted --sign-key")
	cmd.Flags().StringVar(&out, "out", "", "the publication directory to create (must not exist)")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "public key that signed the runs (PEM), or a directory of *.pub; repeatable")
	cmd.Flags().StringArrayVar(&tracks, "track", nil, "a track file the runs were judged under (repeatable; default: each run's own track.toml)")
	cmd.Flags().StringArrayVar(&ledgers, "ledger", nil, "a host's run ledger (sealrun ledger export; repeatable, one per host)")
	cmd.Flags().StringVar(&suite, "suite", leaderboard.SuiteExam, "exam: one board per exam track; airs: the AIRS-Bench task suite")
	cmd.Flags().BoolVar(&humanBaseline, "human-baseline", false, "one row, human · baseline, for every person's runs of a track (recorded in publication.json), instead of a row each")
	cmd.Flags().StringArrayVar(&redact, "redact", nil, "withhold bodies, publishing their hashes only: all, RUN, RUN:gateway-N, RUN:call-N or RUN:terminal-N (repeatable; comma-separated)")
	return cmd
}

// publishError gives a publish error its exit status: usage and I/O errors 2, a publication that
// does not check 1 (quiet when its problems were listed), anything else as any verb's error.
func publishError(err error) error {
	var e *publish.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Kind {
	case publish.Usage:
		return usage(e.Err)
	case publish.IO:
		return ioError(e.Err)
	}
	return &exitError{code: exitInvalid, err: e.Err, quiet: e.Listed}
}
