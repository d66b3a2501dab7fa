package main

import (
	"github.com/sealrun/sealrun/publish"
	"github.com/spf13/cobra"
)

func newVerifyPublicationCmd() *cobra.Command {
	var keys []string
	var wf witnessFlags
	cmd := &cobra.Command{
		Use:   "verify-publication DIR [--key OPERATOR.pub ...]",
		Short: "Check a publication (sealrun publish) offline in one step, and say what a reader may conclude",
		Long: `Verify-publication checks everything a publication holds: every file against SHA256SUMS (a file
missing, added or edited is named), publication.json against the directory, every attestation with
the trusted keys and each run's files it binds (report, bundle, audit log, track), every track file
against the track id its runs carry, the run ledgers (a run withheld, or not ended, is named; a
forked, truncated or edited ledger is rejected), and that leaderboard.json, .md and .html are
exactly what the attestations give. Then it prints what a reader may conclude, and what not.

Give the operator's key as you obtained it (--key, repeatable); without --key the publication's own
keys/ are trusted and their key ids printed, to compare with the operator's. With --witness (each
a witness's public key, as you obtained it from the witness, not from the publication) and
--witnesses N, every published ledger must carry a head N of them cosigned.

Exit status: 0 the publication checks, 1 it does not (every reason listed), 2 usage or I/O error.
Runs on Linux, macOS and Windows.`,
		Example: `  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub`,
		Args:    exactArgs(1, "the publication directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := wf.verifiers()
			if err != nil {
				return err
			}
			return publishError(publish.VerifyWitnessed(args[0], keys, ws, wf.quorum, cmd.OutOrStdout()))
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the operator's public key (PEM) or a directory of *.pub; repeatable (default: the publication's keys/)")
	wf.add(cmd)
	return cmd
}
