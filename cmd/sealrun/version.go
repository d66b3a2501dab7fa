package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/buildinfo"
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
		Short: "Print sealrun's version, commit, tree state, build kind, binary SHA-256, Go version and mandated library versions",
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
			b, err := buildinfo.CurrentBuild(version, commit)
			tree := "clean"
			if b.Modified {
				tree = "modified (uncommitted changes)"
			}
			kind := "release (no test seams)"
			if b.TestSeams {
				kind = "TEST BUILD (test seams compiled in)"
			}
			fmt.Fprintf(w, "commit\t%s\n", b.Commit)
			fmt.Fprintf(w, "tree\t%s\n", tree)
			fmt.Fprintf(w, "build\t%s\n", kind)
			if err == nil {
				fmt.Fprintf(w, "sha256\t%s (this binary)\n", b.DaemonSHA256)
			}
			fmt.Fprintf(w, "go\t%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
			tc := b.Toolchain
			if tc == "" {
				tc = "not stamped (built without make build)"
			}
			fmt.Fprintf(w, "c toolchain\t%s\n", tc)
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
