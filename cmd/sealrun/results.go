package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
)

func newResultsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "results",
		Short: "Gather finished runs into a shared results directory, and say what a seed there needs",
		Long: `A results directory is where runs of many hosts meet (a Slurm cluster's shared filesystem): one
directory per run, named by its run id, holding its attestation, report, audit log, track file,
graded bundle and record. sealrun leaderboard reads it.`,
		Args: exactArgs(0, "a subcommand: gather or seed"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: gather or seed"))
		},
	}
	cmd.AddCommand(newResultsGatherCmd(), newResultsSeedCmd())
	return cmd
}

func newResultsGatherCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "gather RUN DIR",
		Short: "Copy a finished run's files from sealrund into DIR/RUN, atomically and once",
		Long: `Gather copies a finished run's attestation, report, audit log, track file, summary, report.html,
graded bundle (checked against its digest), record, its trajectory — every body its audit log
hashes (each model request and response under gateway/, each call's output under calls/),
checked against those hashes — and its transcript.json and transcript.html (made there from the
same files when the daemon wrote none) into DIR/RUN. The files are written into a
hidden temporary directory, synced, and renamed into place: a gather cut short leaves nothing
the leaderboard reads, and the next one removes it. Gathering a run again is a no-op when DIR/RUN
holds the same attestation, and an error when it holds another.`,
		Example: `  sealrun results gather r-20261122-101500-a1b2c3 /shared/results`,
		Args:    exactArgs(2, "the run id and the results directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, dir := args[0], args[1]
			if !attest.ValidRunID(id) {
				return usage(fmt.Errorf("%q is not a run id (sealrun ps lists them)", id))
			}
			c := client.New(socket)
			rec, err := c.Run(cmd.Context(), id)
			if err != nil {
				return err
			}
			if !rec.Final() {
				return fmt.Errorf("run %s is %s; gather it once it has ended (sealrun run --wait)", id, rec.State)
			}
			done, err := c.Gather(cmd.Context(), rec, dir)
			if err != nil {
				return err
			}
			if done {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: already gathered, the same attestation\n", filepath.Join(dir, id))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", filepath.Join(dir, id))
			}
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	return cmd
}

func newResultsSeedCmd() *cobra.Command {
	var track, agent string
	var seed int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "seed DIR --track T.toml --agent PROVIDER/MODEL[@EFFORT] --seed N",
		Short: "Say what a results directory holds for one seed: none, graded RUN, failed RUN or invalid RUN",
		Long: `Seed reads the records of the runs gathered in DIR and prints one line for a seed of an agent on a
track (the track file's id):

  none           no run of it was gathered: run it
  graded RUN     it has a valid result: nothing to do (a requeued job stops here)
  failed RUN     likewise; a failed run is the agent's, and counts
  invalid RUN    only invalid runs: rerun it with --rerun-of RUN (the latest invalid run that
                 no gathered run reruns)`,
		Example: `  sealrun results seed /shared/results --track tracks/ari-v1.toml --agent openai/gpt-x@high --seed 3`,
		Args:    exactArgs(1, "the results directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if track == "" || agent == "" || !cmd.Flags().Changed("seed") {
				return usage(errors.New("give --track, --agent and --seed"))
			}
			data, err := fileio.ReadLimited(track, "track file", 1<<20)
			if err != nil {
				return err
			}
			t, err := policy.Parse(track, data)
			if err != nil {
				return err
			}
			s, err := client.ReadSeedState(args[0], t.ID, agent, seed)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", s.State, s.Run)
			return nil
		},
	}
	cmd.Flags().StringVar(&track, "track", "", "the track file")
	cmd.Flags().StringVar(&agent, "agent", "", "the agent: PROVIDER/MODEL[@EFFORT]")
	cmd.Flags().Int64Var(&seed, "seed", 0, "the seed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON: state, run, runs")
	return cmd
}
