package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/ledger"
)

func newAmendCmd() *cobra.Command {
	var socket, reason, link string
	var invalidate, legacy, note, rerun bool
	cmd := &cobra.Command{
		Use:   "amend RUN (--invalidate | --legacy | --note) --reason TEXT [--link URL] [--rerun]",
		Short: "Say what was found about a run after it ended: a signed amendment in the ledger",
		Long: `Amend records what an operator learned about a run after it ended, without changing its
attestation (no one can) or dropping it (the ledger would show that): sealrund signs an amendment
(attest/PREDICATE.md, "Amendments") with the host key, naming the run's attestation, what changes
and why, and appends it to the host's ledger as an entry of its own, witnessed like every run.

  --invalidate  the run leaves every mean, listed with the reason and link, as a run the
                infrastructure broke is (the host's memory found bad a week after; a grader bug);
                --rerun queues a rerun of it, linked to it
  --legacy      the run was graded under a protocol revision since superseded: labelled legacy
  --note        a note shown with the row's runs (a contamination report under review)

A run takes one --invalidate or --legacy, and up to 16 notes; a run the host ended invalid is
rerun, not amended. Boards and verify-publication apply amendments (docs/OPERATOR.md, "Amending
a run": when to amend, when to rerun instead).`,
		Example: `  sealrun amend r-20261124-031500-a1b2c3 --invalidate --rerun \
    --reason "the host's memory failed memtest86+ on 2026-11-30" --link https://status.example.org/incident/42`,
		Args: exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var action string
			n := 0
			for _, a := range []struct {
				on   bool
				name string
			}{{invalidate, ledger.ActionInvalidate}, {legacy, ledger.ActionLegacy}, {note, ledger.ActionNote}} {
				if a.on {
					action = a.name
					n++
				}
			}
			if n != 1 {
				return usage(errors.New("give one of --invalidate, --legacy or --note"))
			}
			if strings.TrimSpace(reason) == "" || len(reason) > 1024 || strings.ContainsFunc(reason, unicode.IsControl) {
				return usage(errors.New("--reason: say why, for a reader: 1 to 1024 bytes on one line"))
			}
			if link != "" && !strings.HasPrefix(link, "https://") && !strings.HasPrefix(link, "http://") {
				return usage(fmt.Errorf("--link %q: give the http(s) URL of the report the amendment rests on", link))
			}
			if rerun && !invalidate {
				return usage(errors.New("--rerun goes with --invalidate: only an invalidated run leaves the mean"))
			}
			out, err := client.New(socket).Amend(cmd.Context(), args[0], api.AmendRequest{Action: action, Reason: reason, Link: link, Rerun: rerun})
			if out.Amendment != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: amended (%s); amendment sha256:%s, ledger entry %d, signed in %s\n", out.Run, action, out.Amendment, out.Entry, out.Path)
				if out.Rerun != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s: queued as its rerun\n", out.Rerun)
				}
			}
			return err
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVar(&invalidate, "invalidate", false, "take the run out of every mean")
	cmd.Flags().BoolVar(&legacy, "legacy", false, "label the run as graded under a superseded protocol")
	cmd.Flags().BoolVar(&note, "note", false, "add a note to the run")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for a reader (required; at most 1024 bytes)")
	cmd.Flags().StringVar(&link, "link", "", "the report the amendment rests on (an http(s) URL)")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "with --invalidate: queue a rerun of the run")
	return cmd
}
