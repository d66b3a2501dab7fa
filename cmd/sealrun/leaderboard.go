package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/verify"
	"github.com/spf13/cobra"
)

// leaderboardFlags are the flags of sealrun leaderboard.
type leaderboardFlags struct {
	keys, tracks, ledgers         []string
	format, out, suite, transform string
	allowRejected, humanBaseline  bool
	asJSON                        bool
	witnesses                     witnessFlags
}

// newLeaderboardCmd is long for its help text: the flag checks and the work are functions of
// their own.
func newLeaderboardCmd() *cobra.Command {
	var f leaderboardFlags
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

The verification is one result, as sealrun verify's: its checks (ledgers, witnessed,
attestations, accounting), each passed, failed with each file and reason, or not applicable and
why, and the verdict, on standard error after the board; --json prints that result as data
(schema sealrun-verify/1, kind board, docs/VERIFY-JSON.md) on standard output instead of the
board (--out still writes the board).

Exit status: 0 every attestation verified, 1 some input was rejected or, with --ledger, a row is
not accounted for (the board is still written; --allow-rejected exits 0), 2 usage or I/O error. Runs on Linux, macOS and Windows.`,
		Example: `  sealrun leaderboard --key sealrun.pub /shared/results/
  sealrun leaderboard --key keys/ --track tracks/ari-v1.toml results/ --format html --out board.html
  sealrun leaderboard --key sealrun.pub --suite airs /shared/airs-results/
  sealrun leaderboard --key keys/ results/ --ledger ledger-node01.jsonl --ledger ledger-node02.jsonl
  sealrun leaderboard --key keys/ results/ --out board.html --format html --json | jq '.checks[] | select(.outcome == "failed")'`,
		Args: minArgs(1, "attestation files or directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(cmd); err != nil {
				return usage(err)
			}
			return leaderboardRun(cmd, &f, args)
		},
	}
	cmd.Flags().StringArrayVar(&f.keys, "key", nil, "trusted public key (PEM), or a directory of *.pub/*.pem; repeat for several")
	cmd.Flags().StringArrayVar(&f.ledgers, "ledger", nil, "a host's published run ledger (sealrun ledger export; repeatable, one per host): account for every run of each row")
	f.witnesses.add(cmd)
	cmd.Flags().StringArrayVar(&f.tracks, "track", nil, "verify against this track file (repeatable); attestations under other tracks are rejected")
	cmd.Flags().StringVar(&f.format, "format", "text", "text, markdown, html, json or csv (--suite airs: text, markdown or json)")
	cmd.Flags().StringVar(&f.suite, "suite", leaderboard.SuiteExam, "exam: one table per exam track; airs: the AIRS-Bench task suite (normalized scores, Elo)")
	cmd.Flags().StringVar(&f.transform, "transform", string(airs.MarchOf9s), "--suite airs: the normalized score's φ, march-of-9s or identity")
	cmd.Flags().StringVar(&f.out, "out", "", "write to this file (atomically) instead of stdout")
	cmd.Flags().BoolVar(&f.allowRejected, "allow-rejected", false, "exit 0 even if some input was rejected")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print the verification's result as JSON (schema "+verify.Schema+", kind board, docs/VERIFY-JSON.md) instead of the board, which --out still writes")
	cmd.Flags().BoolVar(&f.humanBaseline, "human-baseline", false, "one row, human · baseline, for every person's runs of a track (human runs: agent human/HANDLE), instead of a row each")
	return cmd
}

// check refuses flags that do not go together.
func (f *leaderboardFlags) check(cmd *cobra.Command) error {
	if f.suite != leaderboard.SuiteExam && f.suite != leaderboard.SuiteAIRS {
		return fmt.Errorf("--suite %q: use exam (the default) or airs", f.suite)
	}
	if f.suite == leaderboard.SuiteAIRS && !slices.Contains(leaderboard.AIRSFormats, f.format) {
		return fmt.Errorf("--format %q with --suite airs: use one of %s", f.format, strings.Join(leaderboard.AIRSFormats, ", "))
	}
	if f.transform != string(airs.MarchOf9s) && f.transform != string(airs.Identity) {
		return fmt.Errorf("--transform %q: use %s or %s", f.transform, airs.MarchOf9s, airs.Identity)
	}
	if f.suite == leaderboard.SuiteExam && cmd.Flags().Changed("transform") {
		return errors.New("--transform is for --suite airs (the exam suite scores passed/questions)")
	}
	if !slices.Contains(leaderboard.Formats, f.format) {
		return fmt.Errorf("--format %q: use one of %s", f.format, strings.Join(leaderboard.Formats, ", "))
	}
	if len(f.keys) == 0 {
		return errors.New("give the trusted public key(s) with --key (a PEM file or a directory of *.pub files)")
	}
	if len(f.ledgers) > 0 && f.suite == leaderboard.SuiteAIRS {
		return errors.New("--ledger is for the exam suite's board for now")
	}
	return nil
}

// leaderboardRun verifies the inputs and builds the suite's board (verify.Board), writes the
// board and the verification's result, and chooses the exit status.
func leaderboardRun(cmd *cobra.Command, f *leaderboardFlags, args []string) error {
	ks, err := leaderboard.LoadKeys(f.keys)
	if err != nil {
		return ioError(err)
	}
	var ts []*policy.Track
	for _, p := range f.tracks {
		t, err := policy.Load(p)
		if err != nil {
			return ioError(fmt.Errorf("--track: %w", err))
		}
		ts = append(ts, t)
	}
	ws, err := f.witnesses.verifiers()
	if err != nil {
		return err
	}
	r, s, err := verify.Board(args, verify.BoardOptions{Keys: ks, Tracks: ts, Ledgers: f.ledgers, Witnesses: ws, Quorum: f.witnesses.quorum,
		Suite: f.suite, AIRS: airs.Options{Transform: airs.Transform(f.transform)}, HumanBaseline: f.humanBaseline})
	if err != nil {
		return verifyError(err)
	}
	if s != nil {
		var buf bytes.Buffer
		if err := s.Board.Render(&buf, f.format); err != nil {
			return ioError(err)
		}
		switch {
		case f.out != "":
			if err := fileio.WriteAtomic(f.out, 0o644, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
				return ioError(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "sealrun leaderboard: wrote %s (%d tables, %d rejected)\n", f.out, s.Tables, s.Rejected)
		case !f.asJSON:
			if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
				return ioError(err)
			}
		}
	}
	if f.asJSON {
		if err := printJSON(cmd.OutOrStdout(), r); err != nil {
			return ioError(err)
		}
	} else {
		verify.WriteBoardVerdict(cmd.ErrOrStderr(), r)
	}
	if c := r.Check("ledgers"); c != nil && c.Outcome == verify.Failed {
		return &exitError{code: exitInvalid, err: errors.New(c.Problems[0].Reason), quiet: f.asJSON}
	}
	if c := r.Check("witnessed"); c != nil && c.Outcome == verify.Failed {
		return &exitError{code: exitInvalid, err: errors.New(c.Problems[0].String()), quiet: f.asJSON}
	}
	if f.allowRejected {
		return nil
	}
	if c := r.Check("accounting"); c != nil && c.Outcome == verify.Failed {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%d row(s) or run(s) not accounted for by the run ledgers (each is named); --allow-rejected publishes anyway", len(c.Problems))}
	}
	if c := r.Check("attestations"); c != nil && c.Outcome == verify.Failed {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%d input(s) rejected (listed with reasons); --allow-rejected publishes anyway", len(c.Problems))}
	}
	return nil
}
