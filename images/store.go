package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/sealrun/sealrun/internal/fileio"
)

// ErrNotFound: no image with that digest in the store.
var ErrNotFound = errors.New("image not in the store")

// Sources an image can come from.
const (
	SourceRegistry      = "registry"
	SourceOCILayout     = "oci-layout"
	SourceDockerArchive = "docker-archive"
	SourceLocalBuild    = "local-build"
)

// Record is what the store knows about one image (image.json in its directory).
type Record struct {
	Digest        string    `json:"digest"` // manifest digest, sha256:<hex>
	Name          string    `json:"name"`   // repository name, for people; the digest is the identity
	Source        string    `json:"source"`
	SourceRef     string    `json:"source_ref"` // where it came from: registry reference or path
	Size          int64     `json:"size"`       // manifest + config + compressed layers, bytes
	Layers        []string  `json:"layers"`
	UnpackedBytes int64     `json:"unpacked_bytes"`
	Files         int64     `json:"files"`
	RootfsTree    string    `json:"rootfs_tree"` // TreeHash of the unpacked rootfs
	ImportedAt    time.Time `json:"imported_at"`
	VerifiedAt    time.Time `json:"verified_at"`
	Neutralised   []string  `json:"neutralised,omitempty"` // what unpack skipped or stripped
}

// Store is the content-addressed image store under <state-dir>/images:
//
//	images/sha256/<hex>/layout/      OCI image layout holding exactly this image
//	images/sha256/<hex>/rootfs/      the unpacked root filesystem
//	images/sha256/<hex>/image.json   the Record
//	images/.tmp/                     imports in progress (never listed)
//
// An image directory appears only by rename, after every check passed.
type Store struct {
	dir  string
	opts storeOptions
}

type storeOptions struct {
	unpack UnpackOptions
	now    func() time.Time
}

// StoreOption configures a Store.
type StoreOption func(*storeOptions)

// WithUnpackOptions sets the caps and ownership used when unpacking.
func WithUnpackOptions(o UnpackOptions) StoreOption {
	return func(s *storeOptions) { s.unpack = o }
}

// WithClock injects the clock used for imported-at and verified-at.
func WithClock(now func() time.Time) StoreOption { return func(s *storeOptions) { s.now = now } }

// OpenStore opens (creating it if needed) the image store under stateDir.
func OpenStore(stateDir string, opts ...StoreOption) (*Store, error) {
	o := storeOptions{now: time.Now}
	o.unpack.Chown = os.Geteuid() == 0
	for _, f := range opts {
		f(&o)
	}
	// Containers run as unprivileged mapped users and must traverse (never list) the path to an
	// image's rootfs: the directories down to it are 0711. Layouts and records stay 0700.
	dir := filepath.Join(stateDir, "images")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{stateDir, 0o711}, {dir, 0o711}, {filepath.Join(dir, "sha256"), 0o711}, {filepath.Join(dir, ".tmp"), 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return nil, fmt.Errorf("image store %s: %w (is the state directory writable? it defaults to /var/lib/sealrun)", dir, err)
		}
		if st, err := os.Stat(d.path); err == nil && st.Mode().Perm()&0o111 != 0o111 && d.mode == 0o711 {
			if err := os.Chmod(d.path, st.Mode().Perm()|0o711); err != nil {
				return nil, fmt.Errorf("image store %s: make it traversable for containers: %w", d.path, err)
			}
		}
	}
	return &Store{dir: dir, opts: o}, nil
}

// Dir is the image's directory for a digest (which need not exist).
func (s *Store) Dir(digest string) (string, error) {
	h, err := v1.NewHash(digest)
	if err != nil || h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return "", fmt.Errorf("%q is not an image digest; expected sha256:<64 lowercase hex> (see sealrun images ls)", digest)
	}
	if strings.ToLower(h.Hex) != h.Hex {
		return "", fmt.Errorf("%q is not an image digest; the hex must be lowercase", digest)
	}
	return filepath.Join(s.dir, "sha256", h.Hex), nil
}

// Rootfs is the unpacked root filesystem of an image in the store.
func (s *Store) Rootfs(digest string) (string, error) {
	if _, err := s.Get(digest); err != nil {
		return "", err
	}
	d, _ := s.Dir(digest)
	return filepath.Join(d, "rootfs"), nil
}

// Get returns the record of an image in the store.
func (s *Store) Get(digest string) (*Record, error) {
	d, err := s.Dir(digest)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d, "image.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w; pull or import it first (sealrun images pull|import)", digest, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: image.json is damaged (%v); remove the image and import it again", digest, err)
	}
	return &r, nil
}

