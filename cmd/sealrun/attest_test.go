package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/verify"
)

const (
	goldenEnv = "../../attest/testdata/envelope.golden.json"
	goldenPub = "../../attest/testdata/ed25519.pub"
)

// goldenPredicate extracts the predicate and subjects of the attest golden statement.
func goldenPredicate(t testing.TB) (pred []byte, subjects []string) {
	t.Helper()
	b, err := os.ReadFile("../../attest/testdata/statement.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Subject []struct {
			Name   string
			Digest map[string]string
		}
		Predicate json.RawMessage
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Subject {
		subjects = append(subjects, "--subject", s.Name+"=sha256:"+s.Digest["sha256"])
	}
	return st.Predicate, subjects
}

func TestAttestVerbs(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	write := func(n, data string) string {
		if err := os.WriteFile(p(n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p(n)
	}
	pass := write("pass.txt", "correct horse\n")
	if r := sealrun(t, "keys", "generate", "--out", p("keys"), "--passphrase-file", pass); r.code != 0 || !strings.Contains(r.stdout, "encrypted") {
		t.Fatalf("keys generate: %+v", r)
	}
	if st, _ := os.Stat(p("keys/sealrun.key")); st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v", st.Mode().Perm())
	}
	if r := sealrun(t, "keys", "generate", "--out", p("ec"), "--algo", "ecdsa-p256"); r.code != 0 {
		t.Fatalf("keys generate ecdsa: %+v", r)
	}
	pred, subjects := goldenPredicate(t)
	predFile := write("pred.json", string(pred))
	att := p("result.att.json")
	sign := append([]string{"attest", "sign", "--predicate", predFile, "--key", p("keys/sealrun.key"), "--passphrase-file", pass, "--out", att}, subjects...)
	if r := sealrun(t, sign...); r.code != 0 {
		t.Fatalf("attest sign: %+v", r)
	}
	bad := strings.Replace(string(pred), `"passed": 75`, `"passed": 74`, 1)
	badPred := write("bad.json", bad)
	wrongPass := write("wrong.txt", "wrong horse")
	unknownField := write("unknown.json", strings.Replace(string(pred), `"agent": {`, `"bonus": 1, "agent": {`, 1))
	big := write("big.att.json", "")
	os.Truncate(big, 100<<20)
	tampered := write("tampered.att.json", strings.Replace(mustRead(t, att), `"payloadType": "application/vnd.in-toto+json"`, `"payloadType": "text/plain"`, 1))
	pub := p("keys/sealrun.pub")
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"verify", []string{"verify", att, "--key", pub, "--track", "../../tracks/ari-v1.toml"}, 0, "VALID\n  key ", ""},
		{"verify json", []string{"verify", att, "--key", pub, "--json"}, 0, `"valid": true`, ""},
		{"verify wrong key", []string{"verify", att, "--key", p("ec/sealrun.pub")}, 1, "NOT VALID (signature)", ""},
		{"verify wrong key json", []string{"verify", att, "--key", p("ec/sealrun.pub"), "--json"}, 1, `"reason": "signature"`, ""},
		{"verify swapped payloadType", []string{"verify", tampered, "--key", pub}, 1, "NOT VALID (payload-type)", ""},
		{"verify 100 MB", []string{"verify", big, "--key", pub}, 1, "NOT VALID (envelope-size)", ""},
		{"verify garbage", []string{"verify", predFile, "--key", pub}, 1, "NOT VALID (envelope-syntax)", ""},
		{"verify bundle mismatch", []string{"verify", att, "--key", pub, "--bundle", pass}, 1, "NOT VALID (subject)", ""},
		{"verify other track", []string{"verify", att, "--key", pub, "--track", "../../tracks/demo.toml"}, 1, "NOT VALID (track)", ""},
		{"verify missing file", []string{"verify", p("nope"), "--key", pub}, 2, "", "does not exist"},
		{"verify private key", []string{"verify", att, "--key", p("keys/sealrun.key")}, 2, "", "is a private key"},
		{"verify no key", []string{"verify", att}, 2, "", "--key"},
		{"verify missing audit", []string{"verify", att, "--key", pub, "--audit", p("nope.jsonl")}, 2, "", "audit log"},
		{"inspect", []string{"attest", "inspect", att, "--key", pub}, 0, "graded: 75/100 passed = 75.00%", ""},
		{"inspect invalid", []string{"attest", "inspect", tampered, "--key", pub}, 1, "NOT VALID", ""},
		{"sign inconsistent", append([]string{"attest", "sign", "--predicate", badPred, "--key", p("ec/sealrun.key"), "--out", p("x.att.json")}, subjects...), 1, "", "result.score"},
		{"sign unknown field", append([]string{"attest", "sign", "--predicate", unknownField, "--key", p("ec/sealrun.key"), "--out", p("x.att.json")}, subjects...), 1, "", `unknown field "bonus"`},
		{"sign wrong passphrase", append([]string{"attest", "sign", "--predicate", predFile, "--key", p("keys/sealrun.key"), "--passphrase-file", wrongPass, "--out", p("x.att.json")}, subjects...), 2, "", "wrong passphrase"},
		{"sign no passphrase", append([]string{"attest", "sign", "--predicate", predFile, "--key", p("keys/sealrun.key"), "--out", p("x.att.json")}, subjects...), 2, "", "is encrypted: none given"},
		{"sign with public key", append([]string{"attest", "sign", "--predicate", predFile, "--key", pub, "--out", p("x.att.json")}, subjects...), 2, "", "is a public key"},
		{"sign kms", append([]string{"attest", "sign", "--predicate", predFile, "--key", "nosuchkms://k", "--out", p("x.att.json")}, subjects...), 2, "", "no KMS provider"},
		{"sign bad subject", []string{"attest", "sign", "--predicate", predFile, "--key", pub, "--out", p("x.att.json"), "--subject", "report.json=abc"}, 2, "", "NAME=sha256:<64 lowercase hex>"},
		{"sign no subject", []string{"attest", "sign", "--predicate", predFile, "--key", pub, "--out", p("x.att.json")}, 2, "", "--subject report.json="},
		{"keys exist", []string{"keys", "generate", "--out", p("keys")}, 1, "", "already exists"},
		{"keys bad algo", []string{"keys", "generate", "--out", p("k2"), "--algo", "rsa"}, 2, "", "--algo"},
		{"keys empty passphrase", []string{"keys", "generate", "--out", p("k3"), "--passphrase-file", write("empty", "")}, 1, "", "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := sealrun(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ~ %q, stderr ~ %q", r.code, tc.code, r.stdout, r.stderr, tc.stdout, tc.stderr)
			}
		})
	}
	if _, err := os.Stat(p("x.att.json")); !os.IsNotExist(err) {
		t.Error("a failed sign left an output file")
	}
	// The Sigstore bundle written beside the envelope verifies too; a tampered one does not.
	bundle := p("result.sigstore.json")
	if r := sealrun(t, "verify", bundle, "--key", pub); r.code != 0 || !strings.Contains(r.stdout, "signature") {
		t.Errorf("verify the Sigstore bundle: %+v", r)
	}
	tb := write("tampered.sigstore.json", strings.Replace(mustRead(t, bundle), `"payloadType": "application/vnd.in-toto+json"`, `"payloadType": "text/plain"`, 1))
	if r := sealrun(t, "verify", tb, "--key", pub); r.code != 1 || !strings.Contains(r.stderr+r.stdout, "payloadType") {
		t.Errorf("verify a tampered bundle: %+v", r)
	}
	if _, err := os.Stat(p("x.sigstore.json")); !os.IsNotExist(err) {
		t.Error("a failed sign left a bundle")
	}
	// The committed golden envelope verifies from the CLI too.
	if r := sealrun(t, "verify", goldenEnv, "--key", goldenPub); r.code != 0 {
		t.Errorf("golden: %+v", r)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLeaderboardVerb(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	pred, subjects := goldenPredicate(t)
	os.WriteFile(p("pred.json"), pred, 0o600)
	os.MkdirAll(p("results/r1"), 0o755)
	sign := append([]string{"attest", "sign", "--predicate", p("pred.json"), "--key", "../../attest/testdata/ed25519.key", "--out", p("results/r1/result.att.json")}, subjects...)
	if r := sealrun(t, sign...); r.code != 0 {
		t.Fatalf("sign: %+v", r)
	}
	os.WriteFile(p("results/r1/report.json"), []byte(`{}`), 0o644)
	key := "../../attest/testdata/ed25519.pub"
	r := sealrun(t, "leaderboard", "--key", key, p("results"))
	if r.code != 0 || !strings.Contains(r.stdout, "ari-v1 1 (active)") || !strings.Contains(r.stdout, "example-model-2026-10@high  75.0 ± —") {
		t.Fatalf("leaderboard: %+v", r)
	}
	// A rejected input: listed, exit 1; --allow-rejected publishes anyway; --out is written.
	os.WriteFile(p("results/forged.att.json"), []byte(`{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AAAA"}]}`), 0o644)
	if r := sealrun(t, "leaderboard", "--key", key, p("results")); r.code != 1 || !strings.Contains(r.stdout, "forged.att.json: not valid") || !strings.Contains(r.stderr, "1 input(s) rejected") {
		t.Errorf("rejected: %+v", r)
	}
	// The same as data: the attestations check names the file; no ledger, so no accounting.
	r = sealrun(t, "leaderboard", "--key", key, "--json", p("results"))
	var res verify.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 1 || err != nil || res.Schema != verify.Schema || res.Kind != "board" || res.Verdict != "NOT VALID" || res.Reason != "attestations" ||
		len(res.Check("attestations").Problems) != 1 || !strings.HasSuffix(res.Check("attestations").Problems[0].File, "forged.att.json") || res.Check("accounting").Outcome != verify.NotApplicable {
		t.Errorf("rejected, --json: %v %+v", err, r)
	}
	if !strings.Contains(r.stderr, "1 input(s) rejected") {
		t.Errorf("rejected, --json: stderr %q", r.stderr)
	}
	if r := sealrun(t, "leaderboard", "--key", key, "--allow-rejected", "--format", "html", "--out", p("board.html"), p("results")); r.code != 0 {
		t.Errorf("allow-rejected: %+v", r)
	}
	if b, err := os.ReadFile(p("board.html")); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("board.html: %v", err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"leaderboard", p("results")}, 2, "give the trusted public key"},
		{[]string{"leaderboard", "--key", key, "--format", "pdf", p("results")}, 2, `--format "pdf"`},
		{[]string{"leaderboard", "--key", key}, 2, "attestation files or directories"},
		{[]string{"leaderboard", "--key", p("nope.pub"), p("results")}, 2, "nope.pub"},
		{[]string{"leaderboard", "--key", key, p("missing")}, 2, "missing"},
		{[]string{"leaderboard", "--key", key, "--track", "../../tracks/demo.toml", p("results/r1/result.att.json")}, 1, "not among the --track files"},
		{[]string{"leaderboard", "--key", key, p("results/r1/report.json")}, 1, "not an attestation"},
		{[]string{"leaderboard", "--key", key, "--suite", "kaggle", p("results")}, 2, `--suite "kaggle": use exam (the default) or airs`},
		{[]string{"leaderboard", "--key", key, "--suite", "airs", "--format", "html", p("results")}, 2, `--format "html" with --suite airs`},
		{[]string{"leaderboard", "--key", key, "--suite", "airs", "--transform", "log", p("results")}, 2, `--transform "log"`},
		{[]string{"leaderboard", "--key", key, "--transform", "identity", p("results")}, 2, "--transform is for --suite airs"},
		{[]string{"leaderboard", "--key", key, "--suite", "airs", "--allow-rejected", p("results")}, 0, "no AIRS task runs among the verified attestations"},
	} {
		r := sealrun(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%v: exit %d %q %q; want %d %q", c.args, r.code, r.stdout, r.stderr, c.code, c.want)
		}
	}
}

func TestContentAdd(t *testing.T) {
	state := t.TempDir()
	f := filepath.Join(t.TempDir(), "exam.sealrun")
	os.WriteFile(f, []byte("hello\n"), 0o644)
	want := "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
	for range 2 {
		r := sealrun(t, "--state-dir", state, "content", "add", f)
		if r.code != 0 || r.stdout != want+"  "+f+"\n" {
			t.Fatalf("content add: %+v", r)
		}
	}
	st, err := os.Stat(filepath.Join(state, "content", "sha256", want))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("stored: %v %v", err, st)
	}
	if r := sealrun(t, "--state-dir", state, "content", "add", filepath.Join(state, "nope")); r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("missing file: %+v", r)
	}
}
