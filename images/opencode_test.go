package images

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// A registry that serves other bytes for the pinned opencode version refuses the build, naming
// both hashes and the pin; nothing is kept in the cache.
func TestFetchOpencodeRefusesAnotherTarball(t *testing.T) {
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Path
		w.Write([]byte("not the opencode tarball"))
	}))
	defer srv.Close()
	cache := t.TempDir()
	_, err := fetchOpencode(context.Background(), BuildOptions{CacheDir: cache, NPMRegistry: srv.URL, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "sealrun pins "+OpencodeTarballSHA256) || !strings.Contains(err.Error(), "the build is refused") {
		t.Fatalf("fetch of other bytes: %v", err)
	}
	if want := "/" + OpencodePackage + "/-/" + OpencodePackage + "-" + OpencodeVersion + ".tgz"; asked != want {
		t.Errorf("asked the registry for %s; want %s", asked, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "npm")); len(entries) != 0 {
		t.Errorf("the refused tarball was kept: %v", entries)
	}
	srv.Close()
	if _, err := fetchOpencode(context.Background(), BuildOptions{CacheDir: cache, NPMRegistry: srv.URL, Log: io.Discard}); err == nil || !strings.Contains(err.Error(), "fetch opencode "+OpencodeVersion) {
		t.Errorf("an unreachable registry: %v", err)
	}
}

// The opencode controller image make test built: the pinned binary, bash, ripgrep and git, no
// Python, the scaffold's command and labels; and a second build into a fresh store from the
// same cache gives the same digest.
func TestLocalOpencodeImage(t *testing.T) {
	testenv.RequireRoot(t)
	im := testenv.LocalImages(t)
	ref, ok := im.Refs["controller-opencode"]
	if !ok {
		t.Fatalf("%s/images.lock has no controller-opencode image", im.State)
	}
	s, err := OpenStore(im.State)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := ParsePinned(ref)
	root, err := s.Rootfs(d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr/local/bin/opencode", "usr/bin/bash", "usr/bin/rg", "usr/bin/git", "opt/sealrun/scaffold/opencode.sh", "workspace", "run/sealrun/agent.sock"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the opencode image lacks %s: %v", p, err)
		}
	}
	assertNoPython(t, root)
	cf, err := s.Config(d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	if l := cf.Config.Labels; l[LabelScaffoldName] != "opencode" || l[LabelScaffoldVer] != OpencodeVersion || l[LabelScaffoldConfig] != OpencodeConfigSHA256() {
		t.Errorf("labels %v", l)
	}
	if ep := strings.Join(cf.Config.Entrypoint, " "); ep != "/bin/bash "+opencodeScaffoldPath {
		t.Errorf("entrypoint %q", ep)
	}
	cache := os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	if cache == "" {
		t.Fatal("SEALRUN_TEST_BUILD_CACHE is not set: make test sets it")
	}
	fresh, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	built, err := fresh.BuildLocal(context.Background(), t.TempDir(), BuildOptions{Images: []string{"controller-opencode"}, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if built[0].Ref != ref {
		t.Errorf("a second build gave %s; make test's gave %s", built[0].Ref, ref)
	}
}

// tracks/ari-v1.toml pins the opencode this sealrun builds: its version and config hash.
func TestARITrackPinsThisOpencode(t *testing.T) {
	b, err := os.ReadFile("../tracks/ari-v1.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name = "opencode"`, `version = "` + OpencodeVersion + `"`, `config_sha256 = "` + OpencodeConfigSHA256() + `"`, LocalOpencodeControllerName + "@sha256:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("tracks/ari-v1.toml lacks %s", want)
		}
	}
}
