package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
)

// Exit codes of run --wait (and of following a run to its end).
const (
	exitRunFailed  = 3
	exitRunInvalid = 4
)

const defaultSocket = "/run/sealrun/sealrun.sock"

func addSocketFlag(cmd *cobra.Command, socket *string) {
	cmd.Flags().StringVar(socket, "socket", defaultSocket, "sealrund's admin socket")
}

func stateExit(state, reason string) error {
	switch state {
	case api.StateGraded:
		return nil
	case api.StateFailed:
		return &exitError{code: exitRunFailed, err: fmt.Errorf("the run failed: %s", reason), quiet: true}
	case api.StateInvalid:
		return &exitError{code: exitRunInvalid, err: fmt.Errorf("the run is invalid: %s", reason), quiet: true}
	}
	return nil
}

// newRunCmd is sealrun run. It is long for its help text and flags; the work is the daemon's (POST
// /runs) and follow's.
func newRunCmd() *cobra.Command {
	var socket, track, agent, rerunOf, dispatcher, person, personKey string
	var gpus, proctors []string
	var seed, cpus int64
	var memory string
	var rerun, detach, wait bool
	cmd := &cobra.Command{
		Use:   "run --track T.toml --agent PROVIDER/MODEL[@EFFORT] --seed N [--detach | --wait] [--rerun | --rerun-of RUN]",
		Short: "Launch a sealed run and follow it",
		Long: `Run asks sealrund to run one seed of an agent on a track. The daemon checks every pin first (images,
exam, kit, validation set, scaffold, provider) and refuses with the mismatch named. It prints the run id,
then follows the run live: state changes and its end. Ctrl-C stops following; the run goes on
(sealrun cancel RUN ends it). --detach returns at once; --wait prints nothing until the end.

Exit status when following to the end: 0 graded, 3 failed (the agent's fault), 4 invalid (the
infrastructure's, or cancelled), 1 refused or error, 2 usage. Under --wait, stopping (Ctrl-C, SIGTERM)
before the run ends exits 1, never 0; a run already asked for still has its id printed.

For an outside scheduler (deploy/slurm/sealrun-seed.sbatch): --gpus pins the run to the GPUs the
scheduler allocated (CDI names among the daemon's [resources] gpus), --cpus and --memory are the
job's allocation (a track that needs more per run is refused), --dispatcher names the job
(an invalid end is then not rerun by the daemon: the resubmission is the rerun), and --rerun-of
links a resubmission to the invalid run it reruns, which may be another host's.

--agent human/HANDLE is a human run, on a track with [human]: a person instead of a scaffold, in
the same sealed controller under the same rules. The run waits for them (the track's human.start)
and its clock starts when they first attach: sealrun attach RUN. Only its person attaches: the
account named HANDLE, or the one --person names (with --person-key, the ssh key they log in
with, where people share one account); --proctor names who may watch it besides the operators.`,
		Example: `  sealrun run --track tracks/ari-v1.toml --agent openai/gpt-x@high --seed 1
  sealrun run --track ari-v1.toml --agent human/alice --seed 1 --detach   # then: sealrun attach RUN
  sealrun run --track ari-v1.toml --agent human/p7 --person p7 --proctor carol --seed 1 --detach
  sealrun run --track ari-v1.toml --agent openai/gpt-x@high --seed 3 --wait \
      --gpus nvidia.com/gpu=2 --dispatcher "slurm job 812_3" --rerun-of r-20261122-101500-a1b2c3`,
		Args: exactArgs(0, "no arguments (use --track, --agent, --seed)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if track == "" || agent == "" || !cmd.Flags().Changed("seed") {
				return usage(errors.New("give --track, --agent and --seed"))
			}
			if detach && wait {
				return usage(errors.New("--detach and --wait exclude each other"))
			}
			data, err := fileio.ReadLimited(track, "track file", 1<<20)
			if err != nil {
				return err
			}
			c := client.New(socket)
			req := api.RunRequest{Track: string(data), TrackName: track, Agent: agent, Seed: seed, Rerun: rerun, GPUs: gpus, RerunOf: rerunOf, Dispatcher: dispatcher, CPUs: cpus, Proctors: proctors}
			if person != "" || personKey != "" {
				if person == "" {
					return usage(errors.New("--person-key needs --person ACCOUNT: the account the person's ssh login uses"))
				}
				req.Person = &api.Person{Account: person, Key: personKey}
			}
			if err := req.CheckPeople(); err != nil {
				return usage(err)
			}
			if memory != "" {
				if req.Memory, err = policy.ParseBytes(memory); err != nil {
					return usage(fmt.Errorf("--memory %q: %v (for example 16GiB or 16384MiB)", memory, err))
				}
			}
			if err := cmd.Context().Err(); err != nil {
				return err // stopped before anything was asked of sealrund
			}
			// Once asked, the answer is read and the run's id printed even if a signal comes
			// meanwhile: a job a scheduler stops (Slurm's SIGTERM reaches every process of the
			// job) must learn the id of the run it started, to cancel it.
			post, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), time.Minute)
			defer cancel()
			rec, err := c.Submit(post, req)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s\n", rec.ID)
			if detach {
				return nil
			}
			return follow(cmd, c, rec.ID, !wait)
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().StringVar(&track, "track", "", "the track file")
	cmd.Flags().StringVar(&agent, "agent", "", "the agent: PROVIDER/MODEL[@EFFORT] (the provider is a table of the daemon's config)")
	cmd.Flags().Int64Var(&seed, "seed", 0, "the seed")
	cmd.Flags().BoolVar(&rerun, "rerun", false, "run a seed again that already has a run")
	cmd.Flags().BoolVar(&detach, "detach", false, "print the run id and return")
	cmd.Flags().BoolVar(&wait, "wait", false, "print nothing until the run ends; exit by its result")
	cmd.Flags().StringSliceVar(&gpus, "gpus", nil, "pin the run to these GPUs (CDI names, comma-separated): an outside scheduler's allocation")
	cmd.Flags().Int64Var(&cpus, "cpus", 0, "the scheduler's CPU allocation: refused if the track needs more per run")
	cmd.Flags().StringVar(&memory, "memory", "", "the scheduler's memory allocation (16GiB): refused if the track needs more per run")
	cmd.Flags().StringVar(&rerunOf, "rerun-of", "", "this run reruns that invalid run (of this host or another); implies --rerun")
	cmd.Flags().StringVar(&person, "person", "", "a human run's person: the account that attaches to it (default: the account named HANDLE in human/HANDLE)")
	cmd.Flags().StringVar(&personKey, "person-key", "", "with --person: the SHA256 fingerprint of the ssh key the person logs in with (ssh-keygen -lf), where people share the account")
	cmd.Flags().StringSliceVar(&proctors, "proctor", nil, "an account that may watch the human run read-only (repeat, or comma-separate; operators always may)")
	cmd.Flags().StringVar(&dispatcher, "dispatcher", "", `the outside scheduler's job that dispatched the run ("slurm job 812_3"); an invalid end is not rerun by the daemon`)
	return cmd
}

