package images

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/sealrun/sealrun/images/registrytest"
)

// registryImage makes an image with a layer of n random bytes (incompressible) under name, and
// the layers given.
func randomLayer(t *testing.T, n int) []entry {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	return []entry{file("data.bin", string(b))}
}

// importImage puts img into store s (as an operator's local build would be) and returns its digest.
func importImage(t *testing.T, s *Store, img v1.Image) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oci")
	lp, err := layoutWrite(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	r, err := s.Import(context.Background(), dir, "", "local/test")
	if err != nil {
		t.Fatal(err)
	}
	return r.Digest
}

// Against a real registry (the CNCF distribution registry, TLS from a CA of the test's, htpasswd):
// push a stored image and pull it elsewhere by the same digest; pin its tag; credentials from an
// auth file and from a credential helper; a wrong password and an unknown CA refused with the
// fix; a second image's shared layer not fetched again; a blob the registry serves with other
// bytes refused and not kept; a registry that dies mid-pull, and the pull resumed where it broke
// off.
func TestRealRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	ctx := context.Background()
	o := Registry{CAFile: reg.CAFile, AuthFile: reg.AuthFile}
	base := randomLayer(t, 3<<20)
	img := imageOf(t, base, []entry{file("etc/app", "one")})
	src, _ := testStore(t)
	digest := importImage(t, src, img)

	pushed, err := src.Push(ctx, digest, reg.Ref("team/app:v1"), o)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != reg.Ref("team/app")+"@"+digest {
		t.Fatalf("pushed as %s, want the same digest %s", pushed, digest)
	}
	if pinned, err := Pin(ctx, reg.Ref("team/app:v1"), nil, o); err != nil || pinned != pushed {
		t.Fatalf("pin = %s %v, want %s", pinned, err, pushed)
	}
	dst, _ := testStore(t)
	rec, st, err := dst.PullFrom(ctx, pushed, o)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != digest || st.Fetched != st.TotalSize || st.Shared != 0 {
		t.Errorf("pull: %+v %+v", rec, st)
	}
	if rootfs, _ := dst.Rootfs(digest); !fileHas(filepath.Join(rootfs, "etc/app"), "one") {
		t.Error("the pulled rootfs lacks etc/app")
	}

	// A second image sharing the big layer: its layer is not fetched again.
	img2 := imageOf(t, base, []entry{file("etc/app", "two")})
	d2 := importImage(t, src, img2)
	p2, err := src.Push(ctx, d2, reg.Ref("team/app:v2"), o)
	if err != nil {
		t.Fatal(err)
	}
	_, st2, err := dst.PullFrom(ctx, p2, o)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Shared != 1 || st2.Fetched > 64<<10 {
		t.Errorf("second image: %d blobs shared, %d bytes fetched; want the 3 MiB layer shared", st2.Shared, st2.Fetched)
	}
	if a, b := linkCount(t, dst.blobPath(mustHash(t, base0(t, img)))), 3; a != b {
		t.Errorf("the shared layer has %d links (store + 2 images), want %d", a, b)
	}

	// Credentials from a credential helper named in the auth file.
	helperDir := t.TempDir()
	os.WriteFile(filepath.Join(helperDir, "docker-credential-sealrun-test"), []byte("#!/bin/sh\nread server\nprintf '{\"ServerURL\":\"%s\",\"Username\":\""+reg.User+"\",\"Secret\":\""+reg.Password+"\"}' \"$server\"\n"), 0o755)
	t.Setenv("PATH", helperDir+":"+os.Getenv("PATH"))
	helperCfg := filepath.Join(t.TempDir(), "config.json")
	b, _ := json.Marshal(map[string]any{"credHelpers": map[string]string{reg.Addr: "sealrun-test"}})
	os.WriteFile(helperCfg, b, 0o600)
	if _, err := Pin(ctx, reg.Ref("team/app:v1"), nil, Registry{CAFile: reg.CAFile, AuthFile: helperCfg}); err != nil {
		t.Errorf("with a credential helper: %v", err)
	}

	// Refusals, each naming the fix; nothing enters the store.
	wrong := filepath.Join(t.TempDir(), "config.json")
	b, _ = json.Marshal(map[string]any{"auths": map[string]any{reg.Addr: map[string]string{"username": reg.User, "password": "not-it"}}})
	os.WriteFile(wrong, b, 0o600)
	fresh, freshDir := testStore(t)
	for _, tc := range []struct {
		name string
		o    Registry
		want string
	}{
		{"wrong password", Registry{CAFile: reg.CAFile, AuthFile: wrong}, "refused the credentials"},
		{"unknown CA", Registry{AuthFile: reg.AuthFile}, "give its CA with --ca-file"},
		{"no credentials", Registry{CAFile: reg.CAFile, AuthFile: filepath.Join(t.TempDir(), "none.json")}, "auth file"},
	} {
		if _, _, err := fresh.PullFrom(ctx, pushed, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	assertStoreEmpty(t, fresh, freshDir)

	// The registry serves a layer with other bytes (its storage tampered with).
	img3 := imageOf(t, randomLayer(t, 1<<20))
	d3 := importImage(t, src, img3)
	p3, err := src.Push(ctx, d3, reg.Ref("team/tampered:v1"), o)
	if err != nil {
		t.Fatal(err)
	}
	layer3 := base0(t, img3)
	data, _ := os.ReadFile(reg.BlobPath(layer3))
	data[len(data)/2] ^= 0xff
	os.WriteFile(reg.BlobPath(layer3), data, 0o644)
	if _, _, err := fresh.PullFrom(ctx, p3, o); err == nil || !strings.Contains(err.Error(), "served bytes whose digest is") {
		t.Errorf("a tampered layer: %v", err)
	}
	if _, err := os.Stat(fresh.partialPath(mustHash(t, layer3))); err == nil {
		t.Error("the tampered bytes were kept")
	}

	// The registry dies mid-pull; the next pull fetches only the rest.
	img4 := imageOf(t, randomLayer(t, 24<<20))
	d4 := importImage(t, src, img4)
	p4, err := src.Push(ctx, d4, reg.Ref("team/big:v1"), o)
	if err != nil {
		t.Fatal(err)
	}
	killed := false
	testHookFetched = func(n int64) {
		if n > 8<<20 && !killed {
			killed = true
			reg.Stop()
		}
	}
	_, _, err = dst.PullFrom(ctx, p4, o)
	testHookFetched = nil
	if err == nil || !strings.Contains(err.Error(), "run the same pull again") {
		t.Fatalf("a pull whose registry died: %v", err)
	}
	reg.Restart()
	rec4, st4, err := dst.PullFrom(ctx, p4, o)
	if err != nil {
		t.Fatal(err)
	}
	layer4 := mustHash(t, base0(t, img4))
	if rec4.Digest != d4 || st4.Resumed < 8<<20 || st4.Fetched > st4.TotalSize-(8<<20) {
		t.Errorf("resumed pull: resumed %d, fetched %d of %d", st4.Resumed, st4.Fetched, st4.TotalSize)
	}
	if _, err := os.Stat(dst.partialPath(layer4)); err == nil {
		t.Error("the partial download is still there")
	}
}

func fileHas(p, want string) bool {
	b, err := os.ReadFile(p)
	return err == nil && bytes.Equal(b, []byte(want))
}

// base0 is the digest of an image's first layer.
func base0(t *testing.T, img v1.Image) string {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ls[0].Digest()
	return d.String()
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func layoutWrite(dir string) (layout.Path, error) { return layout.Write(dir, empty.Index) }

func linkCount(t *testing.T, p string) int {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Nlink)
}

// A pulled image whose config names other diff ids than its layers' bytes is refused: the
// layers' digests are right, so only the unpacking pass, which hashes what it unpacks, sees it.
func TestPullRefusesWrongDiffID(t *testing.T) {
	host := serve(t, nil)
	img := imageOf(t, []entry{file("a", "1")})
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0] = mustHash(t, "sha256:"+strings.Repeat("ab", 32))
	lying, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	push(t, lying, host+"/lie:v1")
	s, dir := testStore(t)
	if _, err := s.Pull(context.Background(), host+"/lie@"+digestOf(t, lying), Registry{}); err == nil || !strings.Contains(err.Error(), "but the image's config gives sha256:abab") {
		t.Fatalf("a lying config: %v", err)
	}
	assertStoreEmpty(t, s, dir)
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	stop := Progress(&buf, 10*time.Millisecond, func() string { return "tick" })
	time.Sleep(55 * time.Millisecond)
	stop()
	if n := strings.Count(buf.String(), "tick\n"); n < 2 {
		t.Errorf("%d ticks in 55 ms at 10 ms", n)
	}
}
