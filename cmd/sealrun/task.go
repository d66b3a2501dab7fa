package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/airs"
)

func newTaskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Validate and summarise AIRS-Bench task directories",
		Long: `An AIRS-Bench task is a directory: metadata.yaml, project_description.md, prepare.py,
evaluate_prepare.py, evaluate.py and optionally utils.py and other modules (the AIRS-Bench paper,
section 4.3; github.com/facebookresearch/airs-bench, airsbench/tasks/rad/). Upstream's task
directories are taken unchanged. sealrun runs such tasks sealed: see airs/TASKS.md.`,
		Args: exactArgs(0, "a subcommand: validate, show or requirements"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: validate, show or requirements"))
		},
	}
	cmd.AddCommand(newTaskValidateCmd(), newTaskShowCmd(), newTaskRequirementsCmd())
	return cmd
}

// openTask opens a task directory, printing every problem of an invalid one.
func openTask(w io.Writer, dir string) (*airs.Task, error) {
	t, err := airs.Open(dir)
	if err != nil {
		var te *airs.Error
		if errors.As(err, &te) {
			for _, p := range te.Problems {
				fmt.Fprintln(w, p)
			}
			fmt.Fprintf(w, "%s: %d problem(s)\n", dir, len(te.Problems))
			return nil, err
		}
		fmt.Fprintf(w, "%s: %v\n", dir, err)
		return nil, err
	}
	return t, nil
}

func newTaskRequirementsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "requirements DIR",
		Short: "Say how to make the images a task needs: the Debian packages that meet its requirements, and what needs pip",
		Long: `Requirements reads the task's requirement lists and prints, for the evaluation image (the
track's images.grader: prepare.py, evaluate_prepare.py and evaluate.py run there) and the runner
image (the agent's compute), the Debian bookworm packages that provide each requirement and every
requirement Debian has no package for (datasets, torchmetrics, rouge-score …): those need pip, in
an image built where an index is reachable, then brought here with sealrun images import or
sealrun images pull. It ends with a Containerfile recipe for each image. A requirement pinned to
an exact version (datasets==4.0.0) is met by Debian's version, which may differ: said per line.`,
		Example: `  sealrun task requirements airs-bench/airsbench/tasks/rad/MathQuestionAnsweringSVAMPAccuracy`,
		Args:    exactArgs(1, "one task directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTask(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err, quiet: true}
			}
			out := cmd.OutOrStdout()
			m := &t.Meta
			for _, img := range []struct {
				name  string
				lists [][]string
			}{{"evaluation image (images.grader)", [][]string{m.EvaluateContainerPythonRequirements, m.PrepareCodePythonRequirements}},
				{"runner image (images.runner)", [][]string{m.ContainerPythonRequirements}}} {
				if err := printImagePlan(out, img.name, img.lists...); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "Build each with buildah or docker where the package indexes are reachable, push it to your registry, then\n  sealrun images pull REF    (or: sealrun images import OCI-DIR)\nand pin its digest in the task track's [images]. A run refuses to start while a pinned image lacks a requirement.\n")
			return nil
		},
	}
}

// printImagePlan says how one image meets the requirement lists: the Debian package of each
// requirement or that it needs pip, then a Containerfile recipe.
func printImagePlan(out io.Writer, name string, lists ...[]string) error {
	plan, err := airs.PlanDebian(lists...)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s:\n", name)
	var reqs []string
	for _, l := range lists {
		reqs = append(reqs, l...)
	}
	if len(reqs) == 0 {
		fmt.Fprintf(out, "  no requirements: python3 alone\n")
	}
	unmet := map[string]bool{}
	for _, r := range plan.Unmet {
		unmet[r.Key] = true
	}
	printed := map[string]bool{}
	for _, s := range reqs {
		r, _ := airs.ParseRequirement(s)
		if printed[s] {
			continue
		}
		printed[s] = true
		switch {
		case unmet[r.Key]:
			fmt.Fprintf(out, "  %-28s not in Debian: pip install %q in an image built elsewhere\n", s, s)
		case r.Spec != "":
			fmt.Fprintf(out, "  %-28s Debian %s (bookworm's version, not necessarily %s)\n", s, airs.DebianPackages[r.Key], r.Spec)
		default:
			fmt.Fprintf(out, "  %-28s Debian %s\n", s, airs.DebianPackages[r.Key])
		}
	}
	fmt.Fprintf(out, "  recipe:\n    FROM debian:bookworm-slim\n    RUN apt-get update && apt-get install -y --no-install-recommends %s && rm -rf /var/lib/apt/lists/*\n", strings.Join(plan.Packages, " "))
	if len(plan.Unmet) > 0 {
		var pip []string
		for _, r := range plan.Unmet {
			pip = append(pip, fmt.Sprintf("%q", r.Name+r.Spec))
		}
		fmt.Fprintf(out, "    RUN apt-get update && apt-get install -y --no-install-recommends python3-pip && pip install --break-system-packages %s\n", strings.Join(pip, " "))
	}
	fmt.Fprintln(out)
	return nil
}

func newTaskValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate DIR...",
		Short: "Check task directories: every metadata field and its type, the files present; print every problem",
		Long: `Validate checks each task directory: the files the format requires are present (regular files
only: a symlink, device or socket is refused by name), metadata.yaml parses (a real YAML parser)
and every field has its type, the required ones are there, the globs are clean relative
patterns, and the scores are ordered as metric_lower_is_better says (worst, SOTA, optimum, the
SOTA short of the optimum). Fields this version does not know and files the format does not name
are kept and reported as notes, never dropped. Exit 1 when any directory has a problem.`,
		Example: `  sealrun task validate tasks/digits
  sealrun task validate tasks/*`,
		Args: minArgs(1, "one or more task directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := 0
			for _, dir := range args {
				t, err := openTask(cmd.ErrOrStderr(), dir)
				if err != nil {
					failed++
					continue
				}
				for _, n := range t.Notes {
					fmt.Fprintln(cmd.ErrOrStderr(), "note: "+n)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (task %s, %d files, hash %s)\n", dir, t.Meta.Info.Name, len(t.Files), t.Hash)
			}
			if failed > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d of %d task directories invalid", failed, len(args)), quiet: true}
			}
			return nil
		},
	}
}

func newTaskShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show DIR",
		Short: "Summarise a task: problem, dataset, metric, direction, SOTA, worst and optimal scores, files, hash",
		Example: `  sealrun task show tasks/digits
  sealrun task show --json tasks/digits`,
		Args: exactArgs(1, "one task directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTask(cmd.ErrOrStderr(), args[0])
			if err != nil {
				return &exitError{code: exitInvalid, err: err, quiet: true}
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printJSON(w, map[string]any{"dir": t.Dir, "hash": t.Hash, "metadata": t.Meta, "files": t.Files, "notes": t.Notes})
			}
			showTask(w, t)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the parsed metadata, files and hash as JSON")
	return cmd
}

func showTask(w io.Writer, t *airs.Task) {
	m, in := t.Meta, t.Meta.Info
	dir := "higher is better"
	if m.MetricLowerIsBetter {
		dir = "lower is better"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s\t%s\n", k, v)
		}
	}
	row("task", in.Name)
	row("category", in.Category)
	row("research problem", in.ResearchProblem)
	row("dataset", strings.TrimSpace(in.Dataset+" "+paren(in.Config)))
	row("splits", fmt.Sprintf("train %q, test %q", in.TrainSplit, in.TestSplit))
	row("input columns", strings.Join(in.InputColumns, ", "))
	row("scoring column", strings.Join(in.ScoringColumns, ", "))
	if len(in.Shape) > 0 {
		dims := make([]string, len(in.Shape))
		for i, d := range in.Shape {
			dims[i] = fmt.Sprint(d)
		}
		row("shape", "("+strings.Join(dims, ", ")+")")
	}
	row("metric", fmt.Sprintf("%s (%s)", in.Metric, dir))
	sota := fmt.Sprintf("%g", in.SOTA.Score)
	if in.SOTA.PaperTitle != "" {
		sota += " — " + strings.Join(nonEmpty(in.SOTA.PaperTitle, in.SOTA.Venue, yearOf(in.SOTA.Year)), ", ")
	}
	row("SOTA", sota)
	row("SOTA paper", in.SOTA.PaperURL)
	if in.EstimatedWorstScore != nil {
		row("worst (estimated)", fmt.Sprintf("%g (shown only: the leaderboard's s_min is the worst observed run)", *in.EstimatedWorstScore))
	}
	opt := fmt.Sprintf("%g (the direction's, as the published analysis takes it)", airs.DirectionOptimum(m.MetricLowerIsBetter))
	if in.OptimalScore != nil && *in.OptimalScore != airs.DirectionOptimum(m.MetricLowerIsBetter) {
		opt += fmt.Sprintf("; the task says optimal_score %g", *in.OptimalScore)
	}
	row("optimum", opt)
	row("submission", strings.Join(m.FileExportGlobs, ", "))
	row("agent requirements", strings.Join(m.ContainerPythonRequirements, ", "))
	row("evaluation requirements", strings.Join(m.EvaluateContainerPythonRequirements, ", "))
	if len(m.PrepareCodePythonRequirements) > 0 {
		row("preparation requirements", strings.Join(m.PrepareCodePythonRequirements, ", "))
	}
	row("files", fmt.Sprintf("%d (%s)", len(t.Files), strings.Join(filePaths(t.Files), ", ")))
	row("hash", string(t.Hash))
	tw.Flush()
	for _, n := range t.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(config " + s + ")"
}

func yearOf(y int) string {
	if y == 0 {
		return ""
	}
	return fmt.Sprint(y)
}

func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

func filePaths(fs []airs.File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}
