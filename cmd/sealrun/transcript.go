package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/spf13/cobra"
)

func newTranscriptCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "transcript RUNDIR [--out DIR]",
		Short: "Make a run's transcript.json and transcript.html from its audit log and bodies",
		Long: `Transcript reassembles an ended run from the files of its directory — as sealrund keeps it
(/var/lib/sealrun/runs/RUN), as results gather wrote it, or as a publication holds it — and
writes transcript.json (the run as data: docs/TRANSCRIPT.md) and transcript.html (a page that
opens offline, from a file:// URL) into the directory, or into --out.

Every model exchange is read into messages (OpenAI chat completions, the Responses API,
Anthropic messages; streamed or not), each request shown as what it added to the conversation,
on one time axis with the compute calls, submissions, validation scores and the clock. Every
body is checked against the SHA-256 its audit entry carries, and the page says how many are
intact. sealrund writes both files itself when a run ends; this verb makes them again (for a
run of an older sealrund, or after a change of the page). It reads the attestation for the
run's header without verifying it: sealrun verify --transcript RUNDIR is the check.`,
		Example: `  sealrun transcript /var/lib/sealrun/runs/r-20261126-101500-a1b2c3
  sealrun transcript results/r-20261126-101500-a1b2c3 --out /tmp/look`,
		Args: exactArgs(1, "a run directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			env, err := os.ReadFile(filepath.Join(dir, "result.att.json"))
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s has no result.att.json: give an ended run's directory (a running run's transcript is live in sealrun view)", dir)
			}
			if err != nil {
				return ioError(err)
			}
			st, err := attest.ReadUnverified(env)
			if err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(dir, "result.att.json"), err)
			}
			t, err := transcript.Build(dir, transcript.RunFromPredicate(st.Predicate), transcript.Options{})
			if err != nil {
				return err
			}
			if out == "" {
				out = dir
			} else if err := os.MkdirAll(out, 0o755); err != nil {
				return ioError(err)
			}
			if err := transcript.Write(out, t); err != nil {
				return ioError(err)
			}
			b := t.Bodies
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d model exchanges, %d calls, %d submissions; bodies %d intact, %d missing, %d altered\n",
				filepath.Join(out, "transcript.html"), t.Totals.Exchanges, t.Totals.Calls, t.Totals.Submissions, b.Intact, b.Missing, b.Altered)
			if b.Missing+b.Altered > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d bodies its audit log hashes are missing or altered; the page marks them\n", b.Missing+b.Altered)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the two files into this directory instead of RUNDIR")
	return cmd
}
