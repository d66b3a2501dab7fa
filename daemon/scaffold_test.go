package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/images/registrytest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// userImageContext writes a build context as an operator writes one: a Containerfile FROM scratch
// copying a rootfs of a static busybox and the files given (path -> content, executable when the
// path ends in .sh or has no dot), with the scaffold labels and cmd. It returns the context and the
// config hash the labels carry (of the file named by config).
func userImageContext(t *testing.T, name, version, config string, files map[string][]byte, cmd string, extra ...string) (dir, configSHA string) {
	t.Helper()
	dir = t.TempDir()
	root := filepath.Join(dir, "rootfs")
	bb := mustRead(t, filepath.Join(sandboxtest.LocalImages(t).Controller, "bin", "busybox"))
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755)
	for _, a := range []string{"sh", "cp", "mkdir", "sed", "head", "cat", "ls", "echo", "tr", "grep", "date", "sleep", "rm"} {
		os.Symlink("busybox", filepath.Join(root, "bin", a))
	}
	for p, b := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") || !strings.Contains(filepath.Base(p), ".") {
			mode = 0o755
		}
		os.WriteFile(full, b, mode)
	}
	sum := sha256.Sum256(files[config])
	configSHA = hex.EncodeToString(sum[:])
	cf := fmt.Sprintf("FROM scratch\nCOPY rootfs/ /\nLABEL dev.sealrun.scaffold.name=%q dev.sealrun.scaffold.version=%q dev.sealrun.scaffold.config_sha256=%q\n%sCMD %s\n",
		name, version, configSHA, strings.Join(append(extra, ""), "\n"), cmd)
	os.WriteFile(filepath.Join(dir, "Containerfile"), []byte(cf), 0o644)
	return dir, configSHA
}

// pullScaffold builds the context with buildah, pushes it to a real registry (TLS, auth), pins and
// pulls it by digest into the testbed's store (removed again at cleanup), and returns the track
// text (trackText's) with the image as the controller and its labels as the scaffold pin.
func (tb *testbed) pullScaffold(t *testing.T, reg *registrytest.Registry, trackText, dir, repoTag, name, version, configSHA string) (string, string) {
	t.Helper()
	ctx := context.Background()
	ref := reg.Build(t, dir, repoTag)
	o := images.Registry{CAFile: reg.CAFile, AuthFile: reg.AuthFile}
	if pinned, err := images.Pin(ctx, reg.Ref(repoTag), nil, o); err != nil || pinned != ref {
		t.Fatalf("pin %s = %s %v; buildah pushed %s", repoTag, pinned, err, ref)
	}
	rec, err := tb.store.Pull(ctx, ref, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.store.Remove(rec.Digest) })
	return ref, scaffoldTrack(trackText, ref, name, version, configSHA)
}

// scaffoldTrack is trackText with ref as the controller image and the scaffold pin given.
func scaffoldTrack(trackText, ref, name, version, configSHA string) string {
	text := trackText
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "controller = "):
			text = strings.Replace(text, line, fmt.Sprintf("controller = %q", ref), 1)
		case strings.HasPrefix(line, "name = \"scripted-demo\""):
			text = strings.Replace(text, line, fmt.Sprintf("name = %q", name), 1)
		case strings.HasPrefix(line, "version = \"1.0.0\""):
			text = strings.Replace(text, line, fmt.Sprintf("version = %q", version), 1)
		case strings.HasPrefix(line, "config_sha256 = "):
			text = strings.Replace(text, line, fmt.Sprintf("config_sha256 = %q", configSHA), 1)
		}
	}
	return text
}

