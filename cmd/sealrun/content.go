package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/kits"
	"github.com/spf13/cobra"
)

func newContentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "content",
		Short: "The daemon's store of pinned files: hidden exams and kits",
		Long: `A track pins its hidden exam by SHA-256 and its kit by kit hash. The daemon finds the exam in
its content store, <state-dir>/content/sha256/<hex>, and kits in <state-dir>/kits/<hash>, and
checks each before every run. The hidden exam lives only there (never in a repository or a
container).`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "add FILE|KITDIR...",
		Short: "Store files by their SHA-256 and built kits by their kit hash (prints each, for the track)",
		Args:  minArgs(1, "one or more files or built kit directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
				if st, err := os.Stat(p); err == nil && st.IsDir() {
					k, err := kits.Install(p, filepath.Join(g.stateDir, "kits"))
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s  %s (kit)\n", k.Hash, p)
					continue
				}
				sum, err := sha256File(p)
				if err != nil {
					return err
				}
				dst := daemon.ContentPath(g.stateDir, sum)
				if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
					return ioError(err)
				}
				if _, err := os.Stat(dst); err != nil {
					src, err := openRegular(p, "file")
					if err != nil {
						return err
					}
					err = exams.WriteAtomic(dst, 0o600, func(w io.Writer) error { _, err := io.Copy(w, src); return err })
					src.Close()
					if err != nil {
						return ioError(err)
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", sum, p)
			}
			return nil
		},
	})
	return cmd
}
