package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sealrun/sealrun/policy"
	"github.com/spf13/cobra"
)

func newTrackCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "track",
		Short: "Validate, identify and summarise track files (frozen rule sets)",
		Long: `A track is the frozen rule set a sealed run is judged under: budgets, limits, the exam hash,
image digests, the kit hash, the scaffold pin and the seeds an official row needs. Any change
that could move a score is a new track. See README.md, "Tracks", for the file format.`,
		Args: exactArgs(0, "a subcommand: validate, id, show or pin"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: validate, id, show or pin"))
		},
	}
	cmd.AddCommand(newTrackValidateCmd(), newTrackIDCmd(), newTrackShowCmd(), newTrackPinCmd(g))
	return cmd
}

// reportProblems prints every problem of an invalid track and returns the exit error for it.
func reportProblems(w io.Writer, err error) error {
	var it *policy.InvalidTrackError
	if !errors.As(err, &it) {
		return invalid(err)
	}
	fmt.Fprintln(w, it.Error())
	return &exitError{code: exitInvalid, err: err, quiet: true}
}

func newTrackValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate TRACK.toml...",
		Short: "Check track files; print every problem with file:table.key and the fix",
		Example: `  sealrun track validate tracks/ari-v1.toml
  sealrun track validate tracks/*.toml`,
		Args: minArgs(1, "one or more track files"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed int
			for _, path := range args {
				t, err := policy.Load(path)
				if err != nil {
					failed++
					var it *policy.InvalidTrackError
					if errors.As(err, &it) {
						fmt.Fprintln(cmd.ErrOrStderr(), it.Error())
						if len(it.Problems) > 1 {
							fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d problems\n", path, len(it.Problems))
						}
						continue
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", path, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (track %s version %s, %s, id %s)\n", path, t.Name, t.Version, t.Status, t.ID)
			}
			if failed > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d of %d track files invalid", failed, len(args)), quiet: true}
			}
			return nil
		},
	}
}

func newTrackIDCmd() *cobra.Command {
	var canonical bool
	cmd := &cobra.Command{
		Use:   "id TRACK.toml",
		Short: "Print the track id: SHA-256 (hex) of the track's RFC 8785 canonical JSON",
		Long: `Print the track id: the lowercase hex SHA-256 of the RFC 8785 (JCS) canonical JSON of the
track file's data. Comments, key order and whitespace do not change it; any value change does.
With --canonical, print the canonical JSON itself, so that anyone can recompute the id:

  sealrun track id --canonical tracks/ari-v1.toml | sha256sum`,
		Args: exactArgs(1, "one track file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := policy.Load(args[0])
			if err != nil {
				return reportProblems(cmd.ErrOrStderr(), err)
			}
			if canonical {
				_, err = cmd.OutOrStdout().Write(t.Canonical())
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&canonical, "canonical", false, "print the canonical JSON (no trailing newline) instead of its hash")
	return cmd
}

func newTrackShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show TRACK.toml",
		Short: "Print a human summary of a track: budgets, limits, pins, status",
		Args:  exactArgs(1, "one track file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := policy.Load(args[0])
			if err != nil {
				return reportProblems(cmd.ErrOrStderr(), err)
			}
			writeTrackSummary(cmd.OutOrStdout(), t)
			return nil
		},
	}
}

func writeTrackSummary(out io.Writer, t *policy.Track) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	b := t.Budget
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("track", "%s version %s", t.Name, t.Version)
	switch t.Status {
	case policy.StatusActive:
		row("status", "active: takes new runs")
	case policy.StatusLegacy:
		row("status", "legacy: takes no new runs; its results verify and are labelled legacy")
	case policy.StatusWithdrawn:
		row("status", "withdrawn: takes no new runs; its results verify but must not be ranked")
	}
	row("id", "%s", t.ID)
	if t.Supersedes == "" {
		row("supersedes", "nothing")
	} else {
		row("supersedes", "%s", t.Supersedes)
	}
	row("wall", "%s from start to deadline", shortDuration(b.Wall))
	row("call limit", "%s per runner call, and never past the reserve start", shortDuration(b.CallLimit))
	row("reserve", "last %s: no new compute after %s; submit, promote, finalize still work", shortDuration(b.Reserve), shortDuration(b.Wall-b.Reserve))
	if t.Task != nil {
		row("grading", "%s for the task's evaluate.py on the promoted submission", shortDuration(b.Grading))
	} else {
		row("grading", "%s to grade the promoted bundle on the hidden exam (both phases)", shortDuration(b.Grading))
		row("question limit", "%s per answer; over it the question fails", shortDuration(b.QuestionLimit))
	}
	row("artifact", "at most %s gzipped (%d bytes), size recomputed by sealrun", policy.FormatBytes(t.Artifact.MaxGzipBytes), t.Artifact.MaxGzipBytes)
	if t.Task != nil {
		row("task", "%s (%s task directory; sealrun task show DIR)", t.Task.Name, t.Task.Kind)
		row("task sha256", "%s", t.Task.SHA256)
		row("data sha256", "%s (the raw data directory)", t.Task.DataSHA256)
	} else {
		row("exam", "%d questions, up to %d bytes of context each", t.Exam.Questions, t.Exam.ContextBytes)
		row("exam sha256", "%s", t.Exam.SHA256)
		row("validation sha256", "%s", t.Exam.ValidationSHA256)
		row("kit sha256", "%s", t.Kit.SHA256)
	}
	row("controller image", "%s", t.Images.Controller)
	row("runner image", "%s", t.Images.Runner)
	if t.Task != nil {
		row("grader image", "%s (the task's evaluation image)", t.Images.Grader)
	} else {
		row("grader image", "%s", t.Images.Grader)
	}
	row("scaffold", "%s %s, config sha256 %s", t.Scaffold.Name, t.Scaffold.Version, t.Scaffold.ConfigSHA256)
	row("seeds", "%d valid seeds for an official row; fewer is provisional", t.Seeds.Required)
	gpus := fmt.Sprintf("%d GPUs", t.Resources.GPUs)
	if t.Resources.GPUs == 1 {
		gpus = "1 GPU"
	} else if t.Resources.GPUs == 0 {
		gpus = "no GPU"
	}
	row("resources", "%s, %d CPUs, %s memory, %s workspace", gpus, t.Resources.CPUs, policy.FormatBytes(t.Resources.Memory), policy.FormatBytes(t.Resources.Workspace))
	w.Flush()
}

// shortDuration prints 1h instead of 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
