package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/policy"
	"github.com/spf13/cobra"
)

func newLeaderboardCmd() *cobra.Command {
	var keys, tracks []string
	var format, out string
	var allowRejected bool
	cmd := &cobra.Command{
		Use:   "leaderboard --key PUB.pem [--key ...] [--track T.toml ...] DIR|ATT... [--format text|markdown|html|json|csv] [--out FILE]",
		Short: "Rank agents from verified attestations only: seeds, mean ± SE, ties, provisional rows, reruns",
		Long: `Leaderboard verifies every attestation given (files, or directories searched for *.json) with the
trusted keys (--key, repeated, or a directory of *.pub files) and, when given, against the track
files; only what verifies counts. It prints one table per track: rank (ties as '='), agent
(scaffold, model, effort), score mean ± SE over valid seeded runs, valid/required seeds, official
or provisional, failed runs, invalid runs with their reruns, the best validation score (the
overfitting signal) and bits per byte, then the rules applied (leaderboard/FORMAT.md).

Files in a directory that are not attestations (report.json, ...) are skipped and counted; an
attestation that does not verify is listed with its reason and contributes nothing.

Exit status: 0 every attestation verified, 1 some input was rejected (the board is still written;
--allow-rejected exits 0), 2 usage or I/O error. Runs on Linux, macOS and Windows.`,
		Example: `  sealrun leaderboard --key sealrun.pub /shared/results/
  sealrun leaderboard --key keys/ --track tracks/ari-v1.toml results/ --format html --out board.html`,
		Args: minArgs(1, "attestation files or directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(leaderboard.Formats, format) {
				return usage(fmt.Errorf("--format %q: use one of %s", format, strings.Join(leaderboard.Formats, ", ")))
			}
			if len(keys) == 0 {
				return usage(errors.New("give the trusted public key(s) with --key (a PEM file or a directory of *.pub files)"))
			}
			ks, err := leaderboard.LoadKeys(keys)
			if err != nil {
				return ioError(err)
			}
			var ts []*policy.Track
			for _, p := range tracks {
				t, err := policy.Load(p)
				if err != nil {
					return ioError(fmt.Errorf("--track: %w", err))
				}
				ts = append(ts, t)
			}
			in, err := leaderboard.Load(args, ks, ts)
			if err != nil {
				return ioError(err)
			}
			board := leaderboard.Build(in, ks)
			var buf bytes.Buffer
			if err := board.Render(&buf, format); err != nil {
				return ioError(err)
			}
			if out == "" {
				if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
					return ioError(err)
				}
			} else {
				if err := exams.WriteAtomic(out, 0o644, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
					return ioError(err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "sealrun leaderboard: wrote %s (%d tables, %d rejected)\n", out, len(board.Tables), len(board.Rejected))
			}
			if len(board.Rejected) > 0 && !allowRejected {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d input(s) rejected (listed with reasons); --allow-rejected publishes anyway", len(board.Rejected))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trusted public key (PEM), or a directory of *.pub/*.pem; repeat for several")
	cmd.Flags().StringArrayVar(&tracks, "track", nil, "verify against this track file (repeatable); attestations under other tracks are rejected")
	cmd.Flags().StringVar(&format, "format", "text", "text, markdown, html, json or csv")
	cmd.Flags().StringVar(&out, "out", "", "write to this file (atomically) instead of stdout")
	cmd.Flags().BoolVar(&allowRejected, "allow-rejected", false, "exit 0 even if some input was rejected")
	return cmd
}
