package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
)

func newContentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "content",
		Short: "The daemon's store of pinned files: hidden exams, kits, AIRS tasks and their data",
		Long: `A track pins its hidden exam by SHA-256 and its kit by kit hash. The daemon finds the exam in
its content store, <state-dir>/content/sha256/<hex>, kits in <state-dir>/kits/<hash>, and an AIRS
track's task and raw data directories in <state-dir>/content/tree/<tree hash>, and checks each
before every run. The hidden exam lives only there (never in a repository or a
container).`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "add FILE|KITDIR|TASKDIR|DATADIR...",
		Short: "Store files by their SHA-256, built kits by their kit hash, AIRS task and data directories by their tree hash (prints each, for the track)",
		Args:  minArgs(1, "one or more files, built kit directories, or AIRS task or raw data directories"),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, p := range args {
				if st, err := os.Stat(p); err == nil && st.IsDir() {
					if _, err := os.Lstat(filepath.Join(p, "SHA256SUMS")); err != nil {
						if err := addTree(cmd.OutOrStdout(), cmd.ErrOrStderr(), g.stateDir, p); err != nil {
							return err
						}
						continue
					}
					k, err := kits.Install(p, filepath.Join(g.stateDir, "kits"))
					if err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s  %s (kit)\n", k.Hash, p)
					continue
				}
				sum, err := fileio.SHA256(p)
				if err != nil {
					return err
				}
				dst := api.ContentPath(g.stateDir, digest.Hex(sum))
				if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
					return ioError(err)
				}
				if _, err := os.Stat(dst); err != nil {
					src, err := fileio.OpenRegular(p, "file")
					if err != nil {
						return err
					}
					err = fileio.WriteAtomic(dst, 0o600, func(w io.Writer) error { _, err := io.Copy(w, src); return err })
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

// addTree stores a directory by its tree hash: an AIRS task directory (it has metadata.yaml and
// must validate) or a raw data directory (anything else).
func addTree(w, progress io.Writer, state, dir string) error {
	what := "raw data directory"
	maxFiles, maxBytes := airs.MaxDataFiles, int64(airs.MaxDataBytes)
	if _, err := os.Lstat(filepath.Join(dir, airs.MetadataFile)); err == nil {
		t, err := airs.Open(dir)
		if err != nil {
			return invalid(err)
		}
		what = "AIRS task " + t.Meta.Info.Name
		maxFiles, maxBytes = airs.MaxTaskFiles, airs.MaxTaskBytes
	}
	start := time.Now()
	hash, err := airs.InstallTreeWith(dir, filepath.Dir(api.TreePath(state, "x")), airs.InstallOptions{MaxFiles: maxFiles, MaxBytes: maxBytes,
		Progress: func(copied, total int64) {
			fmt.Fprintf(progress, "content add %s: copied and hashed %.1f of %.1f MiB (%.0f%%, %s)\n", dir, float64(copied)/(1<<20), float64(total)/(1<<20),
				100*float64(copied)/float64(max(total, 1)), time.Since(start).Round(time.Second))
		}})
	if err != nil {
		return invalid(fmt.Errorf("%s: %w", dir, err))
	}
	fmt.Fprintf(w, "%s  %s (%s)\n", hash, dir, what)
	return nil
}
