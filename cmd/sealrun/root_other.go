//go:build !linux

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// On macOS and Windows sealrun is a verifier: verify, attest, track, exam, keys (and the
// leaderboard) work; the verbs that run containers or manage the image store say "Linux only".

func runHookIfRequested() {}

func linuxOnly(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Short:              short + " (Linux only)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("sealrun %s is Linux only: it drives runc, cgroups and network namespaces on the GPU host. On this machine, verify results with sealrun verify", use)
		},
	}
}

func newImagesCmd(*globals) *cobra.Command {
	return linuxOnly("images", "Pin, pull, import, verify and build container images")
}

func newSandboxCmd(*globals) *cobra.Command {
	return linuxOnly("sandbox", "Container specs, probes and one-off sandboxed commands")
}

func newDoctorCmd(*globals) *cobra.Command {
	return linuxOnly("doctor", "Check that this host can run sealed runs")
}

func newGradeCmd(*globals) *cobra.Command {
	return linuxOnly("grade", "Grade a bundle on an exam exactly as a run does")
}

func newRegradeCmd(*globals) *cobra.Command {
	return linuxOnly("regrade", "Regrade an attested bundle and compare its pass vector")
}

func newDemoCmd(*globals) *cobra.Command {
	return linuxOnly("demo", "A whole sealed benchmark on this machine")
}

func newTrackPinCmd(*globals) *cobra.Command {
	return linuxOnly("pin", "Fill a track's pins from what this host holds")
}