// List returns every complete image, sorted by name then digest.
func (s *Store) List() ([]Record, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, "sha256"))
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range entries {
		r, err := s.Get("sha256:" + e.Name())
		if err != nil {
			continue // not a complete image (cannot happen through the store's own writes)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Digest < out[j].Digest
	})
	return out, nil
}

// Remove deletes an image from the store. A leased image (in use by a run) is refused with
// ErrInUse naming the runs.
func (s *Store) Remove(digest string) error {
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.Get(digest); err != nil {
		return err
	}
	if holders := s.Holders(digest); len(holders) > 0 {
		return fmt.Errorf("%w: image %s is used by run %s (leases under %s); wait for the run to end or cancel it (sealrun cancel RUN); a crashed daemon's leases are released when it restarts",
			ErrInUse, digest, strings.Join(holders, ", "), filepath.Join(s.dir, "leases", strings.TrimPrefix(digest, "sha256:")))
	}
	d, _ := s.Dir(digest)
	// Rename first so that a crash mid-removal never leaves a half image that ls would show.
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, ".tmp"), "rm-")
	if err != nil {
		return err
	}
	if err = os.Rename(d, filepath.Join(tmp, "image")); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("remove %s: %w", digest, err)
	}
	blobs, _ := os.ReadDir(filepath.Join(tmp, "image", "layout", "blobs", "sha256"))
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	// A shared blob no other image links to (its only link is the store's) goes too.
	for _, b := range blobs {
		shared := filepath.Join(s.dir, "blobs", "sha256", b.Name())
		if st, err := os.Stat(shared); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink == 1 {
				os.Remove(shared)
			}
		}
	}
	return nil
}

// shareBlobs makes every blob of a layout's blobs directory one file with the store's copy: a blob
// the store has becomes a link to it (the layout's bytes are the same: both are checked against
// the digest that names them), one it lacks is linked into it. Images then share layers on disk,
// and a pull of an image with a layer the store has fetches nothing of it.
func (s *Store) shareBlobs(blobs string) error {
	algs, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, alg := range algs {
		files, err := os.ReadDir(filepath.Join(blobs, alg.Name()))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(s.dir, "blobs", alg.Name()), 0o700); err != nil {
			return err
		}
		for _, f := range files {
			mine := filepath.Join(blobs, alg.Name(), f.Name())
			shared := filepath.Join(s.dir, "blobs", alg.Name(), f.Name())
			a, errA := os.Stat(mine)
			b, errB := os.Stat(shared)
			switch {
			case errA != nil:
				return errA
			case errB == nil && os.SameFile(a, b):
			case errB == nil && a.Size() == b.Size():
				tmp := mine + ".link"
				if err := os.Link(shared, tmp); err != nil {
					return fmt.Errorf("share blob %s: %w", f.Name(), err)
				}
				if err := os.Rename(tmp, mine); err != nil {
					return fmt.Errorf("share blob %s: %w", f.Name(), err)
				}
			case errB == nil:
				return fmt.Errorf("blob %s in the store's blobs has %d bytes, this image's %d: the store is damaged; remove %s", f.Name(), b.Size(), a.Size(), shared)
			default:
				if err := os.Link(mine, shared); err != nil && !errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("share blob %s: %w", f.Name(), err)
				}
			}
		}
	}
	return nil
}

// allowed media types: OCI and Docker schema 2 images with tar layers.
var (
	manifestTypes = []types.MediaType{types.OCIManifestSchema1, types.DockerManifestSchema2}
	layerTypes    = []types.MediaType{types.OCILayer, types.OCIUncompressedLayer, types.DockerLayer, types.DockerUncompressedLayer, types.OCILayerZStd}
	configTypes   = []types.MediaType{types.OCIConfigJSON, types.DockerConfigJSON}
)

func oneOf(mt types.MediaType, list []types.MediaType) bool {
	for _, x := range list {
		if x == mt {
			return true
		}
	}
	return false
}

