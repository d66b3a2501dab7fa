package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var fixedNow = func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }

func testStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenStore(dir, WithClock(fixedNow), WithUnpackOptions(UnpackOptions{Chown: os.Geteuid() == 0}))
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// imageOf makes an OCI image with one layer per entry list.
func imageOf(t *testing.T, layers ...[]entry) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, es := range layers {
		data := tarOf(t, es...)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	return img
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// serve starts ggcr's in-memory registry on loopback, optionally behind a middleware.
func serve(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, img v1.Image, ref string) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func TestPinPullVerifyRemove(t *testing.T) {
	host := serve(t, nil)
	img := imageOf(t, []entry{dir("bin"), file("bin/hello", "hi")}, []entry{file("etc/os-release", "test")})
	push(t, img, host+"/team/app:v1")
	ctx := context.Background()

	ref, err := Pin(ctx, host+"/team/app:v1", nil, Registry{})
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/team/app@" + digestOf(t, img); ref != want {
		t.Fatalf("pin = %s, want %s", ref, want)
	}
	s, _ := testStore(t)
	rec, err := s.Pull(ctx, ref, Registry{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digestOf(t, img) || rec.Source != SourceRegistry || len(rec.Layers) != 2 || rec.Files != 3 || !rec.VerifiedAt.Equal(fixedNow()) {
		t.Errorf("record = %+v", rec)
	}
	rootfs, err := s.Rootfs(rec.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "bin/hello")); string(b) != "hi" {
		t.Errorf("bin/hello = %q", b)
	}
	again, err := s.Pull(ctx, ref, Registry{}) // content-addressed: idempotent
	if err != nil || again.Digest != rec.Digest {
		t.Errorf("second pull: %v", err)
	}
	if _, err := s.Verify(ctx, rec.Digest); err != nil {
		t.Errorf("verify: %v", err)
	}
	list, _ := s.List()
	if len(list) != 1 {
		t.Errorf("ls = %v", list)
	}
	// A leased image (in use by a run) cannot be removed; the error names the run.
	lease, err := s.Lease(rec.Digest, "run-7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(rec.Digest, "../escape"); err == nil {
		t.Error("a holder name with a path accepted")
	}
	if _, err := s.Lease("sha256:"+strings.Repeat("0", 64), "run-8"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lease of a missing image: %v", err)
	}
	if err := s.Remove(rec.Digest); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "run-7") || !strings.Contains(err.Error(), "sealrun cancel") {
		t.Errorf("rm of a leased image: %v; want ErrInUse naming run-7 and the fix", err)
	}
	if _, err := s.Get(rec.Digest); err != nil {
		t.Errorf("the leased image is gone: %v", err)
	}
	if err := lease.Release(); err != nil {
		t.Fatal(err)
	}
	// A crashed daemon's lease is released by holder at recovery.
	if _, err := s.Lease(rec.Digest, "run-9"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseHolder("run-9"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(rec.Digest); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(rec.Digest); !errors.Is(err, ErrNotFound) {
		t.Errorf("after rm: %v", err)
	}
	if err := s.Remove(rec.Digest); !errors.Is(err, ErrNotFound) {
		t.Errorf("rm twice: %v", err)
	}
}

func TestPinIndexResolvesPlatform(t *testing.T) {
	host := serve(t, nil)
	amd := imageOf(t, []entry{file("arch", "amd64")})
	arm := imageOf(t, []entry{file("arch", "arm64")})
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	r, _ := name.ParseReference(host + "/multi:latest")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	got, err := Pin(context.Background(), host+"/multi:latest", &v1.Platform{OS: "linux", Architecture: "arm64"}, Registry{})
	if err != nil || !strings.HasSuffix(got, digestOf(t, arm)) {
		t.Errorf("pin arm64 = %s, %v", got, err)
	}
	if _, err := Pin(context.Background(), host+"/multi:latest", &v1.Platform{OS: "linux", Architecture: "s390x"}, Registry{}); err == nil || !strings.Contains(err.Error(), "no image for linux/s390x") {
		t.Errorf("missing platform: %v", err)
	}
}

// A registry that lies: its digest header says one thing, its manifest bytes another. Pin hashes
// the bytes; pull by a digest the bytes do not match is refused.
func TestRegistryLies(t *testing.T) {
	img := imageOf(t, []entry{file("a", "1")})
	liar := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(r.URL.Path, "/manifests/") {
				w.Header().Set("Docker-Content-Digest", "sha256:"+strings.Repeat("0", 64))
			}
			h.ServeHTTP(w, r)
		})
	}
	host := serve(t, liar)
	push(t, img, host+"/lie:v1")
	ref, err := Pin(context.Background(), host+"/lie:v1", nil, Registry{})
	if err != nil {
		t.Fatalf("pin through a registry whose digest header lies: %v", err)
	}
	if want := host + "/lie@" + digestOf(t, img); ref != want {
		t.Errorf("pin = %s, want %s (the manifest bytes' own hash, not the header's)", ref, want)
	}
}

