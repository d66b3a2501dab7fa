package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kit verbs as a user runs them: build the ARI kit, hash it (the same as the coreutils
// recipe), add it to a state dir; bad input of each kind gets one clear error and exit 1 or 2.
func TestKitVerbs(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "kit")
	r := sealrun(t, "kit", "build", "../../kits/ari", "--out", out)
	if r.code != 0 || len(strings.Fields(r.stdout)) != 2 || !strings.Contains(r.stderr, "pin it in a track as [kit] sha256") {
		t.Fatalf("kit build: %+v", r)
	}
	hash := strings.Fields(r.stdout)[0]
	if h := sealrun(t, "kit", "hash", out); h.code != 0 || !strings.HasPrefix(h.stdout, hash+"  ") {
		t.Errorf("kit hash: %+v; want %s", h, hash)
	}
	if sh, err := exec.Command("sh", "-c", `cd "$1" && sha256sum SHA256SUMS`, "sh", out).Output(); err != nil || !strings.HasPrefix(string(sh), hash) {
		t.Errorf("sha256sum SHA256SUMS: %v %s", err, sh)
	}
	state := filepath.Join(dir, "state")
	if a := sealrun(t, "--state-dir", state, "content", "add", out); a.code != 0 || !strings.Contains(a.stdout, hash+"  "+out+" (kit)") {
		t.Errorf("content add KITDIR: %+v", a)
	}
	if _, err := os.Stat(filepath.Join(state, "kits", hash, "SHA256SUMS")); err != nil {
		t.Errorf("kit not in the store: %v", err)
	}

	os.WriteFile(filepath.Join(out, "starter", "train.py"), []byte("tampered"), 0o644)
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"tampered kit", []string{"kit", "hash", out}, 1, "starter/train.py: has sha256"},
		{"tampered kit added", []string{"--state-dir", state, "content", "add", out}, 1, "starter/train.py: has sha256"},
		{"not a kit", []string{"kit", "hash", dir}, 1, "SHA256SUMS: missing: this is not a built kit"},
		{"out exists", []string{"kit", "build", "../../kits/ari", "--out", out}, 1, "already exists"},
		{"no --out", []string{"kit", "build", "../../kits/ari"}, 2, "--out"},
		{"no source", []string{"kit", "build", filepath.Join(dir, "nope"), "--out", filepath.Join(dir, "o2")}, 1, "is not a directory"},
		{"source without recipe", []string{"kit", "build", dir, "--out", filepath.Join(dir, "o3")}, 1, "kit.toml: missing"},
		{"bare kit", []string{"kit"}, 2, "missing subcommand"},
		{"demo seeds", []string{"demo", "--seeds", "0"}, 2, "--seeds 0: give 1 to 16"},
		{"demo gpu", []string{"demo", "--gpu", "gpu0"}, 2, `--gpu "gpu0" is not a CDI device name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, c.code, c.stderr)
			}
		})
	}
}
