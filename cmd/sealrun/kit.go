package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/kits"
)

func newKitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kit",
		Short: "Build and hash task kits (brief, starter code, training text, validation set)",
		Long: `A kit is everything a run's workspace starts with. A built kit is a directory of regular files with
a SHA256SUMS manifest; its kit hash is the SHA-256 of SHA256SUMS, which anyone can recompute with
coreutils (kits/KIT.md). A track pins it ([kit] sha256); the daemon finds kits added with
sealrun content add DIR.`,
		Args: exactArgs(0, "a subcommand: build or hash"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: build or hash"))
		},
	}
	var out, textRoot string
	build := &cobra.Command{
		Use:   "build SRC --out DIR",
		Short: "Build a kit from its source directory (kit.toml) reproducibly; prints its hash",
		Long: `Build reads SRC/kit.toml (kits/KIT.md): it copies the files it lists, builds the training text
from the Debian texts it pins by SHA-256 and synthetic documents of the exam families, builds the
public validation set, and writes SHA256SUMS. The same source on any machine gives the same
bytes and the same hash. DIR must not exist; it appears only complete.`,
		Example: `  sealrun kit build kits/ari --out /tmp/ari-kit
  sealrun content add /tmp/ari-kit      # where the daemon finds it`,
		Args: exactArgs(1, "the kit's source directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("give the directory to build into with --out"))
			}
			if st, err := os.Stat(args[0]); err != nil || !st.IsDir() {
				return fmt.Errorf("kit source %s is not a directory (%v); give the directory holding kit.toml, for example kits/ari", args[0], err)
			}
			k, err := kits.Build(os.DirFS(args[0]), args[0], out, kits.BuildOptions{TextRoot: textRoot, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", k.Hash, out)
			fmt.Fprintf(cmd.ErrOrStderr(), "kit %s: %d files, %d bytes; pin it in a track as [kit] sha256 = %q\n", out, len(k.Files), k.Bytes, k.Hash)
			return nil
		},
	}
	build.Flags().StringVar(&out, "out", "", "the directory to build the kit into (must not exist)")
	build.Flags().StringVar(&textRoot, "text-root", "/", "where the Debian texts' paths are rooted (a chroot of the distribution the kit was made with)")
	cmd.AddCommand(build, &cobra.Command{
		Use:   "hash DIR",
		Short: "Verify a built kit (every file against SHA256SUMS) and print its hash",
		Long: `Hash checks a built kit — only regular files and directories, portable names, within the limits,
exactly the files SHA256SUMS lists with those hashes — and prints the kit hash: the SHA-256 of
SHA256SUMS. Without sealrun:
  cd DIR && sha256sum --quiet --strict -c SHA256SUMS && sha256sum SHA256SUMS
  (cd DIR && find . -type f ! -path ./SHA256SUMS -printf '%P\0' | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum`,
		Args: exactArgs(1, "a built kit directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := kits.Open(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", k.Hash, args[0])
			return nil
		},
	})
	return cmd
}
