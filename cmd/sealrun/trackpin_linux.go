package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/sealrun/sealrun/trackpin"
	"github.com/spf13/cobra"
)

func newTrackPinCmd(g *globals) *cobra.Command {
	var (
		out string
		p   trackpin.Pins
	)
	cmd := &cobra.Command{
		Use:   "pin TRACK.toml --out PINNED.toml [--exam EXAM] [--kit KITDIR] [--task DIR] [--task-data DIR] [--controller REF] [--runner REF] [--grader REF] [--lock images.lock]",
		Short: "Fill a track's pins from what this host holds (content store, kits, image store); print the new track id",
		Long: `Pin writes a copy of TRACK.toml with its pins filled from this host's stores, keeping the file's
comments and layout, then checks it and prints the new track id. Each value must already be on
this host, so a pinned track is one this host can run:

  --exam EXAM        the hidden exam file (or its sha256), added with sealrun content add:
                     exam.sha256, exam.questions, exam.context_bytes
  --kit KITDIR       a built kit (or its kit hash), added with sealrun content add:
                     kit.sha256 and exam.validation_sha256 (the kit's validation set)
  --task DIR         an AIRS task directory (or its tree hash), added with sealrun content add:
                     task.sha256 and task.name
  --task-data DIR    the task's raw data directory (or its tree hash): task.data_sha256
  --controller REF   the controller image: images.controller, and [scaffold] from its
                     dev.sealrun.scaffold.* labels
  --runner REF       the runner image (on a GPU host: a CUDA PyTorch image pinned by digest)
  --grader REF       the grader image

An image REF is name@sha256:<hex>, or a name in the --lock file (what sealrun images pin --lock
and images build-local write); it must be in the image store (sealrun images pull|import).
Pins not given keep their values. Pin refuses to write a track that still holds a placeholder
and names each with the flag that fills it. The track id changes with every pin: publish results
under the id printed.`,
		Example: `  sealrun content add exam.jsonl kit/
  sealrun images pin registry.example/lab/pytorch-cuda:2.5 --lock images.lock
  sealrun images pull registry.example/lab/pytorch-cuda@sha256:...
  sealrun track pin tracks/ari-v1.toml --out /etc/sealrun/tracks/ari-v1.toml \
      --exam exam.jsonl --kit kit/ --lock images.lock \
      --controller controller-opencode --runner registry.example/lab/pytorch-cuda:2.5 --grader python`,
		Args: exactArgs(1, "one track file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("--out is required: the pinned track's path (it may be TRACK.toml itself)"))
			}
			return pinTrack(cmd, g.stateDir, args[0], out, p)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "write the pinned track here (atomically)")
	fl.StringVar(&p.Lock, "lock", "", "images.lock to look image names up in")
	fl.StringVar(&p.Exam, "exam", "", "hidden exam file or its sha256 (in the content store)")
	fl.StringVar(&p.Kit, "kit", "", "built kit directory or its kit hash (installed)")
	fl.StringVar(&p.Task, "task", "", "AIRS task directory or its tree hash (in the content store)")
	fl.StringVar(&p.TaskData, "task-data", "", "AIRS raw data directory or its tree hash (in the content store)")
	fl.StringVar(&p.Controller, "controller", "", "controller image: name@sha256:<hex> or a --lock name")
	fl.StringVar(&p.Runner, "runner", "", "runner image: name@sha256:<hex> or a --lock name")
	fl.StringVar(&p.Grader, "grader", "", "grader image: name@sha256:<hex> or a --lock name")
	return cmd
}

func pinTrack(cmd *cobra.Command, state, path, out string, p trackpin.Pins) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("track %s: %w", path, errors.Unwrap(err))
	}
	pinned, err := trackpin.Pin(state, path, data, out, p)
	var ue *trackpin.UsageError
	switch {
	case errors.As(err, &ue):
		return usage(ue.Err)
	case err != nil:
		return reportProblems(cmd.ErrOrStderr(), err)
	}
	if err := pinned.WriteFile(out); err != nil {
		return ioError(err)
	}
	w := cmd.OutOrStdout()
	for _, c := range pinned.Changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	if pinned.Was.ID == pinned.Track.ID {
		fmt.Fprintf(w, "%s: track id %s (unchanged: every pin already held these values)\n", out, pinned.Track.ID)
	} else {
		fmt.Fprintf(w, "%s: track id %s (was %s)\n", out, pinned.Track.ID, pinned.Was.ID)
	}
	return nil
}
