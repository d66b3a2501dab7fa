package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// TestGPUCheckDryRun rehearses the one-command GPU check (scripts/gpu-check.sh) on this machine,
// so that the call on a GPU machine is not its first run: pack the kit (the binaries this test
// built; .debs rebuilt from the files Debian's runc, libseccomp2 and busybox-static installed
// here, since a test fetches nothing), then check --dry-run: a stand-in GPU (device nodes with no
// driver behind them), sealrun's own CDI spec for it in a private /etc/cdi, the runner image
// made from a "host" Python (the python image's debootstrap root) through sealrun's import path,
// doctor, the probe and the training step with the stand-in GPU, and a whole sealed run given
// it. Every step must pass, the kit must fit the 64 MiB a call carries, and OUT must hold the
// files the check promises and no more than eight.
func TestGPUCheckDryRun(t *testing.T) {
	testenv.RequireRoot(t)
	cache := os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	if cache == "" {
		testenv.Missing(t, "SEALRUN_TEST_BUILD_CACHE is not set: make test sets it to the build cache the python image was built with (the dry run's host Python)")
	}
	// The kit's binaries: the ones the tests build (static), all six.
	bin := filepath.Dir(sandboxtest.Static(t, "cmd/sealrun"))
	for _, c := range []string{"cmd/sealrund", "cmd/runner", "cmd/sealrun-netns-hook"} {
		sandboxtest.Static(t, c)
	}
	testenv.RequireTool(t, "dpkg-deb", "dpkg")
	testenv.RequireTool(t, "unshare", "util-linux")
	debs := t.TempDir()
	for _, pkg := range []string{"runc", "libseccomp2", "busybox-static"} {
		rebuildDeb(t, pkg, debs)
	}
	work := t.TempDir()
	kit := filepath.Join(work, "gpu-kit")
	pack := exec.Command("bash", "scripts/gpu-check.sh", "pack", kit)
	pack.Dir = ".."
	pack.Env = append(os.Environ(), "GPU_CHECK_PREBUILT="+bin, "GPU_CHECK_DEBS="+debs)
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("gpu-check.sh pack: %v\n%s", err, out)
	} else {
		t.Logf("pack:\n%s", out)
	}
	_, err := os.Stat("/etc/cdi")
	cdiBefore := err == nil
	out := filepath.Join(work, "out")
	check := exec.Command("bash", "scripts/gpu-check.sh", "check", "--dry-run", kit, out)
	check.Dir = ".."
	// The prefix holds the image store containers reach: a directory others may pass through.
	prefix, err := os.MkdirTemp("", "sealrun-gpu-check-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(prefix, 0o755)
	t.Cleanup(func() { os.RemoveAll(prefix) })
	check.Env = append(os.Environ(), "GPU_CHECK_PREFIX="+prefix, "SEALRUN_TEST_BUILD_CACHE="+cache)
	b, err := check.CombinedOutput()
	t.Logf("check --dry-run:\n%s", b)
	summary, _ := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil || !strings.Contains(string(summary), "RESULT: every step passed") {
		for _, f := range []string{"run.txt", "train.txt", "doctor.txt", "probe.json", "host.txt"} {
			if b, err := os.ReadFile(filepath.Join(out, f)); err == nil {
				t.Logf("%s:\n%s", f, b)
			}
		}
		t.Fatalf("gpu-check.sh check --dry-run: %v\n%s", err, summary)
	}
	files, _ := os.ReadDir(out)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	if strings.Join(names, " ") != "cdi.json doctor.txt host.txt probe.json result.att.json run.txt summary.txt train.txt" {
		t.Errorf("OUT holds %v", names)
	}
	for _, want := range []string{"sealrun's own generator (sealrun sandbox cdi)", "the prefix's, overlaid on /usr/lib/x86_64-linux-gnu", "runner image: imported sealrun-gpu/python@sha256:",
		"train bytes/s: bare ", "ok step run"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	var spec struct{ Devices []struct{ Name string } }
	if b, _ := os.ReadFile(filepath.Join(out, "cdi.json")); json.Unmarshal(b, &spec) != nil || len(spec.Devices) != 3 {
		t.Errorf("cdi.json: %+v", spec)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "probe.json")); !strings.Contains(string(b), `"ok": true`) {
		t.Errorf("probe.json:\n%s", b)
	}
	var env struct{ Payload []byte }
	var stmt struct {
		Predicate struct {
			Host struct {
				GPUModel string `json:"gpu_model"`
				Runtime  string `json:"runtime_version"`
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "result.att.json")); json.Unmarshal(b, &env) != nil || json.Unmarshal(env.Payload, &stmt) != nil ||
		stmt.Predicate.Host.GPUModel != "nvidia.com/gpu=0" || stmt.Predicate.Host.Runtime == "" {
		t.Errorf("the run's attestation: host %+v; want the stand-in GPU and Debian's runc", stmt.Predicate.Host)
	}
	// The stand-in GPU's spec stayed in the check's own /etc/cdi: this machine's is as it was.
	if _, err := os.Stat(filepath.Join("/etc/cdi", "sealrun-nvidia.json")); err == nil {
		t.Error("the dry run's CDI spec reached this machine's /etc/cdi")
	}
	if _, err := os.Stat("/etc/cdi"); (err == nil) != cdiBefore {
		t.Errorf("/etc/cdi existed before the check: %v; after: %v", cdiBefore, err == nil)
	}
}

// rebuildDeb makes a .deb of an installed Debian package from its files (dpkg -L): the test's
// stand-in for apt-get download, which would leave the machine.
func rebuildDeb(t *testing.T, pkg, dir string) {
	t.Helper()
	list, err := exec.Command("dpkg", "-L", pkg).Output()
	if err != nil {
		testenv.Missing(t, pkg+" is not installed (make deps installs it)")
	}
	root := filepath.Join(t.TempDir(), pkg)
	for _, p := range strings.Split(strings.TrimSpace(string(list)), "\n") {
		fi, err := os.Lstat(p)
		if st, serr := os.Stat(p); err != nil || serr != nil || st.IsDir() { // a directory, or a link to one (a merged /usr's /bin)
			continue
		}
		dst := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			os.Symlink(target, dst)
			continue
		}
		if b, err := exec.Command("cp", "-p", p, dst).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v %s", p, err, b)
		}
	}
	os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755)
	os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte("Package: "+pkg+"\nVersion: 0-rebuilt\nArchitecture: amd64\nMaintainer: sealrun tests <tests@sealrun.invalid>\nDescription: "+pkg+" rebuilt from its installed files\n"), 0o644)
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root, filepath.Join(dir, pkg+".deb")).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build %s: %v\n%s", pkg, err, b)
	}
}
