package builder

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/testenv"
)

func TestBuildLocalController(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "busybox-static is not installed (make deps installs it)")
	}
	ctx := context.Background()
	var refs []string
	var rootfs string
	for i := 0; i < 2; i++ { // two separate stores and caches: the same rootfs must give the same digest
		dir := t.TempDir()
		s, err := images.OpenStore(dir, images.WithUnpackOptions(images.UnpackOptions{Chown: os.Geteuid() == 0}))
		if err != nil {
			t.Fatal(err)
		}
		built, err := BuildLocal(ctx, s, dir, BuildOptions{Images: []string{"controller"}})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, built[0].Ref)
		again, err := BuildLocal(ctx, s, dir, BuildOptions{Images: []string{"controller"}})
		if err != nil || !again[0].Cached || again[0].Ref != built[0].Ref {
			t.Errorf("second build not served from the cache: %+v %v", again, err)
		}
		d, _ := images.ParsePinned(built[0].Ref)
		rootfs, _ = s.Rootfs(d.DigestStr())
	}
	if refs[0] != refs[1] {
		t.Errorf("not reproducible: %s vs %s", refs[0], refs[1])
	}
	if !strings.HasPrefix(refs[0], LocalControllerName+"@sha256:") {
		t.Errorf("ref = %s", refs[0])
	}
	assertNoPython(t, rootfs)
	if fi, err := os.Lstat(filepath.Join(rootfs, "bin/sh")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("bin/sh: %v", err)
	}
	if out, err := exec.Command(filepath.Join(rootfs, "bin/busybox"), "echo", "ok").Output(); err != nil || string(out) != "ok\n" {
		t.Errorf("busybox in the image does not run: %v %q", err, out)
	}
}

// pythonName is a Python interpreter's name (python, python3, python3.11, pythonw, ...).
var pythonName = regexp.MustCompile(`^python[0-9.]*[mw]?$`)

// assertNoPython fails if a Python interpreter, a Python library directory or a Python source
// is in the tree. (A file that merely mentions python, a syntax-highlighting grammar of a web
// page say, is not one.)
func assertNoPython(t *testing.T, rootfs string) {
	t.Helper()
	filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n := strings.ToLower(d.Name())
		if pythonName.MatchString(n) || (d.IsDir() && (strings.HasPrefix(n, "python") || n == "site-packages" || n == "dist-packages")) || strings.HasSuffix(n, ".py") || strings.HasSuffix(n, ".pyc") {
			t.Errorf("controller image holds %s", p)
		}
		return nil
	})
}

// The python image is built by `make test` (bin/sealrun images build-local into
// SEALRUN_TEST_STATE, from a cache kept between runs), since debootstrap takes minutes.
func TestLocalPythonImage(t *testing.T) {
	testenv.RequireRoot(t)
	state := testenv.LocalImages(t).State
	lock, err := images.ReadLock(filepath.Join(state, "images.lock"))
	if err != nil {
		t.Fatal(err)
	}
	ref, ok := lock["python"]
	if !ok {
		t.Fatalf("%s/images.lock has no python image", state)
	}
	s, err := images.OpenStore(state)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := images.ParsePinned(ref)
	rootfs, err := s.Rootfs(d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"usr/bin/python3", "usr/lib/python3/dist-packages/numpy", "usr/lib/python3/dist-packages/torch"} {
		if _, err := os.Stat(filepath.Join(rootfs, p)); err != nil {
			t.Errorf("python image lacks %s: %v", p, err)
		}
	}
	for _, p := range append([]string{"dev/null", "proc/self", "var/cache/apt/archives/partial", ".sealrun-complete"}, hostTraces...) {
		if _, err := os.Lstat(filepath.Join(rootfs, p)); err == nil {
			t.Errorf("python image holds %s", p)
		}
	}
	ctrl, ok := lock["controller"]
	if !ok {
		t.Fatal("images.lock has no controller image")
	}
	cd, _ := images.ParsePinned(ctrl)
	croot, err := s.Rootfs(cd.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	assertNoPython(t, croot)
}

// The demo controller image: no Python either, the scripted scaffold as its command, labelled
// with the scaffold pin a track checks.
func TestBuildLocalDemoController(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		testenv.Missing(t, "busybox-static is not installed (make deps installs it)")
	}
	dir := t.TempDir()
	s, err := images.OpenStore(dir, images.WithUnpackOptions(images.UnpackOptions{Chown: os.Geteuid() == 0}))
	if err != nil {
		t.Fatal(err)
	}
	built, err := BuildLocal(context.Background(), s, dir, BuildOptions{Images: []string{"demo-controller"}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := images.ParsePinned(built[0].Ref)
	cf, err := s.Config(d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	l := cf.Config.Labels
	if l[images.LabelScaffoldName] != DemoScaffoldName || l[images.LabelScaffoldVer] != DemoScaffoldVersion || l[images.LabelScaffoldConfig] != DemoScaffoldConfigSHA256() {
		t.Errorf("labels %v", l)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/bin/sh "+demoScaffoldPath {
		t.Errorf("entrypoint %v", cf.Config.Entrypoint)
	}
	rootfs, _ := s.Rootfs(d.DigestStr())
	// The script is in the image as kits/demo-agent has it (its sha256 is the config label).
	b, err := os.ReadFile(filepath.Join(rootfs, demoScaffoldPath))
	if err != nil || fmt.Sprintf("%x", sha256.Sum256(b)) != DemoScaffoldConfigSHA256() {
		t.Errorf("the scaffold in the image: %v", err)
	}
	assertNoPython(t, rootfs)
}
