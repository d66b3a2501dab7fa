package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// binaries are what make build makes, each hashed by a build record.
var binaries = []string{"sealrun", "sealrund", "runner", "runner-exec", "sealrun-netns-hook", "sealrun-hook-relay"}

// A reader rebuilds what ran. The committed HEAD is built twice: once as another user (nobody,
// where root), from a clone at another path, with its own HOME, GOPATH and an empty GOCACHE,
// umask 077 and another time zone; then by sealrun verify --rebuild, from this repository, with
// the caller's environment, for an attestation whose build record holds the first build's
// hashes: every binary is byte-identical. A commit that changes one line builds another sealrund.
func TestRebuildIsByteForByte(t *testing.T) {
	for _, tool := range []string{"git", "make", "cc"} {
		testenv.RequireTool(t, tool, map[string]string{"git": "git", "make": "make", "cc": "gcc"}[tool])
	}
	repo, _ := filepath.Abs("..")
	head := strings.TrimSpace(run(t, repo, nil, "git", "rev-parse", "HEAD"))
	version := "rebuild-test-" + head[:7]
	modcache := strings.TrimSpace(run(t, repo, nil, "go", "env", "GOMODCACHE"))
	gocache := strings.TrimSpace(run(t, repo, nil, "go", "env", "GOCACHE"))
	base := t.TempDir()
	os.Chmod(base, 0o755)
	for p := filepath.Dir(base); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	other := filepath.Join(base, "elsewhere", "deeper")
	src := filepath.Join(other, "sealrun-src")
	run(t, base, nil, "git", "clone", "--quiet", repo, src)
	home := filepath.Join(other, "home")
	os.MkdirAll(home, 0o755)
	env := []string{"HOME=" + home, "GOPATH=" + filepath.Join(other, "gopath"), "GOCACHE=" + filepath.Join(other, "gocache"),
		"GOMODCACHE=" + modcache, "GOPROXY=off", "GOFLAGS=-mod=readonly", "TZ=Asia/Kathmandu", "PATH=" + os.Getenv("PATH"), "GOTOOLCHAIN=local"}
	build := "umask 077; make -s build VERSION=" + version + " COMMIT=" + head[:12]
	var who string
	if os.Geteuid() == 0 {
		// As nobody: the clone is theirs, the module cache is bound read-only at a path they
		// reach (under root's home it is not).
		mnt := filepath.Join(other, "modcache")
		os.MkdirAll(mnt, 0o755)
		env[3] = "GOMODCACHE=" + mnt
		run(t, base, nil, "chown", "-R", "65534:65534", other)
		unshare := testenv.RequireTool(t, "unshare", "util-linux")
		script := fmt.Sprintf("mount --bind -o ro %q %q && cd %q && exec setpriv --reuid=65534 --regid=65534 --clear-groups env -i %s bash -c %q",
			modcache, mnt, src, strings.Join(quoteAll(env), " "), build)
		run(t, base, nil, unshare, "--mount", "--propagation", "private", "--", "bash", "-c", script)
		who = "nobody"
	} else {
		run(t, src, env, "bash", "-c", build)
		who = "this user"
	}
	first := map[string]string{}
	for _, b := range binaries {
		h, err := fileio.SHA256(filepath.Join(src, "bin", b))
		if err != nil {
			t.Fatal(err)
		}
		first[b] = h
	}
	t.Logf("built %s as %s in %s (GOCACHE empty, umask 077, TZ Asia/Kathmandu): sealrund %s", head[:12], who, src, first["sealrund"])

	// An attestation whose build record holds those hashes, signed with the test key.
	var st attest.Statement
	if err := json.Unmarshal(mustReadFile(t, "../attest/testdata/statement.golden.json"), &st); err != nil {
		t.Fatal(err)
	}
	toolchain := strings.TrimSpace(run(t, repo, nil, "make", "-s", "toolchain"))
	// make build stamps the C toolchain into the build record (buildinfo's toolchain): a binary
	// without it would attest an empty one.
	if v := run(t, src, nil, filepath.Join(src, "bin", "sealrun"), "version"); !strings.Contains(v, "c toolchain") || !strings.Contains(v, toolchain) {
		t.Errorf("sealrun version of the build does not name the toolchain %q make stamps:\n%s", toolchain, v)
	}
	st.Predicate.Build = &attest.Build{Version: version, Commit: head, GoVersion: runtime.Version(), DaemonSHA256: first["sealrund"], Toolchain: toolchain,
		Helpers: map[string]string{"runner": first["runner"], "runner-exec": first["runner-exec"], "sealrun-netns-hook": first["sealrun-netns-hook"], "sealrun-hook-relay": first["sealrun-hook-relay"]}}
	signer, err := attest.LoadSigner(context.Background(), "../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	att := filepath.Join(base, "result.att.json")
	sign := func(b *attest.Build) {
		st.Predicate.Build = b
		env, err := attest.Sign(context.Background(), &st, signer)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(att, env, 0o644)
	}
	sign(st.Predicate.Build)
	sealrun := sandboxtest.Static(t, "cmd/sealrun")
	t0 := time.Now()
	out, err := exec.Command(sealrun, "verify", att, "--key", "../attest/testdata/ed25519.pub", "--rebuild", repo).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "every binary rebuilt byte for byte") || strings.Count(string(out), " same\n") != 5 {
		t.Fatalf("verify --rebuild: %v\n%s", err, out)
	}
	t.Logf("sealrun verify --rebuild (%s):\n%s", time.Since(t0).Round(time.Second), out)

	// One changed line, committed: another sealrund.
	main := filepath.Join(src, "cmd", "sealrund", "main.go")
	b := mustReadFile(t, main)
	os.WriteFile(main, append(b, "\nvar oneChangedLine = \"one changed line\"\n\nfunc init() { _ = oneChangedLine }\n"...), 0o644)
	gitEnv := append(env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	if os.Geteuid() == 0 {
		run(t, base, nil, "chown", "-R", "0:0", other) // root builds it now, with git's VCS stamp
	}
	run(t, src, gitEnv, "git", "commit", "--quiet", "-am", "one changed line")
	again := append(slices.Clone(env), "GOCACHE="+gocache)
	again[3] = "GOMODCACHE=" + modcache // the bind mount was the namespace's
	run(t, src, again, "bash", "-c", "make -s build VERSION="+version+" COMMIT="+head[:12])
	if h, _ := fileio.SHA256(filepath.Join(src, "bin", "sealrund")); h == first["sealrund"] {
		t.Errorf("a changed line built the same sealrund %s", h)
	}
	// A record naming another helper hash: not valid, and the binary named.
	bad := *st.Predicate.Build
	bad.Helpers = map[string]string{"runner": strings.Repeat("0", 64)}
	sign(&bad)
	out, err = exec.Command(sealrun, "verify", att, "--key", "../attest/testdata/ed25519.pub", "--rebuild", repo).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NOT VALID (rebuild)") || !strings.Contains(string(out), "runner") || !strings.Contains(string(out), "DIFFERS: rebuilt "+first["runner"]) {
		t.Errorf("verify --rebuild of a record whose runner hash is not this commit's: %v\n%s", err, out)
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return out
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
