package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
)

func TestLedgerCommands(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.MkdirAll(state, 0o755)
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), "sealrun.ledger/test-host", signer)
	if err != nil {
		t.Fatal(err)
	}
	track := strings.Repeat("ab", 32)
	l.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: "r-1", Time: time.Now(), Track: track, Scaffold: "s 1", Agent: "none/none", Seed: 1})
	l.Append(&ledger.Entry{Kind: ledger.KindEnded, Run: "r-1", Time: time.Now(), State: "invalid", Reason: "cancelled", Attestation: digest.Hex(track)})
	l.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: "r-2", Time: time.Now(), Track: track, Scaffold: "s 1", Agent: "none/none", Seed: 1, RerunOf: "r-1"})
	l.Close()
	out := filepath.Join(dir, "ledger.jsonl")
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("{\"entry\":1}\n"), 0o644)
	head := filepath.Join(dir, "head.txt")
	pub := "../../attest/testdata/ed25519.pub"
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"bare", []string{"ledger"}, 2, "", "missing subcommand: export, verify or vkey"},
		{"export without --out", []string{"--state-dir", state, "ledger", "export"}, 2, "", "--out"},
		{"export, no ledger", []string{"--state-dir", dir, "ledger", "export", "--out", out}, 2, "", "no run ledger at " + filepath.Join(dir, "ledger.jsonl")},
		{"export", []string{"--state-dir", state, "ledger", "export", "--out", out}, 0, "3 entries of sealrun.ledger/test-host", ""},
		{"verify", []string{"ledger", "verify", out, "--key", pub}, 0, "2 queued (1 reruns); ended: 0 graded, 0 failed, 1 invalid; not ended: 1", ""},
		{"verify without key", []string{"ledger", "verify", out}, 2, "", "--key"},
		{"verify garbage", []string{"ledger", "verify", garbage, "--key", pub}, 1, "NOT VALID", ""},
		{"verify with another key", []string{"ledger", "verify", out, "--key", "../../attest/testdata/ecdsa.pub"}, 1, "not signed by any of the host keys given", ""},
		{"head not a checkpoint", []string{"ledger", "verify", out, "--key", pub, "--head", garbage}, 1, "head " + garbage + " (given to check against): checkpoint of log", ""},
		{"vkey", []string{"ledger", "vkey", out, "--key", pub}, 0, "sealrun.ledger/test-host+", ""},
		{"vkey without key", []string{"ledger", "vkey", out}, 2, "", "--key"},
		{"vkey with another key", []string{"ledger", "vkey", out, "--key", "../../attest/testdata/ecdsa.pub"}, 1, "", "no --key verifies this ledger's heads"},
		{"vkey garbage", []string{"ledger", "vkey", garbage, "--key", pub}, 1, "", "no --key verifies"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stdout, c.stdout) || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
	// A head saved from the export, then checked against it.
	data, _ := os.ReadFile(out)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var cp struct{ Checkpoint string }
	jsonUnmarshal(t, lines[len(lines)-1], &cp)
	os.WriteFile(head, []byte(cp.Checkpoint), 0o644)
	if r := sealrun(t, "ledger", "verify", out, "--key", pub, "--head", head); r.code != 0 || !strings.Contains(r.stdout, "consistent with "+head+" (size 3)") {
		t.Errorf("verify --head: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func jsonUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}
