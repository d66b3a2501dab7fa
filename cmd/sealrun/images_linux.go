package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/images/builder"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/spf13/cobra"
)

// unpackFlags is the flag group bounding an unpack.
type unpackFlags struct {
	maxBytes, maxFiles int64
}

func (f *unpackFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&f.maxBytes, "max-unpack-bytes", images.DefaultMaxUnpackBytes, "refuse images whose files add up to more bytes (decompression bombs)")
	cmd.Flags().Int64Var(&f.maxFiles, "max-files", images.DefaultMaxFiles, "refuse images with more entries")
}

// registryFlags is the flag group saying how to reach a registry.
type registryFlags struct {
	caFile, authFile string
}

func (f *registryFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.caFile, "ca-file", "", "PEM bundle of certificate authorities to trust for the registry's TLS, besides the system's (a private CA)")
	cmd.Flags().StringVar(&f.authFile, "authfile", "", "a docker config.json with the registry's credentials or credential helpers (default: $DOCKER_CONFIG/config.json or ~/.docker/config.json, then podman's auth.json, as crane and skopeo read them)")
}

func (f *registryFlags) registry(cmd *cobra.Command) images.Registry {
	return images.Registry{CAFile: f.caFile, AuthFile: f.authFile, Progress: cmd.ErrOrStderr()}
}

func (g *globals) store(u *unpackFlags) (*images.Store, error) {
	var opts []images.StoreOption
	if u != nil {
		if u.maxBytes < 1 || u.maxFiles < 1 {
			return nil, usage(errors.New("--max-unpack-bytes and --max-files must be at least 1"))
		}
		uo := images.UnpackOptions{MaxBytes: u.maxBytes, MaxFiles: u.maxFiles, Chown: isRoot()}
		opts = append(opts, images.WithUnpackOptions(uo))
	}
	return images.OpenStore(g.stateDir, opts...)
}

func newImagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Pin, pull, import, verify and build the images runs start from",
		Long: `Every container of a sealed run starts from an image pinned by digest (name@sha256:<hex>). The
store under --state-dir/images keeps each image's OCI layout and its safely unpacked rootfs,
content-addressed; an image appears there only after every check passed.`,
		Args: exactArgs(0, "a subcommand: pin, pull, push, import, ls, verify, rm or build-local"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: pin, pull, push, import, ls, verify, rm or build-local"))
		},
	}
	cmd.AddCommand(newImagesPinCmd(), newImagesPullCmd(g), newImagesPushCmd(g), newImagesImportCmd(g), newImagesLsCmd(g), newImagesVerifyCmd(g), newImagesRmCmd(g), newImagesBuildLocalCmd(g))
	return cmd
}

func newImagesPinCmd() *cobra.Command {
	var lock, platform string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "pin REF [--lock images.lock]",
		Short: "Resolve a tag once and print name@sha256:<hex> (the manifest bytes' own hash)",
		Long: `Pin fetches REF's manifest and hashes the bytes itself (a registry's digest header is never
trusted). A multi-platform index is resolved to the image for --platform. With --lock, the pin is
recorded in the lock file under REF. Registry credentials come from --authfile or the docker config
keychain; a registry with a private CA needs --ca-file.`,
		Args: exactArgs(1, "one image reference"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p *v1.Platform
			if platform != "" {
				var err error
				if p, err = v1.ParsePlatform(platform); err != nil {
					return usage(fmt.Errorf("--platform %q: %v", platform, err))
				}
			}
			ref, err := images.Pin(cmd.Context(), args[0], p, rf.registry(cmd))
			if err != nil {
				return err
			}
			if lock != "" {
				if err := images.UpdateLock(lock, map[string]string{args[0]: ref}); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), ref)
			return nil
		},
	}
	cmd.Flags().StringVar(&lock, "lock", "", "record the pin in this lock file")
	cmd.Flags().StringVar(&platform, "platform", "", "platform for multi-platform images (default linux/<this machine's arch>)")
	rf.addFlags(cmd)
	return cmd
}

func printRecord(cmd *cobra.Command, verb string, r *images.Record) {
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s@%s (%s, %d files, %s unpacked)\n", verb, r.Name, r.Digest, humanBytes(r.Size), r.Files, humanBytes(r.UnpackedBytes))
	for _, n := range r.Neutralised {
		fmt.Fprintf(cmd.OutOrStdout(), "  neutralised: %s\n", n)
	}
}

