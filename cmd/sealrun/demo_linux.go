package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealrun/sealrun/demo"
	"github.com/sealrun/sealrun/images/builder"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/spf13/cobra"
)

func newDemoCmd(g *globals) *cobra.Command {
	var o demo.Options
	cmd := &cobra.Command{
		Use:   "demo [--seeds N] [--scaffold scripted-demo|SCAFFOLD] [--keep] [--quick]",
		Short: "A whole sealed benchmark on this machine: build, run the scripted agent, verify, rank",
		Long: `Demo runs the real thing at small scale, as root, on this machine:
  1. builds the local images it needs (the controller with the scaffold, python with torch);
  2. builds a hidden exam from the synthetic generator into the content store (it never enters
     a container) and the ARI kit (brief, starter model, training text, validation set);
  3. writes the demo track with every pin filled (<state-dir>/demo/track.toml);
  4. starts sealrund in this process (its own socket, keys and config under <state-dir>/demo);
  5. runs N seeds of the scripted demo agent (scripted-demo: a shell script, not a model),
     concurrently where CPUs allow: it trains the starter through runner, submits, reads the
     validation score, tries one improvement, promotes the better and finalizes;
     with --scaffold and a shipped scaffold (opencode, codex, claude, gemini, qwen: the real CLI
     from npm, pinned, in its controller-SCAFFOLD image), that agent instead, driven through the
     gateway by a scripted model: controller/scriptedmodel on loopback, speaking the API the CLI
     speaks (provider "scripted", model scripted), which answers each turn with the next tool
     call: read the brief, runner time_left, train the starter, bundle and submit, promote,
     finalize. It is a script, not a model, and the leaderboard says so;
  6. verifies each attestation with every file (bundle, report, audit log, track);
  7. prints the leaderboard of those attestations and where each run's reports are.
The state dir is /var/lib/sealrun-demo unless --state-dir is given; it must be the demo's own.
Everything from an earlier demo (its runs, journal and demo/) is replaced; the images and the build
cache are reused. Without --keep the runs' workspaces (checkpoints) are removed at the end;
reports, attestations, audit logs and candidates stay.`,
		Example: `  sealrun demo                          # state in /var/lib/sealrun-demo
  sealrun demo --seeds 1 --quick        # the shortened demo make test runs
  sealrun demo --scaffold opencode      # opencode in the sealed controller, a scripted model
  sealrun demo --scaffold codex --seeds 1  # Codex CLI the same way
  sealrun demo --seeds 1 --quick --runner-image sealrun-gpu/python@sha256:... --gpu nvidia.com/gpu=0
                                        # on a GPU host, with its own PyTorch image (scripts/gpu-check.sh)`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Seeds < 1 || o.Seeds > 16 {
				return usage(fmt.Errorf("--seeds %d: give 1 to 16", o.Seeds))
			}
			if o.Scaffold != builder.DemoScaffoldName {
				if _, ok := scaffolds.Lookup(o.Scaffold); !ok {
					return usage(fmt.Errorf("--scaffold %q: choose %s (a shell script, no model) or a shipped scaffold driven by a scripted model: %s", o.Scaffold, builder.DemoScaffoldName, strings.Join(scaffolds.Names(), ", ")))
				}
			}
			for _, gpu := range o.GPUs {
				if !strings.Contains(gpu, "=") || !strings.Contains(gpu, "/") {
					return usage(fmt.Errorf("--gpu %q is not a CDI device name (vendor/class=name, as sealrun doctor lists them)", gpu))
				}
			}
			if os.Geteuid() != 0 {
				return errors.New("sealrun demo runs sealed runs (namespaces, cgroups, runc) and needs root: run it with sudo, or make demo")
			}
			o.StateDir = g.stateDir
			if f := cmd.Flag("state-dir"); f == nil || !f.Changed {
				o.StateDir = "/var/lib/sealrun-demo" // never the production state dir by default
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.BinDir, o.Version, o.Commit = filepath.Dir(self), version, commit
			return demo.Run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.Seeds, "seeds", 3, "how many seeds of the demo agent to run")
	cmd.Flags().StringVar(&o.Scaffold, "scaffold", builder.DemoScaffoldName, "the scaffold in the controller: "+builder.DemoScaffoldName+" (a shell script) or one of "+strings.Join(scaffolds.Names(), ", ")+" (driven by a scripted model)")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "keep the runs' workspaces (checkpoints, bundles) after the demo")
	cmd.Flags().BoolVar(&o.Quick, "quick", false, "a tighter budget and a smaller exam (about 2 minutes a seed)")
	cmd.Flags().StringVar(&o.CacheDir, "cache-dir", "", "where the debootstrap result is kept between builds (default <state-dir>/build-cache)")
	cmd.Flags().StringVar(&o.RunnerImage, "runner-image", "", "an image in the store (sealrun images import|pull; name@sha256:... or its digest) to run as runner and grader instead of the CPU python image the demo builds: a GPU host's own PyTorch")
	cmd.Flags().StringVar(&o.Kit, "kit", "", "a built ARI kit (sealrun kit build kits/ari --out DIR) to use instead of building it here from Debian's licence texts")
	cmd.Flags().StringArrayVar(&o.GPUs, "gpu", nil, "a CDI GPU (nvidia.com/gpu=0; sealrun doctor lists them) for the demo's daemon to hand out, one per run; repeat for more (the track then asks for one GPU and 16 GiB a run)")
	return cmd
}
