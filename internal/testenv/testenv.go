// Package testenv gates tests on what the machine has — root, a tool, the local images — the
// way Go's own internal/testenv does. Outside CI a missing prerequisite skips the test with the
// reason; under CI=true it fails the test and names what is missing, because a skip in CI hides
// exactly the breaks a fresh machine finds. Only SEALRUN_NO_ROOT_TESTS (make test-unit), an
// explicit opt-out, skips root tests under CI too.
package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/BurntSushi/toml"
)

// InCI reports whether the tests run under CI (CI=true, as .ci/run sets).
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing skips the test, or under CI fails it, saying what is missing and how to get it.
func Missing(t testing.TB, what string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true and this test's prerequisite is missing: %s", what)
	}
	t.Skip(what)
}

// RequireRoot gates a test that needs root (namespaces, cgroups, runc, chown).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv("SEALRUN_NO_ROOT_TESTS") != "" {
		t.Skip("SEALRUN_NO_ROOT_TESTS is set (make test-unit)")
	}
	if os.Geteuid() != 0 {
		Missing(t, "needs root (namespaces, cgroups, runc); make test runs it as root in CI")
	}
}

// RequireTool gates a test on a command in PATH and returns its path; pkg names the Debian
// package that provides it (make deps installs it).
func RequireTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" is not installed (Debian package "+pkg+"; make deps installs it)")
	}
	return p
}

// Images are the local test images make test builds into SEALRUN_TEST_STATE: their store
// directory and lock entries (name@sha256:...).
type Images struct {
	State string
	Refs  map[string]string // "controller", "python" -> ref
}

// Rootfs is the unpacked rootfs of the image named key in the store.
func (im Images) Rootfs(t testing.TB, key string) string {
	t.Helper()
	ref, ok := im.Refs[key]
	if !ok {
		t.Fatalf("%s/images.lock has no %s image; rebuild with make test", im.State, key)
	}
	_, digest, _ := strings.Cut(ref, "@sha256:")
	return filepath.Join(im.State, "images", "sha256", digest, "rootfs")
}

// LocalImages gates a test on the local images (root tests only).
func LocalImages(t testing.TB) Images {
	t.Helper()
	state := os.Getenv("SEALRUN_TEST_STATE")
	if state == "" {
		Missing(t, "SEALRUN_TEST_STATE is not set: run through make test, which builds the local images")
	}
	var lock struct{ Images map[string]string }
	if _, err := toml.DecodeFile(filepath.Join(state, "images.lock"), &lock); err != nil {
		Missing(t, "the local images' lock: "+err.Error()+"; make test builds the images first")
	}
	refs := lock.Images
	return Images{State: state, Refs: refs}
}

// AIRSDigitsData is the raw data directory of the shipped AIRS task DigitsClassificationAccuracy
// (scikit-learn's digits.csv.gz from Debian's python3-sklearn), which make test fetches with
// scripts/airs-digits-data.sh into SEALRUN_TEST_STATE/airs-digits-raw before the tests run:
// tests themselves never fetch.
func AIRSDigitsData(t testing.TB) string {
	t.Helper()
	state := os.Getenv("SEALRUN_TEST_STATE")
	if state == "" {
		Missing(t, "SEALRUN_TEST_STATE is not set: run through make test, which fetches the AIRS digits data")
	}
	dir := filepath.Join(state, "airs-digits-raw")
	if _, err := os.Stat(filepath.Join(dir, "digits.csv.gz")); err != nil {
		Missing(t, fmt.Sprintf("the raw data of the AIRS task DigitsClassificationAccuracy (%v); make test makes it with scripts/airs-digits-data.sh %s", err, dir))
	}
	return dir
}

// KillByEnv kills (SIGKILL) every process whose environment holds the entry kv: what a killed
// test process started and marked so (a sealrund with SEALRUN_TEST_RUNDIR, a Slurm cluster's
// daemons and job steps with SLURM_CONF), which outlives it. It returns how many it killed.
func KillByEnv(kv string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(b), "\x00") {
			if e == kv {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() && syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
				break
			}
		}
	}
	return n
}