// checkMediaTypes refuses what sealrun cannot run: indexes, schema 1, foreign or unknown layers.
func checkMediaTypes(ref string, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("image %s: read manifest: %w", ref, err)
	}
	mt := m.MediaType
	if mt == "" {
		mt, _ = img.MediaType()
	}
	if !oneOf(mt, manifestTypes) {
		return fmt.Errorf("image %s: manifest media type %q is not an OCI or Docker v2 image manifest", ref, mt)
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

// add verifies img and moves it into the store. pin, when not empty, is the digest the image
// must have.
func (s *Store) add(ctx context.Context, img v1.Image, name, source, sourceRef, pin string) (*Record, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: read manifest: %w", sourceRef, err)
	}
	sum := sha256.Sum256(raw)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if pin != "" && digest != pin {
		return nil, fmt.Errorf("image %s: manifest digest is %s but %s was pinned; the image is not the pinned one (wrong source, or tampered)", sourceRef, digest, pin)
	}
	if err := checkMediaTypes(sourceRef, img); err != nil {
		return nil, err
	}
	if r, err := s.Get(digest); err == nil {
		return r, nil // content-addressed: already here
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, ".tmp"), "import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // gone once renamed into the store
	lp, err := layout.Write(filepath.Join(tmp, "layout"), empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendImage(img); err != nil {
		return nil, fmt.Errorf("image %s: fetch and write blobs: %w", sourceRef, err)
	}
	h, _ := v1.NewHash(digest)
	disk, err := lp.Image(h)
	if err != nil {
		return nil, fmt.Errorf("image %s: read back: %w", sourceRef, err)
	}
	// Each blob as written is checked against its digest here (one read of the compressed
	// bytes); each layer's uncompressed bytes against its diff id while they are unpacked, in the
	// same pass: not a verification that decompresses every layer once more first.
	if err := checkBlobs(ctx, sourceRef, disk); err != nil {
		return nil, err
	}
	return s.finishAdd(ctx, tmp, disk, digest, name, source, sourceRef, true)
}

// checkBlobs checks an image's config and compressed layers on disk against the digests and
// sizes its manifest gives.
func checkBlobs(ctx context.Context, ref string, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("image %s: its manifest: %w", ref, err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image %s: its config: %w", ref, err)
	}
	if sum := sha256.Sum256(cfg); "sha256:"+hex.EncodeToString(sum[:]) != m.Config.Digest.String() || int64(len(cfg)) != m.Config.Size {
		return fmt.Errorf("image %s: verification failed: its config is not the %d bytes of %s the manifest names", ref, m.Config.Size, m.Config.Digest)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image %s: its layers: %w", ref, err)
	}
	if len(layers) != len(m.Layers) {
		return fmt.Errorf("image %s: %d layers, the manifest lists %d", ref, len(layers), len(m.Layers))
	}
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		want := m.Layers[i]
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("image %s: layer %s: %w", ref, want.Digest, err)
		}
		h := sha256.New()
		n, err := io.Copy(h, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("image %s: layer %s: read: %w", ref, want.Digest, err)
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != want.Digest.String() || n != want.Size {
			return fmt.Errorf("image %s: verification failed: layer %d is %d bytes hashing to %s; the manifest says %d bytes, %s", ref, i+1, n, got, want.Size, want.Digest)
		}
	}
	return nil
}

// checkAdded checks an added image: with blobsChecked, that its config's diff ids match its
// manifest's layers (returned, to check while unpacking); else every blob, by verifyImage.
func (s *Store) checkAdded(ctx context.Context, disk v1.Image, digest, sourceRef string, blobsChecked bool, rec *Record) ([]v1.Hash, error) {
	var diffIDs []v1.Hash
	if blobsChecked {
		cf, err := disk.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("image %s: its config: %w", sourceRef, err)
		}
		m, err := disk.Manifest()
		if err != nil {
			return nil, fmt.Errorf("image %s: its manifest: %w", sourceRef, err)
		}
		if len(cf.RootFS.DiffIDs) != len(m.Layers) {
			return nil, fmt.Errorf("image %s: its config lists %d layers (diff ids), its manifest %d", sourceRef, len(cf.RootFS.DiffIDs), len(m.Layers))
		}
		diffIDs = cf.RootFS.DiffIDs
		describeImage(disk, rec)
	} else if err := s.verifyImage(ctx, sourceRef, digest, disk, rec); err != nil {
		return nil, err
	}
	return diffIDs, nil
}

// unpackAdded unpacks an added image's layers into rootfs, checking each layer's uncompressed
// bytes against its diff id when diffIDs are given, and records what the unpacking neutralised.
func (s *Store) unpackAdded(ctx context.Context, disk v1.Image, diffIDs []v1.Hash, sourceRef, rootfs string, rec *Record) error {
	layers, err := disk.Layers()
	if err != nil {
		return err
	}
	var ul []Layer
	var checks []*diffIDCheck
	for i, l := range layers {
		d, _ := l.Digest()
		open := l.Uncompressed
		if diffIDs != nil {
			c := &diffIDCheck{layer: d.String(), want: diffIDs[i], open: l.Uncompressed}
			checks = append(checks, c)
			open = c.Open
		}
		ul = append(ul, Layer{Digest: d.String(), Open: open})
	}
	rep, err := Unpack(ctx, sourceRef, ul, rootfs, s.opts.unpack)
	if err != nil {
		return err
	}
	for _, c := range checks {
		if c.err != nil {
			return fmt.Errorf("image %s: %w", sourceRef, c.err)
		}
	}
	rec.UnpackedBytes, rec.Files = rep.Bytes, rep.Files
	for _, d := range rep.SkippedDevices {
		rec.Neutralised = append(rec.Neutralised, "skipped device node or FIFO "+d)
	}
	for _, d := range rep.StrippedSetuid {
		rec.Neutralised = append(rec.Neutralised, "stripped setuid/setgid from "+d)
	}
	return nil
}