// An operator's own scaffold, unchanged: an image built by buildah from a Containerfile (FROM
// scratch: no /usr/local/bin, no /run, no /workspace), pushed to a registry that wants TLS and a
// password, pinned and pulled by digest, its labels pinned in the track, run sealed with no test
// seam (its own command, nothing put in its workspace by the test): graded, attested, verified.
func TestUserScaffoldFromRegistry(t *testing.T) {
	tb := newTestbed(t)
	reg := registrytest.Start(t)
	agent := strings.Replace(agentScript, "PROMOTE", `runner promote "$id" && runner finalize`, 1)
	agent = "cp /opt/my-agent/bundle/* .\necho \"env: mode=$MY_AGENT_MODE path=$PATH home=$HOME gateway=$SEALRUN_GATEWAY\"\n" + agent
	dir, configSHA := userImageContext(t, "my-agent", "0.3.0", "opt/my-agent/agent.sh", map[string][]byte{
		"opt/my-agent/agent.sh":                   []byte(agent),
		"opt/my-agent/bundle/sealrun-bundle.json": mustRead(t, "../grader/example/sealrun-bundle.json"),
		"opt/my-agent/bundle/predict.py":          mustRead(t, "../grader/example/predict.py"),
	}, `["/bin/sh", "/opt/my-agent/agent.sh"]`, `ENV MY_AGENT_MODE=sealed PATH=/opt/my-agent/bin:/usr/local/bin:/bin SEALRUN_GATEWAY=http://elsewhere`, "WORKDIR /opt", "USER 0")
	ref, text := tb.pullScaffold(t, reg, tb.trackTOML, dir, "team/my-agent:0.3.0", "my-agent", "0.3.0", configSHA)
	track, err := policy.Parse("user-scaffold.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	x := &Executor{Cfg: tb.cfg, Host: tb.h, Store: tb.store, Signer: tb.signer, Version: "test", Commit: "test", Journal: tb.journal}
	a, _ := controller.ParseAgent("openai/gpt-x@high")
	out, err := x.Execute(context.Background(), RunSpec{ID: "run-user-scaffold", Track: track, Agent: a, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dirRun := filepath.Join(tb.state, "runs", "run-user-scaffold")
	transcript := mustRead(t, filepath.Join(dirRun, "transcript.log"))
	if out.Status != outcome.Graded {
		t.Fatalf("status %s (%s); transcript:\n%s", out.Status, out.Reason, transcript)
	}
	// Its own environment applies (under sealrun's own variables); its WORKDIR and USER do not.
	if !strings.Contains(string(transcript), "env: mode=sealed path=/opt/my-agent/bin:/usr/local/bin:/bin home=/workspace gateway=http://10.88.0.1:8080") {
		t.Errorf("the scaffold's environment:\n%s", transcript)
	}
	v, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithTrack(track))
	if err != nil {
		t.Fatal(err)
	}
	if v.Statement.Predicate.Images.Controller != ref || v.Statement.Predicate.Scaffold.Name != "my-agent" || string(v.Statement.Predicate.Scaffold.ConfigSHA256) != configSHA {
		t.Errorf("attested controller %s scaffold %+v; want %s my-agent", v.Statement.Predicate.Images.Controller, v.Statement.Predicate.Scaffold, ref)
	}
	// The image's labels are checked against the track: a track pinning another config is refused.
	bad, _ := policy.Parse("bad.toml", []byte(strings.Replace(text, configSHA, strings.Repeat("0", 64), 1)))
	if _, err := x.Check(RunSpec{Track: bad, Agent: a}); err == nil || !strings.Contains(err.Error(), "config_sha256") {
		t.Errorf("a scaffold pin the image's labels do not match: %v", err)
	}
	// An image whose environment routes through a proxy is refused before anything is created.
	pdir, psha := userImageContext(t, "proxied", "1", "agent.sh", map[string][]byte{"agent.sh": []byte("true\n")}, `["/bin/sh", "/agent.sh"]`, "ENV HTTPS_PROXY=http://proxy.example:3128")
	_, ptext := tb.pullScaffold(t, reg, tb.trackTOML, pdir, "team/proxied:1", "proxied", "1", psha)
	ptrack, _ := policy.Parse("proxied.toml", []byte(ptext))
	if _, err := x.Check(RunSpec{Track: ptrack, Agent: a}); err == nil || !strings.Contains(err.Error(), "HTTPS_PROXY") || !strings.Contains(err.Error(), "never a proxy") {
		t.Errorf("an image with a proxy in its environment: %v", err)
	}
}

// SCAFFOLD.md's worked example, as it says: the Containerfile and agent of
// controller/scaffold-example built by buildah, written to an OCI layout, `images import`ed,
// pinned in a track and run sealed: it asks the model through the gateway, computes through
// runner, submits, promotes and finalizes; graded and verified.
func TestScaffoldExample(t *testing.T) {
	tb := newTestbed(t)
	dir := t.TempDir()
	agent := mustRead(t, "../controller/scaffold-example/agent.sh")
	files := map[string][]byte{
		"Containerfile":              mustRead(t, "../controller/scaffold-example/Containerfile"),
		"agent.sh":                   agent,
		"busybox":                    mustRead(t, filepath.Join(sandboxtest.LocalImages(t).Controller, "bin", "busybox")),
		"bundle/sealrun-bundle.json": mustRead(t, "../grader/example/sealrun-bundle.json"),
		"bundle/predict.py":          mustRead(t, "../grader/example/predict.py"),
	}
	for p, b := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), b, 0o755)
	}
	sum := sha256.Sum256(agent)
	configSHA := hex.EncodeToString(sum[:])
	layout := registrytest.BuildOCI(t, dir, "CONFIG_SHA256="+configSHA)
	rec, err := tb.store.Import(context.Background(), layout, "", "localhost/example-scaffold")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.store.Remove(rec.Digest) })
	ref := rec.Name + "@" + rec.Digest
	track, err := policy.Parse("example.toml", []byte(scaffoldTrack(tb.trackTOML, ref, "example", "1.0.0", configSHA)))
	if err != nil {
		t.Fatal(err)
	}
	x := &Executor{Cfg: tb.cfg, Host: tb.h, Store: tb.store, Signer: tb.signer, Version: "test", Commit: "test", Journal: tb.journal}
	a, _ := controller.ParseAgent("openai/gpt-x@high")
	out, err := x.Execute(context.Background(), RunSpec{ID: "run-example", Track: track, Agent: a, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	transcript := string(mustRead(t, filepath.Join(tb.state, "runs", "run-example", "transcript.log")))
	if out.Status != outcome.Graded {
		t.Fatalf("status %s (%s); transcript:\n%s", out.Status, out.Reason, transcript)
	}
	for _, want := range []string{"example scaffold for openai/gpt-x@high", "model: {", "hello from the runner", "candidate "} {
		if !strings.Contains(transcript, want) {
			t.Errorf("the transcript lacks %q:\n%s", want, transcript)
		}
	}
	if _, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithTrack(track)); err != nil {
		t.Fatal(err)
	}
}