// RunDir makes a sandbox run directory for this test, /run/sealrun-test-PID-*, removed at
// cleanup. First it hands every such directory whose test process is gone to reap (normally
// sandbox.ReapRunDir): a test binary killed mid-run (a timeout, a cancelled CI job) never ran
// its cleanups, and what its hosts left — containers, cgroups, a gateway netns, UID ranges —
// would otherwise make the next run of the same test fail with "run id in use". A sealrund the
// test started with SEALRUN_TEST_RUNDIR=DIR in its environment is killed first. The sweep holds
// an flock so that test processes of several packages do not reap the same directory at once.
func RunDir(t testing.TB, reap func(ctx context.Context, runDir string) error) string {
	t.Helper()
	const prefix = "sealrun-test-"
	if lock, err := os.OpenFile("/run/"+prefix+"reap.lock", os.O_CREATE|os.O_RDWR, 0o600); err == nil {
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX) == nil {
			old, _ := filepath.Glob("/run/" + prefix + "*-*")
			for _, dir := range old {
				pidText, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), prefix), "-")
				pid, err := strconv.Atoi(pidText)
				if !ok || err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
					continue // not of this scheme, or its process lives
				}
				KillByEnv("SEALRUN_TEST_RUNDIR=" + dir) // a sealrund it started
				if err := reap(context.Background(), dir); err != nil {
					t.Logf("reap %s, left by a test process that is gone: %v", dir, err)
				}
			}
		}
		lock.Close()
	}
	dir, err := os.MkdirTemp("/run", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// GoBuild builds the module's package pkg ("cmd/runner") to out, static (CGO off), as the tests
// that run a command of the module need it. Where SEALRUN_TEST_BIN_DIR is set (the cgroup v2
// guest, which has no Go toolchain: make test-cgroup2 builds them on the host) it copies the
// prebuilt DIR/<base name of pkg> instead.
func GoBuild(out, pkg string) ([]byte, error) {
	if dir := os.Getenv("SEALRUN_TEST_BIN_DIR"); dir != "" {
		src := filepath.Join(dir, filepath.Base(pkg))
		b, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("SEALRUN_TEST_BIN_DIR has no prebuilt %s: %w (make test-cgroup2 builds every command the tests run)", pkg, err)
		}
		return nil, os.WriteFile(out, b, 0o755)
	}
	cmd := exec.Command("go", "build", "-o", out, "github.com/sealrun/sealrun/"+pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd.CombinedOutput()
}

// CBuild builds the module's C command pkg ("cmd/runner-exec", its one source file main.c) to
// out, static, as make build does (CC, default cc). Where SEALRUN_TEST_BIN_DIR is set it copies
// the prebuilt DIR/<base name of pkg> instead, as GoBuild does.
func CBuild(out, pkg string) ([]byte, error) {
	if dir := os.Getenv("SEALRUN_TEST_BIN_DIR"); dir != "" {
		return GoBuild(out, pkg)
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return nil, fmt.Errorf("build %s: cannot find the module's source", pkg)
	}
	src := filepath.Join(filepath.Dir(self), "..", "..", pkg, "main.c")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	return exec.Command(cc, "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src).CombinedOutput()
}

// Slow is how many times slower than this project's development machines the tests run here:
// SEALRUN_TEST_SLOW (default 1; make test-cgroup2's emulated guest sets it). Tests whose runs
// must reach a point of their budget before it ends (the reserve window, say) stretch the budget
// by it, never their checks.
func Slow() int {
	if n, err := strconv.Atoi(os.Getenv("SEALRUN_TEST_SLOW")); err == nil && n > 1 {
		return n
	}
	return 1
}

// Runtime is the OCI runtime the root tests' sandbox hosts drive: SEALRUN_TEST_RUNTIME ("runc",
// "crun" or "runsc"; "" is runc). make test-cgroup2 runs the sandbox and a sealed run again
// under crun with it.
func Runtime() string { return os.Getenv("SEALRUN_TEST_RUNTIME") }

// RoleRuntimes are the roles that SEALRUN_TEST_ROLE_RUNTIMES ("runner=runsc,grader=runsc") gives
// a runtime of their own on the sandbox hosts of sandboxtest, as [runtimes] does in sealrun.toml.
func RoleRuntimes() map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(os.Getenv("SEALRUN_TEST_ROLE_RUNTIMES"), ",") {
		if role, rt, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			out[role] = rt
		}
	}
	return out
}

// BareRuncBundle writes a bundle of `runc spec`'s default config running args from rootfs
// (read-only, no terminal) into a new directory, and returns it: the baseline the benchmarks
// measure a sealed container against.
func BareRuncBundle(t testing.TB, rootfs string, args ...string) string {
	t.Helper()
	bundle := filepath.Join(t.TempDir(), "bundle")
	os.MkdirAll(bundle, 0o755)
	if out, err := exec.Command("runc", "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v %s", err, out)
	}
	var spec map[string]any
	data, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("runc spec's config.json: %v", err)
	}
	spec["root"] = map[string]any{"path": rootfs, "readonly": true}
	proc := spec["process"].(map[string]any)
	proc["terminal"], proc["args"] = false, args
	data, _ = json.Marshal(spec)
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle
}

// ForkBombPython is a Python program that forks sleeping children until a fork fails, then
// prints "stopped after N forks: REASON" and exits 0 (or "unbounded N" after 1,000 forks): the
// pids limit's test, in the sandbox and through a compute call.
const ForkBombPython = `import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    print("unbounded", n)
except OSError as e:
    print("stopped after", n, "forks:", e.strerror, flush=True)
    os._exit(0)`
