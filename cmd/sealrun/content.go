package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/exams"
	"github.com/spf13/cobra"
)

func newContentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "content",
		Short: "The daemon's store of pinned files: hidden exams, validation sets, briefs",
		Long: `A track pins its exam, validation set and brief by SHA-256. The daemon finds each in its content
store, <state-dir>/content/sha256/<hex>, and checks the hash before every run. The hidden exam
lives only there (never in a repository or a container).`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "add FILE...",
		Short: "Store files by their SHA-256 (prints each hash, for the track)",
		Args:  minArgs(1, "one or more files"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
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
