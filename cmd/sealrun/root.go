package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "sealrun",
		Short: "Sealed, reproducible benchmark runs of ML-engineering agents, with signed results",
		Long: `sealrun runs sealed benchmark runs of autonomous ML-engineering agents on a GPU host and
publishes results anyone can verify offline.

A track is the frozen rule set a run is judged under (budgets, limits, exam hash, image digests).
Start with:
  sealrun track validate tracks/ari-v1.toml
  sealrun track show tracks/ari-v1.toml`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a verb, print help and exit 2: nothing was done.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usage(fmt.Errorf("unknown command %q", args[0]))
			}
			_ = cmd.Help()
			return &exitError{code: exitUsage, err: errors.New("no command given"), quiet: true}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// sealrun completion bash|zsh|fish|powershell: cobra's, for the shell the operator uses.
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usage(err) })
	g := &globals{}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "/var/lib/sealrun", "sealrun's state directory (image store, runs); tests and users can isolate with it")
	// images, sandbox, doctor, grade and regrade are Linux only; elsewhere they say so (root_other.go).
	root.AddCommand(newTrackCmd(g), newExamCmd(), newImagesCmd(g), newSandboxCmd(g), newDoctorCmd(g), newGradeCmd(g), newRegradeCmd(g), newLeaderboardCmd(), newRunCmd(), newPsCmd(), newContentCmd(g), newShowCmd(), newCancelCmd(), newLogsCmd(), newReportCmd(), newKeysCmd(), newVerifyCmd(), newAttestCmd(), newVersionCmd(), newDemoCmd(g), newKitCmd(), newTaskCmd(), newResultsCmd(), newLedgerCmd(g), newWitnessCmd(), newPublishCmd(), newVerifyPublicationCmd(), newTranscriptCmd(), newViewCmd(), newExportCmd(), newAttachCmd(), newPauseCmd(), newResumeCmd(), newAmendCmd(), newTPMCmd(),
		newDocsCmd(func() *cobra.Command { return newRootCmd(stdout, stderr) }))
	defaultToInvalid(root)
	return root
}

// defaultToInvalid makes every error a verb returns without an exit code an input error (exit 1);
// errors cobra itself returns (flags, arguments) stay usage errors (exit 2).
func defaultToInvalid(c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := f(cmd, args)
			var ee *exitError
			if err != nil && !errors.As(err, &ee) {
				return invalid(err)
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		defaultToInvalid(sub)
	}
}

// exactArgs is cobra.ExactArgs with a message that names the missing operand.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usage(fmt.Errorf("expected %s, got %d argument(s)", what, len(args)))
		}
		return nil
	}
}

// minArgs requires at least n arguments.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usage(fmt.Errorf("expected %s", what))
		}
		return nil
	}
}

// globals are the flags every verb sees.
type globals struct {
	stateDir string
}
