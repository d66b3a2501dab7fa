package verify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
)

// buildEnv is this process's environment for make build, less what would change the build
// (GOFLAGS, CGO_ENABLED, GOOS, GOARCH, an outer make's flags): those are make build's own.
func buildEnv(testSeams bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "CGO_ENABLED", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "GOTOOLCHAIN", "MAKEFLAGS", "MFLAGS", "MAKELEVEL":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GOTOOLCHAIN=local")
	if testSeams {
		env = append(env, "GOFLAGS=-tags=sealrun_testseams")
	}
	return env
}

// Rebuild is what --rebuild found: each binary the attestation records, its recorded and
// rebuilt SHA-256.
type Rebuild struct {
	Source   string          `json:"source"`
	Commit   string          `json:"commit"`
	Binaries []RebuiltBinary `json:"binaries"`
	Same     bool            `json:"same"`
}

type RebuiltBinary struct {
	Name     string `json:"name"`
	Recorded string `json:"recorded"`
	Rebuilt  string `json:"rebuilt"`
}

// rebuild builds the commit b names from src (a clone or URL of sealrun's repository) with make
// build, as the host did, in a directory of its own, and compares every binary the build record
// hashes. progress gets a line per step.
func rebuild(src string, b *attest.Build, progress io.Writer) (*Rebuild, error) {
	switch {
	case b == nil:
		return nil, notRebuildable(errors.New("the attestation records no build (made before sealrun recorded it)"))
	case b.Modified:
		return nil, notRebuildable(fmt.Errorf("sealrund %s was built from a modified tree (commit %s and uncommitted changes): no commit rebuilds it", b.Version, b.Commit))
	case b.Commit == "" || b.Commit == "unknown":
		return nil, notRebuildable(errors.New("the build record names no commit"))
	}
	goVersion, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return nil, ioErr(opt.New("verify.RunOptions", "Rebuild", fmt.Sprintf("needs the Go toolchain (go env GOVERSION: %v)", err)))
	}
	if got := strings.TrimSpace(string(goVersion)); got != b.GoVersion {
		return nil, ioErr(opt.New("verify.RunOptions", "Rebuild", fmt.Sprintf("sealrund was built with %s, this machine's go is %s: install %s (https://go.dev/dl/) and run again with it first in PATH", b.GoVersion, got, b.GoVersion)))
	}
	work, err := os.MkdirTemp("", "sealrun-rebuild-")
	if err != nil {
		return nil, ioErr(err)
	}
	defer os.RemoveAll(work)
	dir := filepath.Join(work, "src")
	step := func(what string, name string, args ...string) error {
		fmt.Fprintf(progress, "rebuild: %s\n", what)
		cmd := exec.Command(name, args...)
		cmd.Dir = work
		cmd.Env = buildEnv(b.TestSeams)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		done := make(chan struct{})
		go func() { // long work shows progress
			for {
				select {
				case <-done:
					return
				case <-time.After(10 * time.Second):
					fmt.Fprintf(progress, "rebuild: %s (%s)\n", what, time.Since(t0).Round(time.Second))
				}
			}
		}()
		err := cmd.Run()
		close(done)
		if err != nil {
			return ioErr(opt.New("verify.RunOptions", "Rebuild", fmt.Sprintf("%s: %v\n%s", what, err, tail(out.String(), 2000))))
		}
		return nil
	}
	if err := step("clone "+src, "git", "clone", "--quiet", "--no-checkout", src, dir); err != nil {
		return nil, err
	}
	if err := step("check out "+b.Commit, "git", "-C", dir, "checkout", "--quiet", "--detach", b.Commit); err != nil {
		return nil, err
	}
	commit := b.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if b.Toolchain != "" {
		out, err := exec.Command("make", "-s", "-C", dir, "toolchain").Output()
		if got := strings.TrimSpace(string(out)); err == nil && got != b.Toolchain {
			fmt.Fprintf(progress, "rebuild: warning: the helpers were built with %s, this machine has %s: the C helpers (runner-exec, sealrun-hook-relay) will differ; install that compiler and C library to rebuild them\n", b.Toolchain, got)
		}
	}
	args := []string{"-C", dir, "build", "VERSION=" + b.Version, "COMMIT=" + commit}
	if b.Toolchain != "" {
		args = append(args, "TOOLCHAIN="+b.Toolchain)
	}
	if err := step("make build (the Go binaries, then the C helpers)", "make", args...); err != nil {
		return nil, err
	}
	res := &Rebuild{Source: src, Commit: b.Commit, Same: true}
	want := map[string]string{"sealrund": b.DaemonSHA256}
	for k, v := range b.Helpers {
		want[k] = v
	}
	names := make([]string, 0, len(want))
	for k := range want {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, n := range names {
		got, err := fileio.SHA256(filepath.Join(dir, "bin", n))
		if err != nil {
			got = "not built (" + fileio.Cause(err).Error() + ")"
		}
		res.Binaries = append(res.Binaries, RebuiltBinary{Name: n, Recorded: want[n], Rebuilt: got})
		res.Same = res.Same && got == want[n]
	}
	return res, nil
}

func WriteRebuild(w io.Writer, r *Rebuild) {
	verdict := "every binary rebuilt byte for byte"
	if !r.Same {
		verdict = "DIFFERS: what ran is not what this commit builds"
	}
	fmt.Fprintf(w, "  rebuild    commit %s from %s: %s\n", r.Commit, r.Source, verdict)
	for _, b := range r.Binaries {
		mark := "same"
		if b.Rebuilt != b.Recorded {
			mark = "DIFFERS: rebuilt " + b.Rebuilt
		}
		fmt.Fprintf(w, "             %-20s %s %s\n", b.Name, b.Recorded, mark)
	}
}

// tail keeps the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// notRebuildable is a build record no commit rebuilds: the rebuild check fails, naming why.
type notRebuildableError struct{ err error }

func (e *notRebuildableError) Error() string { return e.err.Error() }

func notRebuildable(err error) error { return &notRebuildableError{err} }
