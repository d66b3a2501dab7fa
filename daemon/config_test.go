package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/policy"
)

func TestConfigEveryProblemAtOnce(t *testing.T) {
	_, witnessKey, _ := witness.GenerateKey("witness.test/config")
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
[prices]
currency = "USD"
taken = "20 November"
[prices.models."scripted/model-a"]
input = 3
output = -15
[prices.models."scripted/model-b"]
output = 1.5
currency = "EUR"
[prices.models.scripted]
input = 1
output = 1
[prices.models."scripted/model-c@high"]
input = 1
output = 1
[prices.models."elsewhere/model-d"]
input = 1
output = 1
[timestamp]
url = "ftp://tsa.example"
chain = "` + key + `"
[ledger]
witness_quorum = 5
[[witnesses]]
name = "lab a"
url = "ftp://witness.example"
key = "sealrun.ledger/x+01234567+AQ=="
[[witnesses]]
name = "ok"
url = "https://witness.example/w"
key = "` + witnessKey + `"
[[witnesses]]
name = "ok"
url = "https://other.example"
key = "` + witnessKey + `"
[[witnesses]]
name = "creds"
url = "https://user:secret@witness.example"
key = "` + witnessKey + `"
`
	_, err := hostconfig.Parse("sealrun.toml", []byte(cfg))
	ce, ok := err.(*hostconfig.Error)
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
		`sealrun.toml:prices.taken: "20 November" is not a date`,
		`sealrun.toml:prices.models."scripted/model-a".output: -15; give a price per million tokens from 0`,
		`sealrun.toml:prices.models."scripted/model-b".input: missing; give the price per million input tokens in USD`,
		`sealrun.toml:prices.models."scripted/model-b".currency: "EUR", but [prices] is in "USD": one table, one currency`,
		`sealrun.toml:prices.models."scripted": "scripted" does not name a model; write the key as "PROVIDER/MODEL"`,
		`sealrun.toml:prices.models."scripted/model-c@high": "scripted/model-c@high" does not name a model`,
		`sealrun.toml:prices.models."elsewhere/model-d": provider "elsewhere" is not configured`,
		`sealrun.toml:witnesses[0].name: "lab a": give the witness a name without spaces`,
		`sealrun.toml:witnesses[0].url: "ftp://witness.example" is not an http(s) URL`,
		`sealrun.toml:witnesses[0].key: witness key "sealrun.ledger/x+01234567+AQ=="`,
		`sealrun.toml:witnesses[2].name: "ok" is listed twice`,
		`sealrun.toml:witnesses[2].key: the key witness.test/config is listed twice`,
		`sealrun.toml:witnesses[3].url: "https://user:xxxxx@witness.example" carries a user name or password`,
		"sealrun.toml:ledger.witness_quorum: 5, but only 4 [[witnesses]] are listed",
		`sealrun.toml:timestamp.url: "ftp://tsa.example" is not the http(s) URL of an RFC 3161 timestamp authority`,
		"sealrun.toml:timestamp.chain: " + key + ": no PEM certificate",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing problem %q in:\n%s", want, got)
		}
	}
	if _, err := hostconfig.Parse("bad.toml", []byte("[keys\n")); err == nil || !strings.Contains(err.Error(), "bad.toml") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := hostconfig.Load(filepath.Join(dir, "none.toml")); err == nil || !strings.Contains(err.Error(), "deploy/sealrun.toml") {
		t.Errorf("missing file: %v", err)
	}
}

// A price table: cached input and cache writes default to the input price; integers are prices
// too; a table in one currency without models, or with a bad currency code, is refused.
func TestConfigPrices(t *testing.T) {
	pc := hostconfig.PricesConfig{Currency: "USD", Taken: "2026-11-20", Source: "https://provider.example/pricing", Models: map[string]hostconfig.PriceEntry{}}
	in, cached, out := 3.0, 0.3, 15.0
	pc.Models["openai/gpt-x"] = hostconfig.PriceEntry{Input: &in, CachedInput: &cached, Output: &out}
	p := pc.Price(controller.Agent{Provider: "openai", Model: "gpt-x", Effort: "high"})
	if p == nil || *p != (policy.Price{Currency: "USD", Input: 3, CachedInput: 0.3, CacheWrite: 3, Output: 15, Taken: "2026-11-20", Source: "https://provider.example/pricing"}) {
		t.Errorf("price %+v", p)
	}
	if p := pc.Price(controller.Agent{Provider: "openai", Model: "gpt-y"}); p != nil {
		t.Errorf("a model without a price: %+v", p)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	os.WriteFile(key, []byte("x\n"), 0o600)
	for _, tc := range []struct{ toml, want string }{
		{"[prices]\ncurrency = \"USD\"\ntaken = \"2026-11-20\"\n[prices.models.\"openai/gpt-x\"]\ninput = 3\noutput = 15\n", ""},
		{"[prices]\ncurrency = \"USD\"\n", "prices.models: missing"},
		{"[prices]\ncurrency = \"usd\"\ntaken = \"2026-11-20\"\n[prices.models.\"openai/gpt-x\"]\ninput = 3\noutput = 15\n", `prices.currency: "usd" is not a currency code`},
		{"[prices]\ncurrency = \"USD\"\ntaken = \"2999-01-01\"\n[prices.models.\"openai/gpt-x\"]\ninput = 3\noutput = 15\n", "prices.taken: 2999-01-01 is in the future"},
		{"[prices]\ncurrency = \"USD\"\ntaken = \"2026-11-20\"\n[prices.models.\"openai/gpt-x\"]\ninput = 3\noutput = \"15\"\n", `gpt-x\".output"): incompatible types`},
		{"[prices]\ncurrency = \"USD\"\ntaken = \"2026-11-20\"\n[prices.models.\"openai/gpt-x\"]\ninput = 3\noutput = 15\nouput = 1\n", "unknown key"},
	} {
		cfg := "[keys]\nsigning = \"" + key + "\"\n[providers.openai]\nbase_url = \"https://api.example.com/v1\"\nkey_file = \"" + key + "\"\n" + tc.toml
		_, err := hostconfig.Parse("sealrun.toml", []byte(cfg))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" {
			if strings.Contains(got, "prices") {
				t.Errorf("%q: %s", tc.toml, got)
			}
		} else if !strings.Contains(got, tc.want) {
			t.Errorf("%q: want ~%q, got:\n%s", tc.toml, tc.want, got)
		}
	}
}

// The shipped default configuration has only known keys; what it lacks on this machine is files.
func TestDeployConfigKeysKnown(t *testing.T) {
	_, err := hostconfig.Load("../deploy/sealrun.toml")
	ce, ok := err.(*hostconfig.Error)
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
	j.Append(api.Event{Run: "r-1", Kind: "state", State: api.StateQueued})
	j.Append(api.Event{Run: "r-1", Kind: "state", State: api.StateRunning})
	j.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run":"r-1","kind":"sta`)
	f.Close()
	var n int
	j, err = OpenJournal(p, func(api.Event) error { n++; return nil })
	if err != nil || n != 2 {
		t.Fatalf("replay: %v, %d events", err, n)
	}
	j.Append(api.Event{Run: "r-1", Kind: "state", State: api.StateGraded})
	j.Close()
	n = 0
	j, err = OpenJournal(p, func(api.Event) error { n++; return nil })
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

