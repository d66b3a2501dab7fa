package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/trackpin"
)

// An operator pins the shipped flagship track (tracks/ari-v1.toml, placeholders and all) from what
// their host holds: an exam and a kit in the content store, images in the image store named by a
// lock. The pinned track keeps the file's comments, holds no placeholder, and its printed id is
// the one `track id` computes.
func TestTrackPin(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	p := func(n string) string { return filepath.Join(dir, n) }
	sr := func(args ...string) result { return sealrun(t, append([]string{"--state-dir", state}, args...)...) }
	must := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		return r
	}
	must(sr("exam", "synth", "--seed", "3", "--count", "7", "--out", p("docs.jsonl")))
	must(sr("exam", "build", "--documents", p("docs.jsonl"), "--out", p("exam.sealrun")))
	must(sr("kit", "build", "../../kits/ari", "--out", p("kit")))

	// Images as an operator's registry or build would give them: a scaffold image with its
	// labels, and a runner without.
	scaffold, err := mutate.Config(testImage(t, map[string]string{"bin/agent": "#!/bin/sh\n"}), v1.Config{Labels: map[string]string{
		images.LabelScaffoldName: "my-agent", images.LabelScaffoldVer: "0.3.1", images.LabelScaffoldConfig: strings.Repeat("0123456789abcdef", 4)}})
	if err != nil {
		t.Fatal(err)
	}
	runnerImg := testImage(t, map[string]string{"usr/bin/python3": "not really"})
	lp, _ := layout.Write(p("oci"), empty.Index)
	lp.AppendImage(scaffold)
	must(sr("images", "import", p("oci"), "--name", "lab.example/my-agent"))
	lp2, _ := layout.Write(p("oci2"), empty.Index)
	lp2.AppendImage(runnerImg)
	must(sr("images", "import", p("oci2"), "--name", "lab.example/pytorch-cuda"))
	sd, _ := scaffold.Digest()
	rd, _ := runnerImg.Digest()
	controllerRef, runnerRef := "lab.example/my-agent@"+sd.String(), "lab.example/pytorch-cuda@"+rd.String()
	if err := (images.Lock{"my-agent": controllerRef, "lab.example/pytorch-cuda:2.5": runnerRef}).Write(p("images.lock")); err != nil {
		t.Fatal(err)
	}
	track := "../../tracks/ari-v1.toml"
	all := []string{"--exam", p("exam.sealrun"), "--kit", p("kit"), "--lock", p("images.lock"), "--controller", "my-agent", "--runner", "lab.example/pytorch-cuda:2.5", "--grader", runnerRef}

	// Before the exam and kit are on this host, pin says how to put them there.
	r := sr(append([]string{"track", "pin", track, "--out", p("pinned.toml")}, all...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "is not in this host's content store") || !strings.Contains(r.stderr, "content add EXAM") {
		t.Fatalf("exam not added: %+v", r)
	}
	must(sr("content", "add", p("exam.sealrun"), p("kit")))

	r = must(sr(append([]string{"track", "pin", track, "--out", p("pinned.toml")}, all...)...))
	m := regexp.MustCompile(`pinned.toml: track id ([0-9a-f]{64}) \(was ([0-9a-f]{64})\)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no track id line: %s", r.stdout)
	}
	pinned, err := policy.Load(p("pinned.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if pinned.ID != m[1] || m[1] == m[2] {
		t.Errorf("printed id %s (was %s), file's id %s", m[1], m[2], pinned.ID)
	}
	examSHA := strings.Fields(must(sr("exam", "hash", p("exam.sealrun"))).stdout)[0]
	kitHash := strings.Fields(must(sr("kit", "hash", p("kit"))).stdout)[0]
	if string(pinned.Exam.SHA256) != examSHA || pinned.Exam.Questions != 7 || string(pinned.Kit.SHA256) != kitHash ||
		pinned.Images.Controller.String() != controllerRef || pinned.Images.Runner.String() != runnerRef || pinned.Images.Grader.String() != runnerRef ||
		pinned.Scaffold.Name != "my-agent" || pinned.Scaffold.Version != "0.3.1" {
		t.Errorf("pinned track: exam %+v kit %+v images %+v scaffold %+v", pinned.Exam, pinned.Kit, pinned.Images, pinned.Scaffold)
	}
	b, _ := os.ReadFile(p("pinned.toml"))
	text := string(b)
	if strings.Contains(text, "# placeholder") || !strings.Contains(text, "# start to deadline") || !strings.Contains(text, "# A track is a frozen rule set.") {
		t.Errorf("comments: placeholder notes must go, the author's stay:\n%s", text)
	}
	if left := trackpin.Unpinned(pinned); len(left) != 0 {
		t.Errorf("unpinned after pin: %v", left)
	}
	// Pinning the pinned track again with the same values changes nothing.
	r = must(sr(append([]string{"track", "pin", p("pinned.toml"), "--out", p("pinned.toml")}, all...)...))
	if !strings.Contains(r.stdout, "unchanged") {
		t.Errorf("re-pin: %s", r.stdout)
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no out", []string{"track", "pin", track}, 2, "--out is required"},
		{"partial", []string{"track", "pin", track, "--out", p("x.toml"), "--exam", p("exam.sealrun")}, 1, "still holds placeholders, so " + p("x.toml") + " was not written: exam.validation_sha256, kit.sha256, images.runner, images.grader; give --kit, --runner and --grader"},
		{"tag not pinned", []string{"track", "pin", track, "--out", p("x.toml"), "--runner", "lab.example/pytorch-cuda:2.6"}, 1, "not pinned by digest; pin it (sealrun images pin lab.example/pytorch-cuda:2.6 --lock images.lock)"},
		{"not in lock", []string{"track", "pin", track, "--out", p("x.toml"), "--lock", p("images.lock"), "--runner", "nope"}, 1, "not a name in " + p("images.lock")},
		{"image not here", []string{"track", "pin", track, "--out", p("x.toml"), "--runner", "lab.example/x@sha256:" + strings.Repeat("9a", 32)}, 1, "is not in this host's image store"},
		{"no labels", []string{"track", "pin", track, "--out", p("x.toml"), "--controller", runnerRef}, 1, "the image has no dev.sealrun.scaffold.name label"},
		{"kit not a kit", []string{"track", "pin", track, "--out", p("x.toml"), "--kit", dir}, 1, "--kit"},
		{"task on exam track", []string{"track", "pin", track, "--out", p("x.toml"), "--task", dir}, 2, "is an exam track"},
		{"exam on task track", []string{"track", "pin", "../../tracks/airs-digits.toml", "--out", p("x.toml"), "--exam", p("exam.sealrun")}, 2, "is a task track"},
		{"missing lock", []string{"track", "pin", track, "--out", p("x.toml"), "--lock", p("none.lock"), "--runner", "x"}, 1, "images build-local --lock"},
		{"not on this host", []string{"track", "pin", track, "--out", p("x.toml"), "--exam", p("exam.sealrun"), "--kit", p("kit"), "--runner", runnerRef, "--grader", runnerRef}, 1, "pins what this host does not hold, so " + p("x.toml") + " was not written: images.controller sealrun.local/controller-opencode@sha256:"},
		{"bad track", []string{"track", "pin", p("docs.jsonl"), "--out", p("x.toml")}, 1, "docs.jsonl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sr(tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stderr ~ %q", r.code, tc.code, r.stdout, r.stderr, tc.stderr)
			}
		})
	}
	if _, err := os.Stat(p("x.toml")); err == nil {
		t.Errorf("a refused pin wrote its --out")
	}

	// A task track: the shipped AIRS task, added to the content store, pinned by directory.
	os.MkdirAll(p("data"), 0o755)
	os.WriteFile(p("data/digits.csv.gz"), []byte("stand-in"), 0o644)
	must(sr("content", "add", "../../airs/tasks/DigitsClassificationAccuracy", p("data")))
	r = must(sr("track", "pin", "../../tracks/airs-digits.toml", "--out", p("airs.toml"), "--task", "../../airs/tasks/DigitsClassificationAccuracy", "--task-data", p("data"),
		"--lock", p("images.lock"), "--controller", "my-agent", "--runner", runnerRef, "--grader", runnerRef))
	at, err := policy.Load(p("airs.toml"))
	if err != nil || at.Task.Name != "DigitsClassificationAccuracy" || at.Images.Runner.String() != runnerRef {
		t.Fatalf("airs track: %v %+v", err, at)
	}
}