func TestPullFailures(t *testing.T) {
	ctx := context.Background()
	img := imageOf(t, []entry{file("a", strings.Repeat("x", 10000))})
	layers, _ := img.Layers()
	layerDigest, _ := layers[0].Digest()
	truncate := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+layerDigest.String()) {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				body := rec.Body.Bytes()
				w.WriteHeader(rec.Code)
				w.Write(body[:len(body)/2])
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	good := serve(t, nil)
	bad := serve(t, truncate)
	push(t, img, good+"/app:v1")
	push(t, img, bad+"/app:v1")
	wrongMedia := mutate.MediaType(imageOf(t, []entry{file("b", "1")}), "application/vnd.example.not-an-image+json")
	push(t, wrongMedia, good+"/odd:v1")
	foreign := imageOf(t)
	fl := static.NewLayer([]byte("not a tar"), "application/vnd.example.foreign")
	foreign, _ = mutate.AppendLayers(foreign, fl)
	push(t, foreign, good+"/foreign:v1")

	tests := []struct {
		name, ref, want string
	}{
		{"tag only", good + "/app:v1", "is not pinned by digest; run `sealrun images pin"},
		{"digest mismatch", good + "/app@sha256:" + strings.Repeat("a", 64), "pull"},
		{"truncated blob", bad + "/app@" + digestOf(t, img), layerDigest.Hex[:12]},
		{"wrong manifest media type", good + "/odd@" + digestOf(t, wrongMedia), "is not an OCI or Docker v2 image manifest"},
		{"foreign layer media type", good + "/foreign@" + digestOf(t, foreign), `has media type "application/vnd.example.foreign"`},
		{"uppercase digest", good + "/app@sha256:" + strings.Repeat("A", 64), "sha256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := testStore(t)
			_, err := s.Pull(ctx, tc.ref, Registry{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			assertStoreEmpty(t, s, dir)
		})
	}
}

// assertStoreEmpty: nothing listed, and no leftover import directories.
func assertStoreEmpty(t *testing.T, s *Store, dir string) {
	t.Helper()
	if l, _ := s.List(); len(l) != 0 {
		t.Errorf("store lists %v", l)
	}
	for _, sub := range []string{"images/sha256", "images/.tmp"} {
		entries, _ := os.ReadDir(filepath.Join(dir, sub))
		if len(entries) != 0 {
			t.Errorf("%s has leftovers: %v", sub, entries)
		}
	}
}

func TestHostileImageLeavesStoreUnchanged(t *testing.T) {
	host := serve(t, nil)
	img := imageOf(t, []entry{file("ok", "1")}, []entry{symlink("evil", "../../../../etc")})
	push(t, img, host+"/evil:v1")
	s, dir := testStore(t)
	_, err := s.Pull(context.Background(), host+"/evil@"+digestOf(t, img), Registry{})
	var ue *UnpackError
	if !errors.As(err, &ue) || ue.Rule != RuleSymlinkEscape || ue.Entry != "evil" || !strings.HasPrefix(ue.Layer, "sha256:") {
		t.Fatalf("err = %v", err)
	}
	assertStoreEmpty(t, s, dir)
}

func TestImportLayoutAndDockerArchive(t *testing.T) {
	ctx := context.Background()
	img := imageOf(t, []entry{file("from", "layout")})
	other := imageOf(t, []entry{file("from", "other")})
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "example.com/from:v1"}))
	s, _ := testStore(t)
	rec, err := s.Import(ctx, filepath.Join(dir, "oci"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Name != "example.com/from" || rec.Source != SourceOCILayout || rec.Digest != digestOf(t, img) {
		t.Errorf("record = %+v", rec)
	}
	// Several images: --digest chooses, and must exist.
	lp.AppendImage(other)
	if _, err := s.Import(ctx, filepath.Join(dir, "oci"), "", ""); err == nil || !strings.Contains(err.Error(), "images.Import.Digest: the layout holds") {
		t.Errorf("two images: %v", err)
	}
	if r, err := s.Import(ctx, filepath.Join(dir, "oci"), digestOf(t, other), "named"); err != nil || r.Name != "named" {
		t.Errorf("--digest: %v %+v", err, r)
	}
	if _, err := s.Import(ctx, filepath.Join(dir, "oci"), "sha256:"+strings.Repeat("b", 64), ""); err == nil || !strings.Contains(err.Error(), "has no image") {
		t.Errorf("absent digest: %v", err)
	}
	// docker save format.
	tag, _ := name.NewTag("example.com/saved:v2")
	tarPath := filepath.Join(dir, "saved.tar")
	if err := tarball.WriteToFile(tarPath, tag, imageOf(t, []entry{file("from", "tarball")})); err != nil {
		t.Fatal(err)
	}
	r, err := s.Import(ctx, tarPath, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "example.com/saved" || r.Source != SourceDockerArchive {
		t.Errorf("docker archive record = %+v", r)
	}
	// Not an image at all.
	junk := filepath.Join(dir, "junk.tar")
	os.WriteFile(junk, []byte("hello"), 0o644)
	for path, want := range map[string]string{junk: "not a docker-archive tarball", dir: "not an OCI image layout", filepath.Join(dir, "nope"): "no such file"} {
		if _, err := s.Import(ctx, path, "", ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("import %s: %v, want %q", path, err, want)
		}
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	ctx := context.Background()
	host := serve(t, nil)
	img := imageOf(t, []entry{file("bin/tool", "original")})
	push(t, img, host+"/t:v1")
	want := map[string]string{"blob": "undersized layer[0]", "rootfs": "the unpacked rootfs changed on disk", "manifest": "manifest on disk hashes to"}
	for _, tamper := range []string{"blob", "rootfs", "manifest"} {
		t.Run(tamper, func(t *testing.T) {
			s, _ := testStore(t)
			rec, err := s.Pull(ctx, host+"/t@"+digestOf(t, img), Registry{})
			if err != nil {
				t.Fatal(err)
			}
			d, _ := s.Dir(rec.Digest)
			switch tamper {
			case "blob":
				layer := strings.TrimPrefix(rec.Layers[0], "sha256:")
				os.WriteFile(filepath.Join(d, "layout/blobs/sha256", layer), []byte("garbage"), 0o644)
			case "rootfs":
				os.WriteFile(filepath.Join(d, "rootfs/bin/tool"), []byte("trojan"), 0o755)
			case "manifest":
				m := strings.TrimPrefix(rec.Digest, "sha256:")
				os.WriteFile(filepath.Join(d, "layout/blobs/sha256", m), []byte(`{"schemaVersion":2}`), 0o644)
			}
			if _, err := s.Verify(ctx, rec.Digest); err == nil || !strings.Contains(err.Error(), want[tamper]) || !strings.Contains(err.Error(), rec.Digest) {
				t.Errorf("verify after tampering with the %s: %v; want an error naming the image and %q", tamper, err, want[tamper])
			}
		})
	}
}

func TestParsePinned(t *testing.T) {
	good := "registry.example/a/b@sha256:" + strings.Repeat("c", 64)
	if _, err := ParsePinned(good); err != nil {
		t.Error(err)
	}
	for ref, want := range map[string]string{
		"registry.example/a/b:latest":                  "is not pinned by digest; run `sealrun images pin registry.example/a/b:latest`",
		"registry.example/a/b@sha256:abc":              "sha256",
		"registry.example/a/b@md5:" + "0":              "",
		"UPPER/case@sha256:" + strings.Repeat("c", 64): "",
	} {
		_, err := ParsePinned(ref)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePinned(%q) = %v, want %q", ref, err, want)
		}
	}
}

func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "images.lock")
	a := "r.example/a@sha256:" + strings.Repeat("1", 64)
	b := "r.example/b@sha256:" + strings.Repeat("2", 64)
	if err := UpdateLock(path, map[string]string{"r.example/a:v1": a}); err != nil {
		t.Fatal(err)
	}
	if err := UpdateLock(path, map[string]string{"controller": b}); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLock(path)
	if err != nil || l["r.example/a:v1"] != a || l["controller"] != b {
		t.Errorf("lock = %v, %v", l, err)
	}
	os.WriteFile(path, []byte("[images]\nx = \"r.example/x:latest\"\n"), 0o644)
	if _, err := ReadLock(path); err == nil || !strings.Contains(err.Error(), "not pinned") {
		t.Errorf("unpinned entry: %v", err)
	}
	os.WriteFile(path, []byte("[imgs]\nx = 1\n"), 0o644)
	if _, err := ReadLock(path); err == nil || !strings.Contains(err.Error(), "unknown key imgs") {
		t.Errorf("unknown table: %v; want it named", err)
	}
}

