package images

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push publishes the stored image digest to dst (a repository, with a tag or not) exactly as
// stored: its manifest bytes go up unchanged, so the registry serves it under the same digest and
// a track that pins it here pins it there. It returns name@sha256:<hex> at dst, after checking
// that the registry now serves that digest.
func (s *Store) Push(ctx context.Context, digest, dst string, reg Registry) (string, error) {
	if _, err := s.Get(digest); err != nil {
		return "", err
	}
	ref, err := name.ParseReference(dst)
	if err != nil {
		return "", fmt.Errorf("push to %q: %v; give a repository such as registry.example.com/team/scaffold[:tag]", dst, err)
	}
	if _, ok := ref.(name.Digest); ok {
		return "", fmt.Errorf("push to %q: give a repository (and a tag), not a digest: the image's digest is its own", dst)
	}
	img, err := s.image(digest)
	if err != nil {
		return "", err
	}
	o, err := reg.remoteOptions(ctx)
	if err != nil {
		return "", err
	}
	updates := make(chan v1.Update, 16)
	p := newProgress(reg.Progress)
	start := time.Now()
	go func() {
		for u := range updates {
			p.printf(false, "push %s: %s of %s, %.0f MB/s", ref.Context().Name(), human(u.Complete), human(u.Total), float64(u.Complete)/1e6/max(time.Since(start).Seconds(), 0.001))
		}
	}()
	err = remote.Write(ref, img, append(o, remote.WithProgress(updates))...)
	if err != nil {
		return "", fmt.Errorf("push %s to %s: %w", digest, dst, explainRegistry(ref.Context().RegistryStr(), reg, err))
	}
	pinned := ref.Context().Name() + "@" + digest
	desc, err := remote.Head(ref.Context().Digest(digest), o...)
	if err != nil {
		return "", fmt.Errorf("push %s to %s: the registry does not serve it afterwards: %w", digest, dst, err)
	}
	if desc.Digest.String() != digest {
		return "", fmt.Errorf("push %s to %s: the registry serves %s under it", digest, dst, desc.Digest)
	}
	p.printf(true, "pushed %s", pinned)
	return pinned, nil
}