// finishAdd verifies the image whose layout is in tmp/layout, unpacks it into tmp/rootfs, shares
// its blobs with the store's (blobs another image has become links to the same file), writes
// its record and renames tmp into the store. The caller removes tmp on error. blobsChecked says
// that every blob was checked against its digest as it was written (a pull): then each layer's
// uncompressed bytes are checked against the config's diff id while they are unpacked, in the
// same pass, instead of a verification that reads every layer twice more first.
func (s *Store) finishAdd(ctx context.Context, tmp string, disk v1.Image, digest, name, source, sourceRef string, blobsChecked bool) (*Record, error) {
	final, _ := s.Dir(digest)
	rec := &Record{Digest: digest, Name: name, Source: source, SourceRef: sourceRef}
	diffIDs, err := s.checkAdded(ctx, disk, digest, sourceRef, blobsChecked, rec)
	if err != nil {
		return nil, err
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return nil, err
	}
	if err := s.unpackAdded(ctx, disk, diffIDs, sourceRef, rootfs, rec); err != nil {
		return nil, err
	}
	if rec.RootfsTree, _, err = TreeHash(rootfs); err != nil {
		return nil, fmt.Errorf("image %s: hash rootfs: %w", sourceRef, err)
	}
	now := s.opts.now().UTC()
	rec.ImportedAt, rec.VerifiedAt = now, now
	if err := writeRecord(tmp, rec); err != nil {
		return nil, err
	}
	for _, p := range []string{filepath.Join(tmp, "layout"), filepath.Join(tmp, "image.json")} {
		os.Chmod(p, 0o700)
	}
	if err := os.Chmod(tmp, 0o711); err != nil {
		return nil, err
	}
	if err := s.shareBlobs(filepath.Join(tmp, "layout", "blobs")); err != nil {
		return nil, fmt.Errorf("image %s: %w", sourceRef, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return s.Get(digest) // a concurrent import of the same image won
		}
		return nil, fmt.Errorf("image %s: move into the store: %w", sourceRef, err)
	}
	return rec, nil
}

func writeRecord(dir string, r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteFile(filepath.Join(dir, "image.json"), append(b, '\n'), 0o600)
}

// verifyImage re-hashes everything of an image read from disk: the manifest digest, every
// layer's blob digest and diff id, and the config, through ggcr's validate.Image.
func (s *Store) verifyImage(ctx context.Context, ref, digest string, img v1.Image, rec *Record) error {
	raw, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image %s: read manifest: %w", ref, err)
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != digest {
		return fmt.Errorf("image %s: manifest on disk hashes to %s, not %s", ref, got, digest)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := validate.Image(img); err != nil {
		return fmt.Errorf("image %s: verification failed: %v", ref, err)
	}
	describeImage(img, rec)
	return nil
}

// describeImage records an image's size (manifest, config and layers) and layer digests.
func describeImage(img v1.Image, rec *Record) {
	raw, _ := img.RawManifest()
	m, _ := img.Manifest()
	cfgRaw, _ := img.RawConfigFile()
	rec.Size = int64(len(raw)) + int64(len(cfgRaw))
	rec.Layers = rec.Layers[:0]
	for _, l := range m.Layers {
		rec.Size += l.Size
		rec.Layers = append(rec.Layers, l.Digest.String())
	}
}

// diffIDCheck hashes a layer's uncompressed bytes as the unpacker reads them and, when the
// unpacker closes it, the rest of the stream (the tar's end, bounded), and compares with the diff
// id the image's config gives.
type diffIDCheck struct {
	layer string
	want  v1.Hash
	open  func() (io.ReadCloser, error)
	rc    io.ReadCloser
	h     hash.Hash
	err   error
}

func (c *diffIDCheck) Open() (io.ReadCloser, error) {
	rc, err := c.open()
	if err != nil {
		return nil, err
	}
	c.rc, c.h = rc, sha256.New()
	return c, nil
}

func (c *diffIDCheck) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.h.Write(p[:n])
	return n, err
}