// The same rootfs gives the same layer bytes, whatever the file times.
func TestWriteLayerTarReproducible(t *testing.T) {
	mk := func(when time.Time) []byte {
		d := t.TempDir()
		os.MkdirAll(filepath.Join(d, "b/c"), 0o755)
		os.WriteFile(filepath.Join(d, "b/c/f"), []byte("data"), 0o644)
		os.WriteFile(filepath.Join(d, "a"), []byte("x"), 0o4755)
		os.Link(filepath.Join(d, "a"), filepath.Join(d, "a2"))
		os.Symlink("b/c/f", filepath.Join(d, "link"))
		for _, p := range []string{"a", "b/c/f", "b/c", "b"} {
			os.Chtimes(filepath.Join(d, p), when, when)
		}
		var buf bytes.Buffer
		if err := WriteLayerTar(&buf, d, nil); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	one, two := mk(time.Unix(1000, 0)), mk(time.Unix(2000000, 0))
	if !bytes.Equal(one, two) {
		t.Error("layer bytes depend on file times")
	}
	tr := tar.NewReader(bytes.NewReader(one))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name+":"+string(h.Typeflag))
		if !h.ModTime.Equal(Epoch) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uname %q", h.Name, h.ModTime, h.Uname)
		}
	}
	want := "a:0 a2:1 b/:5 b/c/:5 b/c/f:0 link:2"
	if strings.Join(names, " ") != want {
		t.Errorf("entries = %s, want %s", strings.Join(names, " "), want)
	}
}