// follow streams a run's events until it ends (or Ctrl-C, which detaches).
func follow(cmd *cobra.Command, c *client.Client, id string, show bool) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	w := cmd.OutOrStdout()
	last, err := c.Events(ctx, id, func(e api.Event, last api.Record) {
		if line := client.EventLine(e, last); show && line != "" {
			fmt.Fprintln(w, line)
		}
	})
	if err != nil && ctx.Err() == nil {
		return err
	}
	if ctx.Err() != nil {
		if !show {
			// --wait promises an exit by the run's result: a script must never read 0 (graded)
			// for a run it stopped waiting for.
			return fmt.Errorf("stopped waiting before run %s ended; it goes on (sealrun show %s, sealrun cancel %s)", id, id, id)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "sealrun: stopped following; run %s goes on (sealrun logs %s -f, sealrun cancel %s)\n", id, id, id)
		return nil
	}
	if !last.Final() {
		return fmt.Errorf("the event stream of run %s ended before the run did (sealrund stopped?); sealrun show %s", id, id)
	}
	if !show {
		fmt.Fprintln(w, client.EventLine(api.Event{Time: last.Finished, Kind: api.EventState, State: last.State, Reason: last.Reason}, last))
	}
	fmt.Fprintf(w, "files: %s\n", last.Dir)
	return stateExit(last.State, last.Reason)
}

