package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
)

// A time a reader need not take from the operator: an attestation's signature timestamped by
// sigstore's timestamp-authority (nobody here wrote it), its token in the Sigstore bundle beside
// the envelope; sealrun verify --tsa-chain checks it offline, from the envelope or from the bundle,
// and refuses another authority's chain, a bundle without a timestamp and a tampered token.
func TestTimestampedAttestation(t *testing.T) {
	url, chainPath := testenv.TimestampAuthority(t)
	chain, err := attest.LoadTSAChain(chainPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env, att := signedGolden(t, dir)
	sig, _ := attest.EnvelopeSignature(env)
	token, err := (&attest.TSA{URL: url, Chain: chain}).Timestamp(t.Context(), http.DefaultClient, sig)
	if err != nil {
		t.Fatalf("timestamp-authority: %v", err)
	}
	bundle, _ := attest.SigstoreBundle(env, "hint", token)
	os.WriteFile(attest.BundlePath(att), bundle, 0o644)
	pub := "../../attest/testdata/ed25519.pub"
	today := time.Now().UTC().Format("2006-01-02")
	for _, path := range []string{att, attest.BundlePath(att)} {
		r := sealrun(t, "verify", path, "--key", pub, "--tsa-chain", chainPath)
		if r.code != 0 || !strings.Contains(r.stdout, "timestamp  existed before "+today) || !strings.Contains(r.stdout, "RFC 3161") {
			t.Errorf("verify %s --tsa-chain: %+v", filepath.Base(path), r)
		}
	}
	// VERIFY.md's by-hand check, run as written with jq, base64 and openssl.
	doc, _ := os.ReadFile("../../attest/VERIFY.md")
	_, rest, ok := strings.Cut(string(doc), "jq -r '.verificationMaterial.timestampVerificationData")
	script, _, ok2 := strings.Cut("jq -r '.verificationMaterial.timestampVerificationData"+rest, "```")
	if !ok || !ok2 {
		t.Fatal("VERIFY.md has no by-hand timestamp check")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH"))
	os.Symlink(chainPath, filepath.Join(dir, "tsa-chain.pem"))
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Verification: OK") {
		t.Errorf("VERIFY.md's openssl ts -verify: %v\n%s", err, out)
	}
	// Another authority's root.
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another TSA root"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	other := filepath.Join(dir, "other.pem")
	os.WriteFile(other, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)

	// cosign v3's check (VERIFY.md: the trusted root made from the chain as written, then the
	// bundle verified by sigstore-go, the library cosign v3 verifies with): it passes, and fails
	// with a trusted root of another authority.
	_, rest, ok = strings.Cut(string(doc), "# trusted_root.json: the timestamp authority's chain")
	_, rest, _ = strings.Cut(rest, "\n") // the rest of the comment line
	rootScript, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("VERIFY.md has no recipe for cosign's trusted root")
	}
	sv := testenv.SigstoreVerify(t)
	for _, c := range []struct {
		chain, want string
	}{{chainPath, "Verified OK"}, {other, "threshold not met for verified signed timestamps"}} {
		w := t.TempDir()
		os.Symlink(c.chain, filepath.Join(w, "tsa-chain.pem"))
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", rootScript)
		cmd.Dir = w
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("VERIFY.md's trusted root recipe: %v\n%s", err, out)
		}
		out, _ := exec.Command(sv, attest.BundlePath(att), filepath.Join(w, "trusted_root.json"), pub).CombinedOutput()
		if !strings.Contains(string(out), c.want) {
			t.Errorf("sigstore-go on the bundle, trusted root of %s: %s; want %q", filepath.Base(c.chain), out, c.want)
		}
	}
	plain := filepath.Join(dir, "plain")
	os.MkdirAll(plain, 0o755)
	os.WriteFile(filepath.Join(plain, "result.att.json"), env, 0o644)
	nots, _ := attest.SigstoreBundle(env, "hint")
	os.WriteFile(filepath.Join(plain, "result.sigstore.json"), nots, 0o644)
	tampered := filepath.Join(dir, "tampered")
	os.MkdirAll(tampered, 0o755)
	os.WriteFile(filepath.Join(tampered, "result.att.json"), env, 0o644)
	bad := append([]byte(nil), token...)
	bad[len(bad)-3] ^= 1
	tb, _ := attest.SigstoreBundle(env, "hint", bad)
	os.WriteFile(filepath.Join(tampered, "result.sigstore.json"), tb, 0o644)
	lone := filepath.Join(dir, "lone")
	os.MkdirAll(lone, 0o755)
	os.WriteFile(filepath.Join(lone, "result.att.json"), env, 0o644)
	for _, c := range []struct {
		name, path, chain, want string
		code                    int
	}{
		{"another authority", att, other, "NOT VALID (timestamp)", 1},
		{"no timestamp in the bundle", filepath.Join(plain, "result.att.json"), chainPath, "carries no RFC 3161 timestamp", 1},
		{"a tampered token", filepath.Join(tampered, "result.att.json"), chainPath, "NOT VALID (timestamp)", 1},
		{"no bundle", filepath.Join(lone, "result.att.json"), chainPath, "no Sigstore bundle beside it", 1},
		{"a chain file that is not one", att, att, "--tsa-chain", 2},
	} {
		r := sealrun(t, "verify", c.path, "--key", pub, "--tsa-chain", c.chain)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%s: %+v; want exit %d and %q", c.name, r, c.code, c.want)
		}
	}
}

// signedGolden signs attest's golden statement with the test key and writes it as
// dir/result.att.json; it returns the envelope and that path.
func signedGolden(t *testing.T, dir string) ([]byte, string) {
	t.Helper()
	var st attest.Statement
	b, _ := os.ReadFile("../../attest/testdata/statement.golden.json")
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), &st, signer)
	if err != nil {
		t.Fatal(err)
	}
	att := filepath.Join(dir, "result.att.json")
	os.WriteFile(att, env, 0o644)
	return env, att
}
