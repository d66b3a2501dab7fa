package builder

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/scaffolds"
)

// A registry that serves other bytes for a pinned npm version refuses the build, naming both
// hashes and the pin; nothing is kept in the cache. The scoped packages are asked for by their
// registry paths.
func TestFetchNPMRefusesAnotherTarball(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path)
		w.Write([]byte("not the tarball"))
	}))
	defer srv.Close()
	cache := t.TempDir()
	codex, _ := scaffolds.Lookup("codex")
	n := codex.NPM[0]
	_, err := fetchNPM(context.Background(), BuildOptions{CacheDir: cache, NPMRegistry: srv.URL, Log: io.Discard}, "controller-codex", n)
	if err == nil || !strings.Contains(err.Error(), "sealrun pins "+n.SHA256) || !strings.Contains(err.Error(), "the build is refused") || !strings.Contains(err.Error(), "scaffolds/codex/scaffold.toml") {
		t.Fatalf("fetch of other bytes: %v", err)
	}
	if want := "/@openai/codex/-/codex-0.171.0-linux-x64.tgz"; len(asked) != 1 || asked[0] != want {
		t.Errorf("asked the registry for %v; want %s", asked, want)
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "npm")); len(entries) != 0 {
		t.Errorf("the refused tarball was kept: %v", entries)
	}
	srv.Close()
	if _, err := fetchNPM(context.Background(), BuildOptions{CacheDir: cache, NPMRegistry: srv.URL, Log: io.Discard}, "controller-codex", n); err == nil || !strings.Contains(err.Error(), "fetch @openai/codex 0.171.0-linux-x64 from npm") {
		t.Errorf("an unreachable registry: %v", err)
	}
}

func tgz(t *testing.T, entries ...*tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := []byte("content of " + h.Name)
		if h.Typeflag == tar.TypeReg || h.Typeflag == 0 {
			h.Size = int64(len(body))
		}
		tw.WriteHeader(h)
		if h.Size > 0 {
			tw.Write(body)
		}
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "p.tgz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

// What a recipe takes of a tarball: one file, or a directory's files (executables marked), and
// nothing else; a link or a name outside the package refuses the tarball.
func TestExtractNPM(t *testing.T) {
	p := tgz(t, &tar.Header{Name: "package/bin/tool", Mode: 0o755, Typeflag: tar.TypeReg}, &tar.Header{Name: "package/lib/a.js", Mode: 0o644, Typeflag: tar.TypeReg},
		&tar.Header{Name: "package/vendor/rg", Mode: 0o644, Typeflag: tar.TypeReg}, &tar.Header{Name: "other/x", Mode: 0o644, Typeflag: tar.TypeReg})
	root := t.TempDir()
	if err := extractNPM(p, scaffolds.NPM{Take: "package/bin/tool", To: "/usr/local/bin/tool"}, root); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(root, "usr/local/bin/tool")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("one file: %v %v", st, err)
	}
	if err := extractNPM(p, scaffolds.NPM{Take: "package/", To: "/opt/pkg", Executables: []string{"vendor/rg"}}, root); err != nil {
		t.Fatal(err)
	}
	for f, mode := range map[string]os.FileMode{"opt/pkg/lib/a.js": 0o644, "opt/pkg/vendor/rg": 0o755, "opt/pkg/bin/tool": 0o755} {
		if st, err := os.Stat(filepath.Join(root, f)); err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: %v %v; want mode %v", f, st, err, mode)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "opt/pkg/../x")); err == nil {
		t.Error("a file outside package/ was taken")
	}
	for name, bad := range map[string]*tar.Header{
		"a symlink":    {Name: "package/bin/evil", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink},
		"a hard link":  {Name: "package/bin/evil", Linkname: "package/bin/tool", Typeflag: tar.TypeLink},
		"a dotdot":     {Name: "package/../../etc/x", Mode: 0o644, Typeflag: tar.TypeReg},
		"a device":     {Name: "package/dev", Typeflag: tar.TypeChar},
		"nothing here": {Name: "other/file", Mode: 0o644, Typeflag: tar.TypeReg},
	} {
		if err := extractNPM(tgz(t, bad), scaffolds.NPM{Take: "package/", To: "/opt/pkg"}, t.TempDir()); err == nil {
			t.Errorf("%s was taken", name)
		}
	}
}

// Each scaffold's controller image make test built: its CLI where its recipe puts it, bash,
// ripgrep and git, no Python, the entrypoint and the scaffold's labels; a second build of
// opencode's into a fresh store from the same cache gives the same digest.
func TestLocalScaffoldImages(t *testing.T) {
	testenv.RequireRoot(t)
	im := testenv.LocalImages(t)
	s, err := images.OpenStore(im.State)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scaffolds.All() {
		t.Run(sc.Name, func(t *testing.T) {
			ref, ok := im.Refs[sc.ImageKey()]
			if !ok {
				t.Fatalf("%s/images.lock has no %s image; make test builds it (sealrun images build-local)", im.State, sc.ImageKey())
			}
			d, _ := images.ParsePinned(ref)
			root, err := s.Rootfs(d.DigestStr())
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"usr/bin/bash", "usr/bin/rg", "usr/bin/git", strings.TrimPrefix(scaffolds.EntrypointPath, "/"), "workspace", "run/sealrun/agent.sock"}
			for _, n := range sc.NPM {
				want = append(want, strings.TrimPrefix(n.To, "/"))
			}
			for _, p := range want {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("the %s image lacks %s: %v", sc.Name, p, err)
				}
			}
			assertNoPython(t, root)
			cf, err := s.Config(d.DigestStr())
			if err != nil {
				t.Fatal(err)
			}
			if l := cf.Config.Labels; l[images.LabelScaffoldName] != sc.Name || l[images.LabelScaffoldVer] != sc.Version || l[images.LabelScaffoldConfig] != sc.ConfigSHA256() {
				t.Errorf("labels %v", l)
			}
			if ep := strings.Join(cf.Config.Entrypoint, " "); ep != "/bin/bash "+scaffolds.EntrypointPath {
				t.Errorf("entrypoint %q", ep)
			}
		})
	}
	cache := os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	if cache == "" {
		t.Fatal("SEALRUN_TEST_BUILD_CACHE is not set: make test sets it")
	}
	fresh, err := images.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	built, err := BuildLocal(context.Background(), fresh, t.TempDir(), BuildOptions{Images: []string{"controller-opencode"}, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if built[0].Ref != im.Refs["controller-opencode"] {
		t.Errorf("a second build gave %s; make test's gave %s", built[0].Ref, im.Refs["controller-opencode"])
	}
}

// tracks/ari-v1.toml pins the opencode this sealrun builds: its version and config hash.
func TestARITrackPinsThisOpencode(t *testing.T) {
	b, err := os.ReadFile("../../tracks/ari-v1.toml")
	if err != nil {
		t.Fatal(err)
	}
	oc, _ := scaffolds.Lookup("opencode")
	for _, want := range []string{`name = "opencode"`, `version = "` + oc.Version + `"`, `config_sha256 = "` + oc.ConfigSHA256() + `"`, oc.ImageName() + "@sha256:"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("tracks/ari-v1.toml lacks %s", want)
		}
	}
}
