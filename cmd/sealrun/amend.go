package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

func newAmendCmd() *cobra.Command {
	var socket, reason, link, draft, reviewed string
	var invalidate, legacy, note, rerun bool
	cmd := &cobra.Command{
		Use:   "amend RUN (--invalidate | --legacy | --note) --reason TEXT [--link URL] [--rerun] [--draft FILE] | amend RUN --reviewed FILE [--rerun]",
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
a run": when to amend, when to rerun instead).

Where the run's track asks for a reviewer's signature beside the host's ([amendments] reviewers
in the track file), an amendment takes three steps: --draft FILE writes the statement sealrund
would sign, unsigned; a reviewer reads and signs it where their key is (sealrun amend review FILE
--key THEIR.key); --reviewed FILE sends it back, and sealrund checks it is the statement it
would make, signs it and appends it.`,
		Example: `  sealrun amend r-20261124-031500-a1b2c3 --invalidate --rerun \
    --reason "the host's memory failed memtest86+ on 2026-11-30" --link https://status.example.org/incident/42

  # a track with reviewers: draft, review (the reviewer, anywhere), send
  sealrun amend r-20261124-041500-d4e5f6 --legacy --reason "graded before the grader fix" --draft amend.json
  sealrun amend review amend.json --key reviewer/sealrun.key --track track.toml
  sealrun amend r-20261124-041500-d4e5f6 --reviewed amend.json`,
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
			req := api.AmendRequest{Action: action, Reason: reason, Link: link, Rerun: rerun, Draft: draft != ""}
			switch {
			case reviewed != "" && draft != "":
				return usage(errors.New("--reviewed sends a reviewed draft; --draft makes one: give one of them"))
			case reviewed != "":
				if n > 0 || reason != "" || link != "" {
					return usage(errors.New("--reviewed: the action, reason and link are the reviewed draft's; give none of --invalidate, --legacy, --note, --reason, --link"))
				}
				env, err := fileio.ReadLimited(reviewed, "reviewed amendment", attest.MaxAmendmentBytes)
				if err != nil {
					return err
				}
				req.Reviewed = env
			default:
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
				if rerun && draft != "" {
					return usage(errors.New("--rerun goes with --reviewed, when the amendment is made: a draft queues nothing"))
				}
				if draft != "" {
					if _, err := os.Lstat(draft); err == nil {
						return fmt.Errorf("--draft %s exists; a draft is never written over (remove it, or choose another file)", draft)
					}
				}
			}
			out, err := client.New(socket).Amend(cmd.Context(), args[0], req)
			if err != nil {
				if out.Amendment != "" && out.Draft == nil {
					printAmended(cmd.OutOrStdout(), out)
				}
				return err
			}
			if draft != "" {
				if err := fileio.WriteFile(draft, out.Draft, 0o644); err != nil {
					return fmt.Errorf("write the draft %s: %w", draft, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: drafted (%s) in %s; amendment sha256:%s, not yet signed or in the ledger\n", out.Run, out.Action, draft, out.Amendment)
				fmt.Fprintf(cmd.OutOrStdout(), "next: a reviewer the run's track names signs it (sealrun amend review %s --key THEIR.key), and you send it: sealrun amend %s --reviewed %s\n", draft, out.Run, draft)
				return nil
			}
			printAmended(cmd.OutOrStdout(), out)
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVar(&invalidate, "invalidate", false, "take the run out of every mean")
	cmd.Flags().BoolVar(&legacy, "legacy", false, "label the run as graded under a superseded protocol")
	cmd.Flags().BoolVar(&note, "note", false, "add a note to the run")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for a reader (required; at most 1024 bytes)")
	cmd.Flags().StringVar(&link, "link", "", "the report the amendment rests on (an http(s) URL)")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "with --invalidate (or --reviewed of an invalidation): queue a rerun of the run")
	cmd.Flags().StringVar(&draft, "draft", "", "where the run's track asks for a reviewer: write the unsigned amendment to this new file, for the reviewer")
	cmd.Flags().StringVar(&reviewed, "reviewed", "", "send a draft the reviewer signed (sealrun amend review): sealrund signs it and appends it")
	cmd.AddCommand(newAmendReviewCmd())
	return cmd
}

func printAmended(w io.Writer, out api.Amended) {
	by := ""
	if out.Reviewer != "" {
		by = ", reviewed by key " + out.Reviewer[:16]
	}
	fmt.Fprintf(w, "%s: amended (%s%s); amendment sha256:%s, ledger entry %d, signed in %s\n", out.Run, out.Action, by, out.Amendment, out.Entry, out.Path)
	if out.Rerun != "" {
		fmt.Fprintf(w, "%s: queued as its rerun\n", out.Rerun)
	}
}

func newAmendReviewCmd() *cobra.Command {
	var key, passFile, trackFile string
	cmd := &cobra.Command{
		Use:   "review FILE --key KEY [--passphrase-file F] [--track TRACK.toml]",
		Short: "Sign, as a reviewer, an amendment a host drafted (offline; FILE is signed in place)",
		Long: `Review prints the amendment a host drafted (sealrun amend RUN ... --draft FILE) — the run, the
track, what changes and why — and signs it with the reviewer's key, writing FILE again with the
signature (atomically). It needs no sealrund and no network: run it where the reviewer's key is,
and hand the file back to the host's operator (sealrun amend RUN --reviewed FILE).

With --track, the run's track file: review refuses a draft of another track's run, and a key the
track does not name among its reviewers (a signature no reader would count).`,
		Args: exactArgs(1, "the drafted amendment's file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return usage(errors.New("give the reviewer's private key with --key"))
			}
			env, err := fileio.ReadLimited(args[0], "drafted amendment", attest.MaxAmendmentBytes)
			if err != nil {
				return err
			}
			st, _, _, err := attest.ReadAmendmentEnvelope(env)
			if err != nil {
				return fmt.Errorf("%s is not a drafted amendment: %w", args[0], err)
			}
			pass, err := readPassphrase(passFile)
			if err != nil {
				return err
			}
			signer, err := attest.LoadSigner(cmd.Context(), key, pass)
			if err != nil {
				return err
			}
			pub, err := signer.PublicKey()
			if err != nil {
				return err
			}
			id, err := attest.KeyID(pub)
			if err != nil {
				return err
			}
			if trackFile != "" {
				t, err := policy.Load(trackFile)
				if err != nil {
					return err
				}
				switch {
				case t.ID != st.Predicate.Track.ID:
					return fmt.Errorf("the draft is of a run of track %s; %s is track %s: give the run's track file", st.Predicate.Track.ID, trackFile, t.ID)
				case t.Amendments == nil:
					return fmt.Errorf("track %s (%s) names no reviewer: its amendments need no review", t.Name, trackFile)
				}
				named := false
				for _, r := range t.Amendments.Reviewers {
					named = named || r.KeyID == id
				}
				if !named {
					return fmt.Errorf("key %s is not one of the %d reviewer(s) track %s names: no reader would count its signature", id, len(t.Amendments.Reviewers), t.Name)
				}
			}
			p := st.Predicate
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "run:     %s (agent %s)\ntrack:   %s %s (%s)\nledger:  %s\naction:  %s\nreason:  %s\n", p.Run, p.Agent, p.Track.Name, p.Track.Version, p.Track.ID, p.Ledger, p.Action, p.Reason)
			if p.Link != "" {
				fmt.Fprintf(w, "link:    %s\n", p.Link)
			}
			fmt.Fprintf(w, "drafted: %s\n", p.Time.Format("2006-01-02 15:04:05Z07:00"))
			out, _, err := attest.ReviewAmendment(cmd.Context(), env, signer)
			if err != nil {
				return err
			}
			if err := fileio.WriteFile(args[0], out, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", args[0], err)
			}
			fmt.Fprintf(w, "signed by key %s in %s: hand it back to the host's operator (sealrun amend %s --reviewed %s)\n", id, args[0], p.Run, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "the reviewer's private key (sealrun keys generate)")
	cmd.Flags().StringVar(&passFile, "passphrase-file", "", "the key's passphrase, where it is encrypted")
	cmd.Flags().StringVar(&trackFile, "track", "", "the run's track file: check the draft is of its run and the key is one of its reviewers")
	return cmd
}
