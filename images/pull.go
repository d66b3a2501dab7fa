package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealrun/sealrun/internal/fileio"
)

// The store's blobs: images/blobs/sha256/<hex> holds every blob of every stored image once (an
// image's layout links to them), written only after its digest was checked; a pull writes into
// images/blobs/.partial/<hex> and renames it there when the whole blob is in and hashes right. A
// pull that is interrupted (the registry went away, the host rebooted) keeps what it has, and the
// next pull of any image with that blob asks the registry only for the rest (an HTTP range). A
// blob another image already has is never fetched again.

// PullStats says what a pull moved.
type PullStats struct {
	Blobs     int   // the image's blobs (config and layers)
	Shared    int   // of them already in the store (another image's)
	Fetched   int64 // bytes received from the registry
	Resumed   int64 // bytes of interrupted downloads kept and not fetched again
	TotalSize int64 // the image's blobs' size
	Took      time.Duration
}

func (s *Store) blobPath(h v1.Hash) string { return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex) }

func (s *Store) partialPath(h v1.Hash) string {
	return filepath.Join(s.dir, "blobs", ".partial", h.Algorithm+"-"+h.Hex)
}

// PullFrom fetches a pinned image by digest from its registry into the store, through o, and says
// what it moved. Every blob is checked against its digest as it arrives; the manifest against the
// pin.
func (s *Store) PullFrom(ctx context.Context, ref string, o Registry) (*Record, *PullStats, error) {
	start := time.Now()
	d, err := ParsePinned(ref)
	if err != nil {
		return nil, nil, err
	}
	if r, err := s.Get(d.DigestStr()); err == nil {
		return r, &PullStats{}, nil // content-addressed: already here
	}
	ropts, err := o.remoteOptions(ctx)
	if err != nil {
		return nil, nil, err
	}
	desc, err := remote.Get(d, ropts...)
	if err != nil {
		return nil, nil, fmt.Errorf("pull %s: %w", ref, explainRegistry(d.RegistryStr(), o, err))
	}
	raw := desc.Manifest
	m, err := pulledManifest(ref, d, desc)
	if err != nil {
		return nil, nil, err
	}
	client, err := o.client(ctx, d.Context(), d.Scope(transport.PullScope))
	if err != nil {
		return nil, nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	blobs := append([]v1.Descriptor{m.Config}, m.Layers...)
	st := &PullStats{Blobs: len(blobs)}
	for _, b := range blobs {
		st.TotalSize += b.Size
	}
	p := newProgress(o.Progress)
	var done int64
	for i, b := range blobs {
		what := fmt.Sprintf("layer %d/%d", i, len(blobs)-1)
		if i == 0 {
			what = "config"
		}
		shared, fetched, resumed, err := s.fetchBlob(ctx, client, d.Context(), b, func(n int64) {
			elapsed := time.Since(start).Seconds()
			p.printf(false, "pull %s: %s %s: %s of %s; %s of %s in all, %.0f MB/s", d.Context().Name(), what, short(b.Digest), human(n), human(b.Size), human(done+n), human(st.TotalSize), float64(st.Fetched+n)/1e6/max(elapsed, 0.001))
		})
		if err != nil {
			return nil, st, fmt.Errorf("pull %s: %s %s: %w", ref, what, b.Digest, err)
		}
		if shared {
			st.Shared++
		}
		st.Fetched += fetched
		st.Resumed += resumed
		done += b.Size
	}
	if testHookFetchDone != nil {
		testHookFetchDone(time.Since(start))
	}
	p.printf(true, "pull %s: %d blobs, %s: fetched %s, %d already in the store, %s resumed; verifying and unpacking", d.Context().Name(), len(blobs), human(st.TotalSize), human(st.Fetched), st.Shared, human(st.Resumed))
	rec, err := s.addFromBlobs(ctx, raw, desc.MediaType, d.Context().Name(), SourceRegistry, ref)
	st.Took = time.Since(start)
	if err != nil {
		s.dropUnused(blobs) // the image is refused: its blobs are of no use (an interrupted fetch's are kept)
	}
	return rec, st, err
}

// pulledManifest checks the manifest a registry served for the pinned reference d: its digest is
// the pin, it is one platform's image (not an index) and its media types are ones sealrun reads.
func pulledManifest(ref string, d name.Digest, desc *remote.Descriptor) (*v1.Manifest, error) {
	raw := desc.Manifest
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.DigestStr() {
		return nil, fmt.Errorf("pull %s: the registry served a manifest whose digest is %s: it is not the pinned image (tampered, or the wrong registry)", ref, got)
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("pull %s: this digest is an index (several platforms); pin one platform's image: sealrun images pin %s", ref, d.Context().Name())
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("pull %s: the manifest: %w", ref, err)
	}
	if err := checkManifestTypes(ref, m); err != nil {
		return nil, err
	}
	return m, nil
}

func short(h v1.Hash) string { return h.Algorithm + ":" + h.Hex[:12] }

// checkManifestTypes refuses what sealrun cannot run (see checkMediaTypes).
func checkManifestTypes(ref string, m *v1.Manifest) error {
	if m.MediaType != "" && !oneOf(m.MediaType, manifestTypes) {
		return fmt.Errorf("image %s: manifest media type %q is not an OCI or Docker v2 image manifest", ref, m.MediaType)
	}
	if !oneOf(m.Config.MediaType, configTypes) {
		return fmt.Errorf("image %s: config media type %q is not an image config", ref, m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if !oneOf(l.MediaType, layerTypes) {
			return fmt.Errorf("image %s: layer %s has media type %q; sealrun unpacks only tar layers (plain, gzip, zstd) and never fetches foreign layers", ref, l.Digest, l.MediaType)
		}
	}
	return nil
}

// fetchBlob makes sure blob b is in the store's blobs, fetching what is missing of it from repo.
// report sees the bytes of b in hand as they grow.
func (s *Store) fetchBlob(ctx context.Context, c *http.Client, repo name.Repository, b v1.Descriptor, report func(int64)) (shared bool, fetched, resumed int64, err error) {
	final := s.blobPath(b.Digest)
	if _, err := os.Stat(final); err == nil {
		return true, 0, 0, nil
	}
	if b.Digest.Algorithm != "sha256" {
		return false, 0, 0, fmt.Errorf("digest algorithm %s: sealrun stores sha256 blobs only", b.Digest.Algorithm)
	}
	for _, dir := range []string{filepath.Dir(final), filepath.Dir(s.partialPath(b.Digest))} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, 0, 0, err
		}
	}
	part := s.partialPath(b.Digest)
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false, 0, 0, err
	}
	defer f.Close()
	h := sha256.New()
	have, err := io.Copy(h, f) // what an interrupted pull kept
	if err != nil {
		return false, 0, 0, err
	}
	if have > b.Size {
		f.Truncate(0)
		f.Seek(0, io.SeekStart)
		h.Reset()
		have = 0
	}
	resumed = have
	if have < b.Size {
		n, from, err := s.download(ctx, c, repo, b, f, h, have, report)
		fetched, resumed = n, from
		if err != nil {
			f.Sync()
			if from+n > 0 {
				err = fmt.Errorf("%w; %s of %s kept: run the same pull again to fetch only the rest", err, human(from+n), human(b.Size))
			}
			return false, fetched, resumed, err
		}
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != b.Digest.String() {
		f.Close()
		os.Remove(part)
		return false, fetched, resumed, fmt.Errorf("the registry served bytes whose digest is %s, not %s: nothing of it was kept (a tampered registry or storage; pull again, or from another registry)", got, b.Digest)
	}
	if err := f.Sync(); err != nil {
		return false, fetched, resumed, err
	}
	if err := os.Rename(part, final); err != nil {
		return false, fetched, resumed, err
	}
	return false, fetched, resumed, fileio.SyncDir(filepath.Dir(final))
}

