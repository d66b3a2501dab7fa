package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// GoTools builds programs someone else wrote, from the Go module proxy, once: a scratch module
// (go.mod naming it, files of ours beside it, such as a main.go over their packages), `go get`
// of each of get ("module/pkg@version"), then `go build` of each pkgs entry (binary name ->
// package path, "." for the scratch module itself). The binaries go to
// SEALRUN_TEST_BUILD_CACHE/tools/NAME-<hash of the inputs>/ (the user's cache where it is not
// set) and are reused while the inputs are the same. A build that fails (no network to the
// proxy, a version it does not serve) is Missing: under CI the test fails naming it.
func GoTools(t testing.TB, name string, files map[string]string, get []string, pkgs map[string]string) map[string]string {
	t.Helper()
	cache := os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	if cache == "" {
		uc, err := os.UserCacheDir()
		if err != nil {
			Missing(t, "no cache directory for "+name+": set SEALRUN_TEST_BUILD_CACHE")
		}
		cache = filepath.Join(uc, "sealrun-test")
	}
	h := sha256.New()
	fmt.Fprintln(h, name, get)
	for _, k := range sortedKeys(files) {
		fmt.Fprintln(h, k, files[k])
	}
	for _, k := range sortedKeys(pkgs) {
		fmt.Fprintln(h, k, pkgs[k])
	}
	dir := filepath.Join(cache, "tools", name+"-"+hex.EncodeToString(h.Sum(nil))[:12])
	out := map[string]string{}
	have := true
	for bin := range pkgs {
		out[bin] = filepath.Join(dir, "bin", bin)
		if _, err := os.Stat(out[bin]); err != nil {
			have = false
		}
	}
	if have {
		return out
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), name+".build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	for f, content := range files {
		if err := os.WriteFile(filepath.Join(work, f), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		if b, err := cmd.CombinedOutput(); err != nil {
			Missing(t, fmt.Sprintf("%s: go %s in %s failed (it fetches from the Go module proxy): %v\n%s", name, strings.Join(args, " "), work, err, b))
		}
	}
	t.Logf("building %s from the Go module proxy into %s (once)", name, dir)
	for _, g := range get {
		run("get", g)
	}
	for _, bin := range sortedKeys(pkgs) {
		run("build", "-trimpath", "-o", filepath.Join(work, "bin", bin), pkgs[bin])
	}
	if err := os.Rename(work, dir); err != nil && !dirHas(dir, pkgs) {
		t.Fatalf("keep %s: %v", dir, err)
	}
	return out
}

func dirHas(dir string, pkgs map[string]string) bool {
	for bin := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, "bin", bin)); err != nil {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// GoModuleDir is the directory of module@version as the Go module proxy serves it (its files,
// read-only, in the module cache: `go mod download`), for tests that read what others wrote
// (another project's test data). A download that fails is Missing: under CI the test fails
// naming it.
func GoModuleDir(t testing.TB, module, version string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	b, err := cmd.Output()
	if err != nil {
		Missing(t, fmt.Sprintf("go mod download %s@%s failed (it fetches from the Go module proxy): %v\n%s", module, version, err, b))
	}
	var got struct{ Dir, Error string }
	if err := json.Unmarshal(b, &got); err != nil || got.Dir == "" {
		Missing(t, fmt.Sprintf("go mod download %s@%s: %v %s", module, version, err, got.Error))
	}
	return got.Dir
}
