package images

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Images made from directories: a rootfs packed into one layer (the local builds), or a directory
// added to an image as a new layer.

// ImportRootfs packs root into one reproducible layer, makes an OCI image with cfg, and adds
// it to the store. work is a scratch directory.
func (s *Store) ImportRootfs(ctx context.Context, root, name string, cfg v1.Config, work string, skip func(string) bool, log io.Writer) (string, error) {
	// One pass: tar and gzip (fastest level; the output is deterministic for a given input) to a
	// file, which ggcr then reads as an already compressed layer.
	gzPath := filepath.Join(work, "layer.tar.gz")
	f, err := os.Create(gzPath)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	packed := &counter{w: zw}
	start := time.Now()
	stop := Progress(log, 5*time.Second, func() string {
		return fmt.Sprintf("  %s: packing %s (%s): %s of files read", name, root, time.Since(start).Round(time.Second), human(packed.n.Load()))
	})
	err = WriteLayerTar(packed, root, skip)
	stop()
	if err != nil {
		f.Close()
		return "", fmt.Errorf("pack %s: %w", root, err)
	}
	for _, c := range []func() error{zw.Close, bw.Flush, f.Close} {
		if err := c(); err != nil {
			f.Close()
			return "", fmt.Errorf("pack %s: %w", root, err)
		}
	}
	layer, err := tarball.LayerFromFile(gzPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return "", err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = cfg
	cf.Created = v1.Time{Time: Epoch}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	start = time.Now()
	stop = Progress(log, 5*time.Second, func() string {
		return fmt.Sprintf("  %s: verifying and unpacking the layer into the store (%s)", name, time.Since(start).Round(time.Second))
	})
	rec, err := s.add(ctx, img, name, SourceLocalBuild, "sealrun images build-local", "")
	stop()
	if err != nil {
		return "", err
	}
	return name + "@" + rec.Digest, nil
}

// Extend adds the tree dir as one more reproducible layer on top of the stored image base and
// stores the result as name: an image plus files (a package an image lacks, a test stand-in).
// The base's config is kept; the same base and tree always give the same digest.
func (s *Store) Extend(ctx context.Context, base, dir, name string) (string, error) {
	img, err := s.image(base)
	if err != nil {
		return "", fmt.Errorf("extend %s: %w", base, err)
	}
	work, err := os.MkdirTemp("", "sealrun-extend-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	gzPath := filepath.Join(work, "layer.tar.gz")
	f, err := os.Create(gzPath)
	if err != nil {
		return "", err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err := WriteLayerTar(zw, dir, nil); err != nil {
		f.Close()
		return "", fmt.Errorf("pack %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	layer, err := tarball.LayerFromFile(gzPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return "", err
	}
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return "", err
	}
	rec, err := s.add(ctx, img, name, SourceLocalBuild, "sealrun images extend "+base, "")
	if err != nil {
		return "", err
	}
	return name + "@" + rec.Digest, nil
}
