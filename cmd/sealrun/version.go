package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// Set by the Makefile with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "0.0.0-dev"
	commit  = "unknown"
)

// mandated lists the libraries the project must use, in the order `version` prints them. Each is
// linked through the package that uses it (sandbox, images, attest), so the build info has them.
var mandated = []string{
	"github.com/opencontainers/runtime-spec",
	"github.com/containerd/cgroups/v3",
	"github.com/vishvananda/netlink",
	"github.com/google/go-containerregistry",
	"github.com/sigstore/sigstore",
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sealrun's version, commit, Go version and mandated library versions",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			deps := map[string]string{}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, d := range bi.Deps {
					v := d.Version
					if d.Replace != nil {
						v = d.Replace.Version + " (replaced)"
					}
					deps[d.Path] = v
				}
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "sealrun\t%s\n", version)
			fmt.Fprintf(w, "commit\t%s\n", commit)
			fmt.Fprintf(w, "go\t%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			for _, m := range mandated {
				v := deps[m]
				if v == "" {
					v = "not linked"
				}
				fmt.Fprintf(w, "%s\t%s\n", m, v)
			}
			return w.Flush()
		},
	}
}
