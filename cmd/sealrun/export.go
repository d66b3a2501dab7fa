package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export --format atif RUNDIR...|RESULTS_DIR --out DIR",
		Short: "Write runs as ATIF trajectories, for the tools readers already use",
		Long: `Export writes each run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, read
by Harbor's viewer, Transluce's Docent, Inspect Scout and Arize Phoenix): DIR/<run id>/trajectory.json.
It is derived from the run's transcript.json alone: what each model request added as system and
user steps (a tool's result as the observation of the agent step that called it), each model
answer as an agent step with its reasoning, tool calls, tokens and cost, each compute call,
submission, score and clock event as a system step whose extra.sealrun says what it was; the
run's totals as final_metrics. Nothing the transcript does not show is in it: a body the operator
withheld is withheld there too.

Each file names what it was derived from (extra.sealrun: the run, transcript.json's SHA-256, the
attested audit head, this sealrun's version): a reader who holds the run checks it with
sealrun verify RUNDIR/result.att.json --key PUB --transcript RUNDIR --export FILE, which
recomputes it and compares byte for byte. docs/TRANSCRIPT.md, "Reading runs with other tools",
has the mapping and what ATIF cannot carry.

Arguments are run directories (as the daemon keeps them, gathered or published) or directories
of them (a results directory, a publication). Exit status: 0 written, 2 usage or I/O error.`,
		Example: `  sealrun export --format atif /shared/results --out atif/
  sealrun export --format atif site/runs/r-20261126-101500-a1b2c3 --out /tmp/one`,
		Args: minArgs(1, "one or more run directories, or directories of them"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "atif" {
				return usage(fmt.Errorf("--format %q: this sealrun exports atif", format))
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
			for _, d := range dirs {
				t0 := time.Now()
				tj, t, err := export.Load(d)
				if err != nil {
					return ioError(err)
				}
				if !attest.ValidRunID(t.Run.ID) {
					return ioError(fmt.Errorf("%s: run id %q cannot name a directory", d, t.Run.ID))
				}
				b, err := export.ATIF(t, export.SourceOf(tj, t, version))
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
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "atif", "the format to write: atif")
	cmd.Flags().StringVar(&out, "out", "", "the directory to write into (DIR/<run id>/trajectory.json)")
	return cmd
}

// exportVerdict is what --export found.
type exportVerdict struct {
	File             string `json:"file"`
	Format           string `json:"format"`
	TranscriptSHA256 string `json:"transcript_sha256"`
	Version          string `json:"sealrun_version"`
}

// checkExport recomputes the export in file from the run directory dir (whose transcript was
// checked against the attestation of run).
func checkExport(file, dir, run string) (*exportVerdict, error) {
	b, err := fileio.ReadLimited(file, "export", 1<<30)
	if err != nil {
		return nil, ioError(err)
	}
	ex, err := export.Recompute(b, dir)
	if err != nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonExport, Detail: fmt.Sprintf("%s: %v", file, err)}
	}
	if ex.Run != run {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonExport, Detail: fmt.Sprintf("%s: an export of run %s, not of %s", file, ex.Run, run)}
	}
	return &exportVerdict{File: file, Format: ex.Format, TranscriptSHA256: ex.TranscriptSHA256, Version: ex.Version}, nil
}