// download appends blob b from offset have to f (and h), asking for the rest with a range. It
// returns the bytes received and the offset they started at: have, or 0 when the registry
// ignored the range and sent the blob whole.
func (s *Store) download(ctx context.Context, c *http.Client, repo name.Repository, b v1.Descriptor, f *os.File, h hash.Hash, have int64, report func(int64)) (int64, int64, error) {
	n, err := s.downloadFrom(ctx, c, repo, b, f, h, &have, report)
	return n, have, err
}

func (s *Store) downloadFrom(ctx context.Context, c *http.Client, repo name.Repository, b v1.Descriptor, f *os.File, h hash.Hash, at *int64, report func(int64)) (int64, error) {
	have := *at
	u := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", repo.Registry.Scheme(), repo.RegistryStr(), repo.RepositoryStr(), b.Digest)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		if have > 0 { // no range support: start over
			if err := f.Truncate(0); err != nil {
				return 0, err
			}
			h.Reset()
			have, *at = 0, 0
		}
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("the registry answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, err
	}
	w := io.MultiWriter(f, h)
	buf := make([]byte, 1<<20)
	var n int64
	limit := b.Size - have
	for n < limit {
		k, rerr := resp.Body.Read(buf[:min(int64(len(buf)), limit-n)])
		if k > 0 {
			if _, err := w.Write(buf[:k]); err != nil {
				return n, err
			}
			n += int64(k)
			report(have + n)
			if testHookFetched != nil {
				testHookFetched(have + n)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, fmt.Errorf("the download broke off: %w", rerr)
		}
	}
	if n < limit {
		return n, fmt.Errorf("the download ended after %s of %s", human(have+n), human(b.Size))
	}
	return n, nil
}

// testHookFetched, when set (tests), sees the bytes of a blob in hand as a download grows;
// testHookFetchDone, how long a pull took to have every blob (benchmarks).
var (
	testHookFetched   func(n int64)
	testHookFetchDone func(time.Duration)
)

// addFromBlobs builds an image's layout from the store's blobs (linked, not copied) and adds it.
func (s *Store) addFromBlobs(ctx context.Context, raw []byte, mt types.MediaType, nm, source, ref string) (*Record, error) {
	sum := sha256.Sum256(raw)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, ".tmp"), "pull-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // gone once renamed into the store
	lay := filepath.Join(tmp, "layout")
	blobDir := filepath.Join(lay, "blobs", "sha256")
	if err := os.MkdirAll(blobDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(lay, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(blobDir, hex.EncodeToString(sum[:])), raw, 0o600); err != nil {
		return nil, err
	}
	for _, b := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if err := os.Link(s.blobPath(b.Digest), filepath.Join(blobDir, b.Digest.Hex)); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("link blob %s into the image's layout: %w", b.Digest, err)
		}
	}
	idx := map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{"mediaType": string(mt), "size": len(raw), "digest": digest, "annotations": map[string]string{"org.opencontainers.image.ref.name": nm}}}}
	ib, _ := json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(lay, "index.json"), ib, 0o600); err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(lay)
	if err != nil {
		return nil, err
	}
	h, _ := v1.NewHash(digest)
	img, err := lp.Image(h)
	if err != nil {
		return nil, err
	}
	return s.finishAdd(ctx, tmp, img, digest, nm, source, ref, true)
}

// dropUnused removes the store's blobs among bs that no image links to.
func (s *Store) dropUnused(bs []v1.Descriptor) {
	for _, b := range bs {
		p := s.blobPath(b.Digest)
		if st, err := os.Stat(p); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink == 1 {
				os.Remove(p)
			}
		}
	}
}