// keys.signing = "tpm:DEVICE" (the TPM's signing key, docs/TPM.md): the device must be there.
func TestConfigTPMSigningKey(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "signing-key.pem")
	os.WriteFile(pub, []byte("x"), 0o644)
	for signing, want := range map[string]string{
		"tpm:":                                "sealrun.toml:keys.signing: tpm: names no device; give tpm:/dev/tpmrm0",
		"tpm:" + filepath.Join(dir, "tpmrm9"): "sealrun.toml:keys.signing: TPM " + filepath.Join(dir, "tpmrm9") + ": no such file or directory (a host's TPM is /dev/tpmrm0",
	} {
		_, err := hostconfig.Parse("sealrun.toml", []byte("[keys]\nsigning = \""+signing+"\"\npublic = \""+pub+"\"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("signing = %q: %v; want %q", signing, err, want)
		}
	}
	_, err := hostconfig.Parse("sealrun.toml", []byte("[keys]\nsigning = \"tpm:"+pub+"\"\npublic = \""+pub+"\"\n"))
	if err != nil && strings.Contains(err.Error(), "keys.signing") {
		t.Errorf("a device that is there: %v", err)
	}
}

// [tpm]: every problem named with its key and the fix; a good one parses with its defaults.
func TestConfigTPM(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "signing-key.pem")
	enr := filepath.Join(dir, "enrollment.json")
	os.WriteFile(pub, []byte("x"), 0o644)
	os.WriteFile(enr, []byte("{}"), 0o644)
	keys := "[keys]\nsigning = \"tpm:" + pub + "\"\npublic = \"" + pub + "\"\n"
	for name, c := range map[string]struct{ text, want string }{
		"without a TPM signing key": {"[keys]\nsigning = \"../attest/testdata/ed25519.key\"\npublic = \"" + pub + "\"\n[tpm]\nenrollment = \"" + enr + "\"\n", `sealrun.toml:tpm: quotes runs with the TPM whose signing key signs them: set keys.signing = "tpm:/dev/tpmrm0"`},
		"no enrollment":             {keys + "[tpm]\npcrs = [23]\n", "sealrun.toml:tpm.enrollment: missing; give the enrollment.json sealrun tpm enroll wrote"},
		"an enrollment not there":   {keys + "[tpm]\nenrollment = \"" + dir + "/nope.json\"\n", "sealrun.toml:tpm.enrollment: " + dir + "/nope.json: no such file or directory (sealrun tpm enroll"},
		"a firmware PCR":            {keys + "[tpm]\nenrollment = \"" + enr + "\"\nsealrund_pcr = 7\n", "sealrun.toml:tpm.sealrund_pcr: 7: give 8 to 15 or 23"},
		"not a PCR":                 {keys + "[tpm]\nenrollment = \"" + enr + "\"\nsealrund_pcr = 99\n", "sealrun.toml:tpm.sealrund_pcr: 99"},
		"a PCR twice":               {keys + "[tpm]\nenrollment = \"" + enr + "\"\npcrs = [0, 0, 23]\n", "sealrun.toml:tpm.pcrs: [0 0 23]: each PCR 0 to 23, once"},
		"a negative PCR":            {keys + "[tpm]\nenrollment = \"" + enr + "\"\npcrs = [-1, 23]\n", "sealrun.toml:tpm.pcrs: [-1 23]"},
		"sealrund's PCR left out":   {keys + "[tpm]\nenrollment = \"" + enr + "\"\npcrs = [0, 7]\n", "sealrun.toml:tpm.pcrs: [0 7] leaves out PCR 23, where sealrund measures itself"},
		"an unknown key":            {keys + "[tpm]\nenrollment = \"" + enr + "\"\ndevice = \"/dev/tpm0\"\n", "tpm.device"},
		"not a table":               {"tpm = 1\n" + keys, `(last key "tpm"): type mismatch for hostconfig.TPMConfig: expected table`},
	} {
		_, err := hostconfig.Parse("sealrun.toml", []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
	exe := filepath.Join(dir, "exe")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	keys = "runner = \"" + exe + "\"\nhook = \"" + exe + "\"\n" + keys
	cfg, err := hostconfig.Parse("sealrun.toml", []byte(keys+"[tpm]\nenrollment = \""+enr+"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.TPM.Enabled() || cfg.TPM.MeasurePCR() != 23 || fmt.Sprint(cfg.TPM.QuotePCRs()) != "[0 2 4 7 23]" {
		t.Errorf("defaults: enabled %v, sealrund's PCR %d, quoted %v", cfg.TPM.Enabled(), cfg.TPM.MeasurePCR(), cfg.TPM.QuotePCRs())
	}
	if cfg, err := hostconfig.Parse("sealrun.toml", []byte(keys+"[tpm]\nenrollment = \""+enr+"\"\nsealrund_pcr = 14\npcrs = [14, 0]\n")); err != nil || fmt.Sprint(cfg.TPM.QuotePCRs()) != "[0 14]" {
		t.Errorf("PCR 14: %v %v", err, cfg)
	}
}