func newPsCmd() *cobra.Command {
	var socket string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "ps [-a] [--json]",
		Short: "List runs: id, track, agent, seed, state, time left, score",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			recs, err := client.New(socket).Runs(cmd.Context(), !all, 0)
			if err != nil {
				return err
			}
			if !all {
				kept := recs[:0]
				for _, r := range recs {
					if !r.Final() {
						kept = append(kept, r)
					}
				}
				recs = kept
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, recs)
			}
			return printRuns(w, recs, all)
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "finished runs too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON")
	return cmd
}

func newShowCmd() *cobra.Command {
	var socket string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN [--json]",
		Short: "Everything about one run, and the paths of its files",
		Args:  exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client.New(socket).Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, r)
			}
			printRun(w, &r)
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "End a run in any state; it ends invalid (reason: cancelled)",
		Args:  exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client.New(socket).Cancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: cancel requested (state %s); it ends invalid, reason cancelled\n", r.ID, r.State)
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	return cmd
}

func newLogsCmd() *cobra.Command {
	var socket, file string
	var followF bool
	var call int
	cmd := &cobra.Command{
		Use:   "logs RUN [-f] [--agent | --audit | --history | --journal | --call N]",
		Short: "A run's events, or one of its logs",
		Long: `Logs prints a run's journal events (default; -f follows until the run ends), or one of its
files: --agent the scaffold's transcript, --audit the audit log (every call, gateway request and
submission), --history the submission history, --call N one compute call's output.`,
		Args: exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client.New(socket)
			name := file
			if call > 0 {
				name = fmt.Sprintf("call-%d", call)
			}
			if name == "" && followF {
				return follow(cmd, c, args[0], true)
			}
			if name == "" {
				name = "journal"
			}
			data, err := c.File(cmd.Context(), args[0], name)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVarP(&followF, "follow", "f", false, "follow the run's events until it ends")
	cmd.Flags().IntVar(&call, "call", 0, "the output of compute call N")
	for _, f := range []struct{ flag, name, help string }{{"agent", "transcript", "the scaffold's transcript"}, {"audit", "audit", "the audit log"}, {"history", "history", "the submission history"}, {"journal", "journal", "the run's journal events"}} {
		f := f
		cmd.Flags().BoolFunc(f.flag, f.help, func(string) error { file = f.name; return nil })
	}
	return cmd
}

func newReportCmd() *cobra.Command {
	var socket string
	var open bool
	cmd := &cobra.Command{
		Use:   "report RUN [--open]",
		Short: "The run's report.html: timeline of calls and requests, validation scores, result",
		Args:  exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client.New(socket)
			r, err := c.Run(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !r.Final() {
				return fmt.Errorf("run %s is %s; its report is written when it ends (sealrun logs %s -f)", r.ID, r.State, r.ID)
			}
			path := r.Dir + "/report.html"
			if _, err := os.Stat(path); err != nil {
				// Not readable from here (another user's state directory): fetch it.
				data, err := c.File(cmd.Context(), r.ID, "report-html")
				if err != nil {
					return err
				}
				tmp, err := os.CreateTemp("", "sealrun-report-*.html")
				if err != nil {
					return err
				}
				tmp.Write(data)
				tmp.Close()
				path = tmp.Name()
			}
			fmt.Fprintln(cmd.OutOrStdout(), path)
			if open {
				return exec.Command("xdg-open", path).Start()
			}
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVar(&open, "open", false, "open it in the desktop's browser (xdg-open)")
	return cmd
}

// printRuns prints the runs as ps's table; all says finished runs were asked for too.
func printRuns(w io.Writer, recs []api.Record, all bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTRACK\tAGENT\tSEED\tSTATE\tTIME LEFT\tSCORE")
	for _, r := range recs {
		left, score := "-", "-"
		if r.State == api.StateRunning && !r.Deadline.IsZero() && r.Waiting == "" {
			left = time.Until(r.Deadline).Round(time.Second).String()
			if !r.Paused.IsZero() { // the clock stands still: what was left when the pause began
				left = r.Deadline.Sub(r.Paused).Round(time.Second).String() + " (paused)"
			}
		}
		if sc := r.Score(); sc != "" {
			score = sc
		}
		state := r.State
		if r.Reason != "" && r.State == api.StateInvalid {
			state += " (" + r.Reason + ")"
		}
		if r.Waiting != "" {
			state += " (" + r.Waiting + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Track, r.Agent, r.Seed, state, left, score)
	}
	if len(recs) == 0 && !all {
		fmt.Fprintln(tw, "(no run in progress; sealrun ps -a lists finished runs too)")
	}
	return tw.Flush()
}

// printRun prints everything about one run, and the paths of its files (show).
func printRun(w io.Writer, r *api.Record) {
	row := func(k, f string, a ...any) { fmt.Fprintf(w, "%-12s %s\n", k, fmt.Sprintf(f, a...)) }
	row("run", "%s", r.ID)
	row("track", "%s (%s)", r.Track, r.TrackID)
	row("agent", "%s, seed %d", r.Agent, r.Seed)
	row("launched", "%s by %s", r.Queued.Local().Format(time.RFC3339), r.User)
	state := r.State
	if r.Reason != "" {
		state += " — " + r.Reason
	}
	row("state", "%s", state)
	if r.Waiting != "" {
		row("waiting", "%s", r.Waiting)
	}
	if !r.Started.IsZero() {
		row("started", "%s (deadline %s)", r.Started.Local().Format(time.RFC3339), r.Deadline.Local().Format(time.RFC3339))
		if !r.Paused.IsZero() {
			row("paused", "since %s (sealrun resume %s ends the pause)", r.Paused.Local().Format(time.RFC3339), r.ID)
		}
	}
	if !r.Finished.IsZero() {
		row("finished", "%s", r.Finished.Local().Format(time.RFC3339))
	}
	if r.Passed != nil {
		row("score", "%d/%d passed", *r.Passed, r.Questions)
	} else if r.Metric != "" {
		row("score", "%s", r.Score())
	}
	if r.RerunOf != "" {
		row("rerun of", "%s", r.RerunOf)
	}
	if r.RerunBy != "" {
		row("rerun by", "%s", r.RerunBy)
	}
	if r.Dispatcher != "" {
		row("dispatched by", "%s", r.Dispatcher)
	}
	for _, a := range r.Amendments {
		link := ""
		if a.Link != "" {
			link = " (" + a.Link + ")"
		}
		row("amended", "%s %s: %s%s", a.Time.Local().Format(time.DateOnly), a.Action, a.Reason, link)
	}
	if len(r.GPUs) > 0 {
		row("GPUs asked", "%s", strings.Join(r.GPUs, ", "))
	}
	row("directory", "%s", r.Dir)
	for _, f := range []string{"result.att.json", "report.json", "summary.txt", "audit.jsonl", "history.jsonl", "transcript.log", "candidates/", "calls/"} {
		row("", "%s/%s", r.Dir, f)
	}
}
