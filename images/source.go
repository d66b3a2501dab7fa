package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sealrun/sealrun/internal/opt"
)

// ParsePinned parses a reference that must be pinned by digest: name@sha256:<64 hex>. Runs
// accept nothing else; a tag is refused with how to pin it.
func ParsePinned(ref string) (name.Digest, error) {
	if !strings.Contains(ref, "@") {
		return name.Digest{}, fmt.Errorf("image %q is not pinned by digest; run `sealrun images pin %s` once and use the name@sha256:... it prints", ref, ref)
	}
	d, err := name.NewDigest(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image %q: %v; expected name@sha256:<64 lowercase hex>", ref, err)
	}
	if _, err := parseDigest(d.DigestStr()); err != nil {
		return name.Digest{}, fmt.Errorf("image %q: %w", ref, err)
	}
	return d, nil
}

func parseDigest(s string) (v1.Hash, error) {
	h, err := v1.NewHash(s)
	if err != nil || h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.ToLower(h.Hex) != h.Hex {
		return v1.Hash{}, fmt.Errorf("%q is not sha256:<64 lowercase hex>", s)
	}
	return h, nil
}

// Pin resolves ref (a tag, or an already pinned reference) once and returns name@sha256:<hex>.
// The digest is the SHA-256 of the manifest bytes fetched, never a registry header. An index
// (multi-platform) is resolved to the manifest of platform (default linux/GOARCH). o says how to
// reach the registry.
func Pin(ctx context.Context, ref string, platform *v1.Platform, reg Registry) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %v", ref, err)
	}
	if platform == nil {
		platform = &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	o, err := reg.remoteOptions(ctx)
	if err != nil {
		return "", err
	}
	desc, err := remote.Get(r, o...)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", ref, explainRegistry(r.Context().RegistryStr(), reg, err))
	}
	raw := desc.Manifest
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", ref, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return "", fmt.Errorf("resolve %s: %w", ref, err)
		}
		var child *v1.Descriptor
		for i := range im.Manifests {
			if p := im.Manifests[i].Platform; p != nil && p.Satisfies(*platform) {
				child = &im.Manifests[i]
				break
			}
		}
		if child == nil {
			return "", fmt.Errorf("resolve %s: the index has no image for %s", ref, platform)
		}
		cd, err := remote.Get(r.Context().Digest(child.Digest.String()), o...)
		if err != nil {
			return "", fmt.Errorf("resolve %s for %s: %w", ref, platform, err)
		}
		raw = cd.Manifest
	} else if !desc.MediaType.IsImage() {
		return "", fmt.Errorf("resolve %s: media type %q is not an image", ref, desc.MediaType)
	}
	sum := sha256.Sum256(raw)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	return r.Context().Name() + "@" + digest, nil
}

// Pull fetches a pinned image by digest from its registry into the store (PullFrom without the
// statistics).
func (s *Store) Pull(ctx context.Context, ref string, reg Registry) (*Record, error) {
	rec, _, err := s.PullFrom(ctx, ref, reg)
	return rec, err
}

// Import reads an image from an OCI image layout directory or a docker-archive tarball
// (`docker save`). pin, when given, selects the image in a layout holding several and is
// checked against the manifest; nameOverride names the image when the source does not.
func (s *Store) Import(ctx context.Context, path, pin, nameOverride string) (*Record, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("import %s: no such file or directory", path)
		}
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if pin != "" {
		if _, err := parseDigest(pin); err != nil {
			return nil, fmt.Errorf("import %s: %w", path, opt.Wrap("images.Import", "Digest", err))
		}
	}
	var img v1.Image
	var nm, source string
	if st.IsDir() {
		img, nm, err = fromLayout(path, pin)
		source = SourceOCILayout
	} else {
		img, nm, err = fromDockerArchive(path)
		source = SourceDockerArchive
	}
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if nameOverride != "" {
		nm = nameOverride
	}
	if nm == "" {
		nm = "unnamed"
	}
	abs, _ := filepath.Abs(path)
	return s.add(ctx, img, nm, source, abs, pin)
}

func fromLayout(dir, pin string) (v1.Image, string, error) {
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return nil, "", errors.New("not an OCI image layout (no oci-layout file); give an OCI layout directory or a docker-archive tarball")
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	var images []v1.Descriptor
	for _, m := range im.Manifests {
		if m.MediaType.IsImage() || m.MediaType == "" {
			images = append(images, m)
		}
	}
	var pick *v1.Descriptor
	switch {
	case pin != "":
		for i := range images {
			if images[i].Digest.String() == pin {
				pick = &images[i]
			}
		}
		if pick == nil {
			return nil, "", fmt.Errorf("the layout has no image %s", pin)
		}
	case len(images) == 1:
		pick = &images[0]
	case len(images) == 0:
		return nil, "", errors.New("the layout holds no image manifest (an index of indexes is not supported; import a single-platform layout)")
	default:
		var ds []string
		for _, m := range images {
			ds = append(ds, m.Digest.String())
		}
		return nil, "", opt.New("images.Import", "Digest", fmt.Sprintf("the layout holds %d images; choose one (%s)", len(images), strings.Join(ds, ", ")))
	}
	img, err := idx.Image(pick.Digest)
	if err != nil {
		return nil, "", err
	}
	nm := pick.Annotations["org.opencontainers.image.ref.name"]
	if i := strings.LastIndex(nm, ":"); i > strings.LastIndex(nm, "/") {
		nm = nm[:i]
	}
	return img, nm, nil
}

func fromDockerArchive(path string) (v1.Image, string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		return nil, "", fmt.Errorf("not a docker-archive tarball (%v); give an OCI layout directory or the output of docker save", err)
	}
	if len(m) != 1 {
		return nil, "", fmt.Errorf("the tarball holds %d images; save one image per tarball", len(m))
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return nil, "", err
	}
	nm := ""
	if len(m[0].RepoTags) > 0 {
		if t, err := name.NewTag(m[0].RepoTags[0]); err == nil {
			nm = t.Context().Name()
		}
	}
	return img, nm, nil
}
