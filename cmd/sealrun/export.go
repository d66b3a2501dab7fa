package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	var format, out string
	var evalZip bool
	cmd := &cobra.Command{
		Use:   "export --format atif|inspect [--eval] RUNDIR...|RESULTS_DIR --out DIR",
		Short: "Write runs as ATIF trajectories or Inspect eval logs, for the tools readers already use",
		Long: `Export writes runs in the formats readers' own tools open:

  --format atif     each run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format,
                    read by Harbor's viewer, Transluce's Docent, Inspect Scout and Arize Phoenix):
                    DIR/<run id>/trajectory.json
  --format inspect  the runs as Inspect eval logs (EvalLog, log format version 2, JSON; read by
                    inspect view, Docent, Vivaria and Hawk): one log per track and agent,
                    DIR/<track>-<agent>.json, one sample per run (the track its id, the seed its
                    epoch, the hidden exam's percent or the task's metric its score; an invalid
                    run a sample with an error and no score); with --eval, in Inspect's .eval
                    form instead (DIR/<track>-<agent>.eval: a zip of header.json, the samples
                    and their summaries, as Inspect writes it; an invalid run and its rerun,
                    one seed, are one sample there: the rerun)

It is derived from the run's transcript.json alone: what each model request added as system and
user steps (a tool's result as the observation of the agent step that called it), each model
answer as an agent step with its reasoning, tool calls, tokens and cost, each compute call,
submission, score and clock event as a system step whose extra.sealrun says what it was; the
run's totals as final_metrics. Nothing the transcript does not show is in it: a body the operator
withheld is withheld there too.

Each file names what it was derived from (ATIF's extra.sealrun, each Inspect sample's
metadata.sealrun: the run, transcript.json's SHA-256, the
attested audit head, this sealrun's version): a reader who holds the run checks it with
sealrun verify RUNDIR/result.att.json --key PUB --transcript RUNDIR --export FILE, which
recomputes it and compares byte for byte. docs/TRANSCRIPT.md, "Reading runs with other tools",
has the mapping and what ATIF cannot carry.

Arguments are run directories (as the daemon keeps them, gathered or published) or directories
of them (a results directory, a publication). Exit status: 0 written, 2 usage or I/O error.`,
		Example: `  sealrun export --format atif /shared/results --out atif/
  sealrun export --format inspect /srv/www/ari-v1-2026-11 --out logs/ && inspect view --log-dir logs/
  sealrun export --format inspect --eval results/ --out logs/
  sealrun export --format atif site/runs/r-20261126-101500-a1b2c3 --out /tmp/one`,
		Args: minArgs(1, "one or more run directories, or directories of them"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "atif" && format != "inspect" {
				return usage(fmt.Errorf("--format %q: give atif or inspect", format))
			}
			if evalZip && format != "inspect" {
				return usage(fmt.Errorf("--eval is Inspect's .eval form: give it with --format inspect"))
			}
			if out == "" {
				return usage(fmt.Errorf("give the directory to write into with --out"))
			}
			dirs, err := export.FindRuns(args)
			if err != nil {
				return ioError(err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return ioError(err)
			}
			groups := map[string][]export.Run{}
			var order []string
			for _, d := range dirs {
				t0 := time.Now()
				tj, t, err := export.Load(d)
				if err != nil {
					return ioError(err)
				}
				if !attest.ValidRunID(t.Run.ID) {
					return ioError(fmt.Errorf("%s: run id %q cannot name a directory", d, t.Run.ID))
				}
				src := export.SourceOf(tj, t, version)
				if format == "inspect" {
					k := export.InspectGroup(t)
					if _, ok := groups[k]; !ok {
						order = append(order, k)
					}
					groups[k] = append(groups[k], export.Run{T: t, Src: src})
					continue
				}
				b, err := export.ATIF(t, src)
				if err != nil {
					return ioError(err)
				}
				dst := filepath.Join(out, t.Run.ID, "trajectory.json")
				if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
					return ioError(err)
				}
				if err := fileio.WriteFile(dst, b, 0o644); err != nil {
					return ioError(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d bytes from %s (%d events) in %s\n", dst, len(b), filepath.Join(d, export.TranscriptFile), len(t.Events), time.Since(t0).Round(time.Millisecond))
			}
			names := map[string]bool{}
			for _, k := range order {
				t0 := time.Now()
				runs := groups[k]
				write, ext := export.Inspect, ".json"
				if evalZip {
					write, ext = export.InspectEval, ".eval"
				}
				b, err := write(runs)
				if err != nil {
					return ioError(err)
				}
				base := strings.TrimSuffix(export.InspectName(runs[0].T), ".json")
				name := base + ext
				for i := 2; names[name]; i++ { // two scaffolds of one track and agent
					name = base + fmt.Sprintf("-%d", i) + ext
				}
				names[name] = true
				dst := filepath.Join(out, name)
				if err := fileio.WriteFile(dst, b, 0o644); err != nil {
					return ioError(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d bytes, %d runs of %s by %s in %s\n", dst, len(b), len(runs), runs[0].T.Run.Track, runs[0].T.Run.Agent, time.Since(t0).Round(time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "atif", "the format to write: atif or inspect")
	cmd.Flags().StringVar(&out, "out", "", "the directory to write into")
	cmd.Flags().BoolVar(&evalZip, "eval", false, "with --format inspect: write Inspect's .eval form (a zip) instead of .json")
	return cmd
}