func (c *diffIDCheck) Close() error {
	if n, _ := io.Copy(c.h, io.LimitReader(c.rc, 1<<20+1)); n > 1<<20 {
		c.err = fmt.Errorf("layer %s: more than 1 MiB after its tar archive ends", c.layer)
	}
	cerr := c.rc.Close()
	if got := "sha256:" + hex.EncodeToString(c.h.Sum(nil)); c.err == nil && got != c.want.String() {
		c.err = fmt.Errorf("layer %s: its uncompressed bytes hash to %s, but the image's config gives %s", c.layer, got, c.want)
	}
	return cerr
}

// image is the stored image of a digest, from its layout.
func (s *Store) image(digest string) (v1.Image, error) {
	dir, err := s.Dir(digest)
	if err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(filepath.Join(dir, "layout"))
	if err != nil {
		return nil, fmt.Errorf("image %s: layout is damaged: %w; remove and re-import it", digest, err)
	}
	h, _ := v1.NewHash(digest)
	img, err := lp.Image(h)
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest missing from its layout: %w; remove and re-import it", digest, err)
	}
	return img, nil
}

// Config is the image's OCI configuration (command, environment, labels) from its layout.
func (s *Store) Config(digest string) (*v1.ConfigFile, error) {
	if _, err := s.Get(digest); err != nil {
		return nil, err
	}
	img, err := s.image(digest)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", digest, err)
	}
	return cf, nil
}

// Verify re-hashes an image in the store: manifest, config, every layer blob and its diff id,
// and the unpacked rootfs tree. On success it records the time.
func (s *Store) Verify(ctx context.Context, digest string) (*Record, error) {
	rec, err := s.Get(digest)
	if err != nil {
		return nil, err
	}
	dir, _ := s.Dir(digest)
	img, err := s.image(digest)
	if err != nil {
		return nil, err
	}
	// The layers and the unpacked tree are independent: hash them at the same time.
	type treeResult struct {
		hash string
		err  error
	}
	treeDone := make(chan treeResult, 1)
	go func() {
		h, _, err := TreeHash(filepath.Join(dir, "rootfs"))
		treeDone <- treeResult{h, err}
	}()
	verr := s.verifyImage(ctx, digest, digest, img, rec)
	tr := <-treeDone
	if verr != nil {
		return nil, verr
	}
	tree, err := tr.hash, tr.err
	if err != nil {
		return nil, fmt.Errorf("image %s: hash rootfs: %w", digest, err)
	}
	if tree != rec.RootfsTree {
		// A record of an older sealrun hashed directory sizes too: if that is what matches, the
		// tree is unchanged; the record gets today's hash.
		if legacy, _, err := treeHash(filepath.Join(dir, "rootfs"), true); err == nil && legacy == rec.RootfsTree {
			rec.RootfsTree = tree
		}
	}
	if tree != rec.RootfsTree {
		return nil, fmt.Errorf("image %s: the unpacked rootfs changed on disk (tree %s, recorded %s); remove and re-import the image", digest, tree, rec.RootfsTree)
	}
	rec.VerifiedAt = s.opts.now().UTC()
	if err := writeRecord(dir, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// TreeHash hashes a directory tree: every entry's relative path, type, permission bits, owner,
// size (of files and symlinks: a directory's size is its filesystem's business, and differs
// when the same tree is copied to another disk), symlink target and file content, in sorted
// order. It returns the hash and the bytes of file content read.
func TreeHash(dir string) (string, int64, error) { return treeHash(dir, false) }

// treeHash is TreeHash; with dirSizes, as stores written before the change hashed it (directory
// sizes included), so that their records still verify (and are then rewritten).
func treeHash(dir string, dirSizes bool) (string, int64, error) {
	h := sha256.New()
	var total int64
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		var uid, gid uint32
		if st != nil {
			uid, gid = st.Uid, st.Gid
		}
		size := fi.Size()
		if fi.IsDir() && !dirSizes {
			size = 0
		}
		fmt.Fprintf(h, "%q %o %d %d %d", rel, fi.Mode(), uid, gid, size)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, " -> %q", t)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			fh := sha256.New()
			n, err := io.CopyBuffer(fh, onlyReader{f}, buf)
			f.Close()
			if err != nil {
				return err
			}
			total += n
			fmt.Fprintf(h, " %x", fh.Sum(nil))
		}
		h.Write([]byte{'\n'})
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), total, nil
}

// onlyReader hides WriterTo so that io.CopyBuffer uses the large buffer.
type onlyReader struct{ io.Reader }