func newImagesPullCmd(g *globals) *cobra.Command {
	var u unpackFlags
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "pull NAME@sha256:<hex> [--ca-file PEM] [--authfile config.json]",
		Short: "Fetch an image by digest into the store, verify and unpack it",
		Long: `Pull fetches the image's manifest and every blob, each checked against its digest as it arrives,
then verifies and unpacks it. A progress line goes to stderr every few seconds. Blobs are shared
between the store's images: a layer the store has is not fetched again. An interrupted pull keeps
what it fetched; pulling again fetches only the rest (HTTP ranges).`,
		Args: exactArgs(1, "one image reference pinned by digest"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := images.ParsePinned(args[0]); err != nil {
				return usage(err)
			}
			s, err := g.store(&u)
			if err != nil {
				return err
			}
			r, st, err := s.PullFrom(cmd.Context(), args[0], rf.registry(cmd))
			if err != nil {
				return err
			}
			printRecord(cmd, "pulled", r)
			if st.Blobs > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "  %d blobs (%s): fetched %s, %d already in the store, %s resumed from an earlier pull; %s\n",
					st.Blobs, humanBytes(st.TotalSize), humanBytes(st.Fetched), st.Shared, humanBytes(st.Resumed), st.Took.Round(time.Millisecond))
			}
			return nil
		},
	}
	u.addFlags(cmd)
	rf.addFlags(cmd)
	return cmd
}

func newImagesPushCmd(g *globals) *cobra.Command {
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "push DIGEST REPOSITORY[:TAG] [--ca-file PEM] [--authfile config.json]",
		Short: "Publish a stored image to a registry under the same digest",
		Long: `Push uploads an image of the store (built here with build-local or buildah, or imported) to a
registry exactly as stored: its manifest bytes are unchanged, so the registry serves it under the
digest a track pins, and other hosts pull it by that digest. It prints REPOSITORY@sha256:<hex>.`,
		Args: exactArgs(2, "the image's digest (sealrun images ls) and the repository to push to"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store(nil)
			if err != nil {
				return err
			}
			ref, err := s.Push(cmd.Context(), args[0], args[1], rf.registry(cmd))
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), ref)
			return nil
		},
	}
	rf.addFlags(cmd)
	return cmd
}

func newImagesImportCmd(g *globals) *cobra.Command {
	var u unpackFlags
	var digest, name string
	cmd := &cobra.Command{
		Use:   "import PATH [--digest sha256:<hex>] [--name NAME]",
		Short: "Import an OCI image layout directory or a docker-archive tarball (air-gapped hosts)",
		Args:  exactArgs(1, "one path: an OCI layout directory or a docker save tarball"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store(&u)
			if err != nil {
				return err
			}
			r, err := s.Import(cmd.Context(), args[0], digest, name)
			if err != nil {
				return err
			}
			printRecord(cmd, "imported", r)
			return nil
		},
	}
	u.addFlags(cmd)
	cmd.Flags().StringVar(&digest, "digest", "", "the image to take from a layout holding several, and the digest it must have")
	cmd.Flags().StringVar(&name, "name", "", "name to record when the source has none")
	return cmd
}

func newImagesLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the images in the store: digest, name, size, source, verified-at",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store(nil)
			if err != nil {
				return err
			}
			recs, err := s.List()
			if err != nil {
				return err
			}
			if asJSON {
				if recs == nil {
					recs = []images.Record{}
				}
				return printJSON(cmd.OutOrStdout(), recs)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "DIGEST\tNAME\tSIZE\tSOURCE\tVERIFIED")
			for _, r := range recs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Digest, r.Name, humanBytes(r.Size), r.Source, r.VerifiedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON")
	return cmd
}

func newImagesVerifyCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "verify (DIGEST | --all)",
		Short: "Re-hash images on disk: manifest, config, every layer and diff id, the rootfs tree",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usage(errors.New("give one image digest, or --all"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store(nil)
			if err != nil {
				return err
			}
			digests := args
			if all {
				recs, err := s.List()
				if err != nil {
					return err
				}
				for _, r := range recs {
					digests = append(digests, r.Digest)
				}
			}
			failed := 0
			for _, d := range digests {
				r, err := s.Verify(cmd.Context(), d)
				if err != nil {
					failed++
					fmt.Fprintf(cmd.ErrOrStderr(), "FAIL %s: %v\n", d, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ok   %s %s (%d layers, rootfs %s)\n", r.Digest, r.Name, len(r.Layers), r.RootfsTree)
			}
			if failed > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d of %d images failed verification", failed, len(digests)), quiet: true}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "verify every image in the store")
	return cmd
}

func newImagesRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm DIGEST",
		Short: "Remove an image from the store",
		Args:  exactArgs(1, "one image digest"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.store(nil)
			if err != nil {
				return err
			}
			if err := s.Remove(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}
}

func newImagesBuildLocalCmd(g *globals) *cobra.Command {
	var u unpackFlags
	var o builder.BuildOptions
	var lock string
	var only []string
	cmd := &cobra.Command{
		Use:   "build-local [--lock images.lock] [--only IMAGE,...]",
		Short: "Build the demo/test images and the shipped agents' controller images, and pin them in a lock file",
		Long: `Build-local builds these images (from Debian packages and npm) and imports them into the store:
  controller       busybox (static): a shell and coreutils-level tools, no Python anywhere
  demo-controller  the same with the scripted demo scaffold (kits/demo-agent) as its command,
                   labelled with its scaffold pin (scripted-demo, version, config sha256)
  python           debootstrap --variant=minbase with python3, numpy, torch (CPU) and OpenBLAS,
                   for runner/grader
` + scaffoldImagesHelp() + `
Each agent's image is debootstrap --variant=minbase with bash, ripgrep and git (built once, shared),
plus what its recipe (scaffolds/NAME/scaffold.toml) takes from npm — each tarball pinned by version
and SHA-256: another hash refuses the build — and its entrypoint; no Python; labelled with its
scaffold pin (name, version, the SHA-256 of its config template), which a track pins.
Layers are reproducible (sorted entries, fixed mtimes, numeric owners): the same rootfs gives the
same digest. The digests are written to --lock for the demo track. A second run with nothing
changed reuses the cache (--cache-dir) and takes seconds. All but controller and demo-controller
need root.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			known := builder.LocalImages()
			for _, k := range only {
				if !slices.Contains(known, k) {
					return usage(fmt.Errorf("--only %q: choose among %s", k, strings.Join(known, ", ")))
				}
			}
			o.Images, o.Log = only, cmd.ErrOrStderr()
			s, err := g.store(&u)
			if err != nil {
				return err
			}
			built, err := builder.BuildLocal(cmd.Context(), s, g.stateDir, o)
			if err != nil {
				return err
			}
			set := map[string]string{}
			for _, b := range built {
				set[b.Key] = b.Ref
				fmt.Fprintf(cmd.OutOrStdout(), "%-19s %s\n", b.Key, b.Ref)
			}
			if lock != "" {
				if err := images.UpdateLock(lock, set); err != nil {
					return err
				}
			}
			return nil
		},
	}
	u.addFlags(cmd)
	cmd.Flags().StringVar(&lock, "lock", "images.lock", "lock file to record the digests in (\"\" for none)")
	cmd.Flags().StringSliceVar(&only, "only", nil, "build only these images ("+strings.Join(builder.LocalImages(), ", ")+")")
	cmd.Flags().StringVar(&o.NPMRegistry, "npm-registry", "", "npm registry the agents' tarballs are fetched from (default "+builder.DefaultNPMRegistry+"; each one's sha256 is checked)")
	cmd.Flags().StringVar(&o.CacheDir, "cache-dir", "", "where the debootstrap result is kept between builds (default <state-dir>/build-cache)")
	cmd.Flags().StringVar(&o.Mirror, "mirror", "", "Debian mirror for debootstrap (default http://deb.debian.org/debian)")
	cmd.Flags().StringVar(&o.Busybox, "busybox", "", "static busybox binary for the controller (default /bin/busybox)")
	return cmd
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// scaffoldImagesHelp lists the shipped agents' images for build-local's help.
func scaffoldImagesHelp() string {
	var b strings.Builder
	for _, sc := range scaffolds.All() {
		var from []string
		for _, n := range sc.NPM {
			from = append(from, n.Package+"@"+n.Version)
		}
		fmt.Fprintf(&b, "  %-16s %s %s (speaks %s): %s\n", sc.ImageKey(), sc.Name, sc.Version, strings.Join(sc.Kinds, ", "), strings.Join(from, ", "))
	}
	return b.String()
}
