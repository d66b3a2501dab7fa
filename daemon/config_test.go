package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/attest"
)

func TestConfigEveryProblemAtOnce(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	os.WriteFile(key, []byte("x"), 0o644)
	bin := filepath.Join(dir, "bin")
	os.WriteFile(bin, nil, 0o755)
	cfg := `state_dir = "relative"
runner = "` + bin + `"
hook = "` + bin + `"
statedir = "/x"
cgroup_parent = "sealrun/../x"
[keys]
signing = "` + key + `"
[scaffold]
[resources]
gpus = ["nvidia.com/gpu=0", "nvidia.com/gpu=0", "gpu0"]
concurrency = 100
workspace_read_bps = -1
workspace_write_bps = 512
[metrics]
listen = "0.0.0.0:9464"
[runtimes]
runer = "crun"
grader = ""
controller = "crun --debug"
[providers.none]
kind = "none"
[providers.scripted]
kind = "openai"
base_url = "https://api.example.com/v1"
key_file = "` + key + `"
[providers.OpenAI]
kind = "opanai"
base_url = "ftp://x"
key_file = "` + key + `"
`
	_, err := ParseConfig("sealrun.toml", []byte(cfg))
	ce, ok := err.(*ConfigError)
	if !ok {
		t.Fatalf("got %v", err)
	}
	got := strings.Join(ce.Problems, "\n")
	for _, want := range []string{
		"sealrun.toml:statedir: unknown key",
		`sealrun.toml:state_dir: "relative" is not an absolute path`,
		"sealrun.toml:keys.signing: " + key + " is mode -rw-r--r--: readable beyond its owner",
		"sealrun.toml:keys.public: missing",
		"sealrun.toml:scaffold: unknown key", // the scaffold is the controller image's (the track pins it)
		`sealrun.toml:providers.none: "none" is built in`,
		`sealrun.toml:providers.scripted.base_url: "https://api.example.com/v1" is not on loopback`,
		`sealrun.toml:resources.gpus[1]: "nvidia.com/gpu=0" is listed twice`,
		`sealrun.toml:resources.gpus[2]: "gpu0" is not a CDI device name`,
		"sealrun.toml:resources.concurrency: 100; give 1 to 64",
		`sealrun.toml:cgroup_parent: "sealrun/../x": give an absolute, clean cgroup path`,
		"sealrun.toml:resources.workspace_read_bps: -1; give 0 (no cap) or at least 1048576",
		"sealrun.toml:resources.workspace_write_bps: 512; give 0 (no cap) or at least 1048576",
		`sealrun.toml:metrics.listen: "0.0.0.0:9464" is not a loopback address`,
		"sealrun.toml:runtimes.runer: not a role; give controller, runner or grader",
		`sealrun.toml:runtimes.grader: "": give a runtime binary (runc, crun or runsc) or its path`,
		`sealrun.toml:runtimes.controller: "crun --debug": give a runtime binary`,
		"sealrun.toml:providers.OpenAI: the provider name must be lowercase",
		`sealrun.toml:providers.OpenAI.kind: "opanai" is not a provider kind`,
		`sealrun.toml:providers.OpenAI.base_url: "ftp://x" is not an http(s) URL`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing problem %q in:\n%s", want, got)
		}
	}
	if _, err := ParseConfig("bad.toml", []byte("[keys\n")); err == nil || !strings.Contains(err.Error(), "bad.toml") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "none.toml")); err == nil || !strings.Contains(err.Error(), "deploy/sealrun.toml") {
		t.Errorf("missing file: %v", err)
	}
}

// The shipped default configuration has only known keys; what it lacks on this machine is files.
func TestDeployConfigKeysKnown(t *testing.T) {
	_, err := LoadConfig("../deploy/sealrun.toml")
	ce, ok := err.(*ConfigError)
	if !ok {
		t.Fatalf("got %v", err)
	}
	for _, p := range ce.Problems {
		if strings.Contains(p, "unknown key") || strings.Contains(p, "not an absolute path") {
			t.Errorf("deploy/sealrun.toml: %s", p)
		}
	}
}

func TestJournalTornTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := OpenJournal(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	j.Append(Event{Run: "r-1", Kind: "state", State: StateQueued})
	j.Append(Event{Run: "r-1", Kind: "state", State: StateRunning})
	j.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run":"r-1","kind":"sta`)
	f.Close()
	var n int
	j, err = OpenJournal(p, func(Event) error { n++; return nil })
	if err != nil || n != 2 {
		t.Fatalf("replay: %v, %d events", err, n)
	}
	j.Append(Event{Run: "r-1", Kind: "state", State: StateGraded})
	j.Close()
	n = 0
	j, err = OpenJournal(p, func(Event) error { n++; return nil })
	if err != nil || n != 3 {
		t.Fatalf("after the torn tail was dropped: %v, %d events", err, n)
	}
	j.Close()
	// A bad line in the middle is evidence: refused, not repaired.
	data, _ := os.ReadFile(p)
	os.WriteFile(p, append([]byte("garbage\n"), data...), 0o600)
	if _, err := OpenJournal(p, nil); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("bad line: %v", err)
	}
}

func TestKeyPairMismatch(t *testing.T) {
	signer, err := attest.LoadSigner(context.Background(), "../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkKeyPair(signer, "../attest/testdata/ed25519.pub"); err != nil {
		t.Errorf("matching pair: %v", err)
	}
	if err := checkKeyPair(signer, "../attest/testdata/ecdsa.pub"); err == nil || !strings.Contains(err.Error(), "is not the public half of keys.signing") {
		t.Errorf("mismatching pair: %v", err)
	}
}
