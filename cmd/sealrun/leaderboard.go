package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/policy"
	"github.com/spf13/cobra"
)

func newLeaderboardCmd() *cobra.Command {
	var keys, tracks, ledgers []string
	var format, out, suite, transform string
	var allowRejected bool
	cmd := &cobra.Command{
		Use:   "leaderboard --key PUB.pem [--key ...] [--track T.toml ...] [--suite exam|airs] DIR|ATT... [--format text|markdown|html|json|csv] [--out FILE]",
		Short: "Rank agents from verified attestations only: seeds, mean ± SE, ties, provisional rows, reruns",
		Long: `Leaderboard verifies every attestation given (files, or directories searched for *.json) with the
trusted keys (--key, repeated, or a directory of *.pub files) and, when given, against the track
files; only what verifies counts. It prints one table per track: rank (ties as '='), agent
(scaffold, model, effort), score mean ± SE over valid seeded runs, valid/required seeds, official
or provisional, failed runs, invalid runs with their reruns, the best validation score (the
overfitting signal), bits per byte and the trusted keys that signed the row's runs, then the
rules applied (leaderboard/FORMAT.md).

--suite airs ranks the runs of AIRS-Bench task tracks instead (sealed-task-run attestations; exam
runs are skipped): per agent over every task, the mean normalized score (the march of 9s, or
--transform identity) with its 95% bootstrap interval, the valid submission rate, the Elo rating
(Bradley–Terry, the SOTA a player) with its interval; then per task, s_min and where it came from,
and each agent's runs, valid submissions, mean normalized score and mean raw metric. Formats:
text, markdown, json.

--ledger L (repeatable: one per host, for a cluster's nodes) checks each published run ledger with
the keys and against the heads the attestations carry (a forked, truncated or edited ledger is
rejected with the reason), then says per row whether every run of that track and agent is
accounted for: each run the ledgers hold ended and its attestation is published, and each
published run is in a ledger; otherwise it names each run missing, not ended, or rerun.

Files in a directory that are not attestations (report.json, ...) are skipped and counted; an
attestation that does not verify is listed with its reason and contributes nothing.

Exit status: 0 every attestation verified, 1 some input was rejected or, with --ledger, a row is
not accounted for (the board is still written; --allow-rejected exits 0), 2 usage or I/O error. Runs on Linux, macOS and Windows.`,
		Example: `  sealrun leaderboard --key sealrun.pub /shared/results/
  sealrun leaderboard --key keys/ --track tracks/ari-v1.toml results/ --format html --out board.html
  sealrun leaderboard --key sealrun.pub --suite airs /shared/airs-results/
  sealrun leaderboard --key keys/ results/ --ledger ledger-node01.jsonl --ledger ledger-node02.jsonl`,
		Args: minArgs(1, "attestation files or directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if suite != "exam" && suite != leaderboard.SuiteAIRS {
				return usage(fmt.Errorf("--suite %q: use exam (the default) or airs", suite))
			}
			if suite == leaderboard.SuiteAIRS && !slices.Contains(leaderboard.AIRSFormats, format) {
				return usage(fmt.Errorf("--format %q with --suite airs: use one of %s", format, strings.Join(leaderboard.AIRSFormats, ", ")))
			}
			if transform != string(airs.MarchOf9s) && transform != string(airs.Identity) {
				return usage(fmt.Errorf("--transform %q: use %s or %s", transform, airs.MarchOf9s, airs.Identity))
			}
			if suite == "exam" && cmd.Flags().Changed("transform") {
				return usage(errors.New("--transform is for --suite airs (the exam suite scores passed/questions)"))
			}
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
			if len(ledgers) > 0 {
				if suite == leaderboard.SuiteAIRS {
					return usage(errors.New("--ledger is for the exam suite's board for now"))
				}
				if in.Ledgers, err = leaderboard.LoadLedgers(ledgers, ks); err != nil {
					return &exitError{code: exitInvalid, err: err}
				}
			}
			var buf bytes.Buffer
			var tables, rejected, unaccounted int
			if suite == leaderboard.SuiteAIRS {
				board, err := leaderboard.BuildAIRS(in, ks, airs.Options{Transform: airs.Transform(transform)})
				if err != nil {
					return ioError(err)
				}
				if err := board.Render(&buf, format); err != nil {
					return ioError(err)
				}
				tables, rejected = len(board.Tasks), len(board.Rejected)
			} else {
				board := leaderboard.Build(in, ks)
				if err := board.Render(&buf, format); err != nil {
					return ioError(err)
				}
				tables, rejected = len(board.Tables), len(board.Rejected)
				for _, t := range board.Tables {
					for _, r := range t.Rows {
						if r.Ledger != nil && !r.Ledger.Accounted {
							unaccounted++
						}
					}
				}
				unaccounted += len(board.Unpublished)
			}
			if out == "" {
				if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
					return ioError(err)
				}
			} else {
				if err := exams.WriteAtomic(out, 0o644, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
					return ioError(err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "sealrun leaderboard: wrote %s (%d tables, %d rejected)\n", out, tables, rejected)
			}
			if unaccounted > 0 && !allowRejected {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d row(s) or run(s) not accounted for by the run ledgers (each is named); --allow-rejected publishes anyway", unaccounted)}
			}
			if rejected > 0 && !allowRejected {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d input(s) rejected (listed with reasons); --allow-rejected publishes anyway", rejected)}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "trusted public key (PEM), or a directory of *.pub/*.pem; repeat for several")
	cmd.Flags().StringArrayVar(&ledgers, "ledger", nil, "a host's published run ledger (sealrun ledger export; repeatable, one per host): account for every run of each row")
	cmd.Flags().StringArrayVar(&tracks, "track", nil, "verify against this track file (repeatable); attestations under other tracks are rejected")
	cmd.Flags().StringVar(&format, "format", "text", "text, markdown, html, json or csv (--suite airs: text, markdown or json)")
	cmd.Flags().StringVar(&suite, "suite", "exam", "exam: one table per exam track; airs: the AIRS-Bench task suite (normalized scores, Elo)")
	cmd.Flags().StringVar(&transform, "transform", string(airs.MarchOf9s), "--suite airs: the normalized score's φ, march-of-9s or identity")
	cmd.Flags().StringVar(&out, "out", "", "write to this file (atomically) instead of stdout")
	cmd.Flags().BoolVar(&allowRejected, "allow-rejected", false, "exit 0 even if some input was rejected")
	return cmd
}
