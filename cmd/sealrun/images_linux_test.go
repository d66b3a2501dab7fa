package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func testImage(t *testing.T, files map[string]string) v1.Image {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, body := range files {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImagesVerbs(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img := testImage(t, map[string]string{"hello": "world"})
	ref, _ := name.ParseReference(host + "/demo/app:v1")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	pinned := host + "/demo/app@" + d.String()
	dir := t.TempDir()
	state, lock := filepath.Join(dir, "state"), filepath.Join(dir, "images.lock")
	sr := func(args ...string) result { return sealrun(t, append([]string{"--state-dir", state}, args...)...) }

	if r := sr("images", "pin", host+"/demo/app:v1", "--lock", lock); r.code != 0 || strings.TrimSpace(r.stdout) != pinned {
		t.Fatalf("pin: %+v, want %s", r, pinned)
	}
	if b, _ := os.ReadFile(lock); !strings.Contains(string(b), pinned) {
		t.Errorf("lock file: %s", b)
	}
	if r := sr("images", "pull", pinned); r.code != 0 || !strings.Contains(r.stdout, "pulled "+pinned) {
		t.Fatalf("pull: %+v", r)
	}
	// An OCI layout on disk, as an air-gapped host would receive it.
	other := testImage(t, map[string]string{"from": "layout"})
	lp, _ := layout.Write(filepath.Join(dir, "oci"), empty.Index)
	lp.AppendImage(other)
	od, _ := other.Digest()
	if r := sr("images", "import", filepath.Join(dir, "oci"), "--name", "offline/app"); r.code != 0 || !strings.Contains(r.stdout, "imported offline/app@"+od.String()) {
		t.Fatalf("import: %+v", r)
	}
	if r := sr("images", "build-local", "--only", "controller", "--lock", lock); r.code != 0 || !strings.HasPrefix(r.stdout, "controller ") || !strings.Contains(r.stdout, " sealrun.local/controller@sha256:") {
		t.Fatalf("build-local: %+v", r)
	}
	r := sr("images", "ls")
	if r.code != 0 || strings.Count(r.stdout, "sha256:") != 3 || !strings.Contains(r.stdout, "DIGEST") || !strings.Contains(r.stdout, "local-build") {
		t.Fatalf("ls: %+v", r)
	}
	if r := sr("images", "verify", "--all"); r.code != 0 || strings.Count(r.stdout, "ok ") != 3 {
		t.Fatalf("verify --all: %+v", r)
	}
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"pull tag only", []string{"images", "pull", host + "/demo/app:v1"}, 2, "", "is not pinned by digest; run `sealrun images pin"},
		{"pull unknown digest", []string{"images", "pull", host + "/demo/app@sha256:" + strings.Repeat("a", 64)}, 1, "", "pull"},
		{"pin unknown", []string{"images", "pin", host + "/nope:v1"}, 1, "", "resolve"},
		{"verify unknown", []string{"images", "verify", "sha256:" + strings.Repeat("b", 64)}, 1, "", "image not in the store"},
		{"verify not a digest", []string{"images", "verify", "latest"}, 1, "", "is not an image digest"},
		{"verify nothing", []string{"images", "verify"}, 2, "", "give one image digest, or --all"},
		{"rm unknown", []string{"images", "rm", "sha256:" + strings.Repeat("b", 64)}, 1, "", "not in the store"},
		{"import junk", []string{"images", "import", lock}, 1, "", "not a docker-archive tarball"},
		{"build-local unknown", []string{"images", "build-local", "--only", "ruby"}, 2, "", "choose among controller, demo-controller, python, controller-claude, controller-codex, controller-gemini, controller-opencode, controller-qwen"},
		{"bad cap", []string{"images", "pull", pinned, "--max-files", "0"}, 2, "", "--max-files"},
		{"rm", []string{"images", "rm", pinned[strings.Index(pinned, "@")+1:]}, 0, "removed sha256:", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sr(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ~ %q, stderr ~ %q", r.code, tc.code, r.stdout, r.stderr, tc.stdout, tc.stderr)
			}
		})
	}
	if r := sr("images", "ls", "--json"); r.code != 0 || strings.Count(r.stdout, `"digest"`) != 2 {
		t.Errorf("ls after rm: %+v", r)
	}
}
