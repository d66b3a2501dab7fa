//go:build linux

package tpm

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"

	"github.com/sealrun/sealrun/internal/testenv"
)

// open starts a swtpm of the test's own and loads sealrun's keys in it.
func open(t testing.TB) (*Keys, *testenv.SWTPM) {
	t.Helper()
	sw := testenv.Swtpm(t)
	dev, err := Open(sw.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	k, err := LoadKeys(dev)
	if err != nil {
		t.Fatal(err)
	}
	return k, sw
}

// twoEnrolled is two TPMs of the test's own, each with its keys and enrollment.
func twoEnrolled(t *testing.T) (a, b *Keys, ea, eb *Enrollment, swA *testenv.SWTPM) {
	t.Helper()
	a, swA = open(t)
	b, _ = open(t)
	var err error
	if ea, err = a.Enroll(); err != nil {
		t.Fatal(err)
	}
	if eb, err = b.Enroll(); err != nil {
		t.Fatal(err)
	}
	return a, b, ea, eb, swA
}

func pool(t *testing.T, files ...string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if blk, _ := pem.Decode(b); blk == nil || !p.AppendCertsFromPEM(b) {
			t.Fatalf("%s holds no PEM certificate", f)
		}
	}
	return p
}

func reason(t *testing.T, err error) string {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("%v is not a *Failure", err)
	}
	return f.Reason
}

// A TPM's enrollment verifies, its EK certificate chained to the CA that made it; its signing
// key signs; its quote over a measured PCR verifies with the nonce it was made for. Keys made
// again are the same keys (primary keys: nothing kept outside the TPM).
func TestEnrollSignQuote(t *testing.T) {
	k, sw := open(t)
	e, err := k.Enroll()
	if err != nil {
		t.Fatal(err)
	}
	if len(e.EKCertificates) == 0 {
		t.Fatal("swtpm_setup --create-ek-cert made no EK certificate the enrollment found")
	}
	got, err := VerifyEnrollment(e, pool(t, sw.RootCA), pool(t, sw.Issuer))
	if err != nil {
		t.Fatal(err)
	}
	if got.EK == nil || !got.SigningKey.Equal(k.SigningKey()) || !got.AttestationKey.Equal(k.AttestationKey()) {
		t.Fatalf("enrolled %+v", got)
	}
	d := sha256.Sum256([]byte("DSSEv1 28 application/vnd.in-toto+json 2 {}"))
	sig, err := k.SignDigest(d[:])
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(got.SigningKey, d[:], sig) {
		t.Fatal("the signing key's signature does not verify with the enrolled key")
	}
	m := sha256.Sum256([]byte("sealrund"))
	if err := k.Extend(23, m[:]); err != nil {
		t.Fatal(err)
	}
	nonce := sha256.Sum256([]byte("a run's statement"))
	q, err := k.Quote(nonce[:], []int{23, 0, 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.PCRs) != 3 || q.PCRs[0].Index != 0 || q.PCRs[2].Index != 23 {
		t.Fatalf("quoted PCRs %+v", q.PCRs)
	}
	if err := VerifyQuote(q, got.AttestationKey, nonce[:]); err != nil {
		t.Fatal(err)
	}
	again, err := LoadKeys(k.t)
	if err != nil {
		t.Fatal(err)
	}
	if !again.SigningKey().Equal(got.SigningKey) || !again.AttestationKey().Equal(got.AttestationKey) {
		t.Error("keys made again are other keys")
	}
}

// What a reader must refuse: a quote from another TPM, a quote replayed for another run, a PCR
// changed, a byte of the quote changed; an enrollment whose EK certificate another CA made, whose
// certification is of another TPM's key, or whose signing key may leave its TPM.
func TestRefused(t *testing.T) {
	a, b, ea, eb, swA := twoEnrolled(t)
	nonce := sha256.Sum256([]byte("run 1"))
	qa, err := a.Quote(nonce[:], []int{0, 23})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := b.Quote(nonce[:], []int{0, 23})
	if err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("run 2"))
	m := sha256.Sum256([]byte("another sealrund"))
	changed := *qa
	changed.PCRs = append([]PCR(nil), qa.PCRs...)
	changed.PCRs[1].SHA256 = "ff" + changed.PCRs[1].SHA256[2:] // PCR 23, all zeros before a measurement
	flipped := *qa
	flipped.Attest = append([]byte(nil), qa.Attest...)
	flipped.Attest[len(flipped.Attest)-1] ^= 1
	for _, c := range []struct {
		name string
		q    *Quote
		n    []byte
		want string
	}{
		{"a quote from another TPM", qb, nonce[:], ReasonSignature},
		{"a quote replayed for another run", qa, other[:], ReasonNonce},
		{"a PCR changed", &changed, nonce[:], ReasonPCR},
		{"a byte of the quote changed", &flipped, nonce[:], ReasonSignature},
		{"a PCR left out", &Quote{Attest: qa.Attest, Signature: qa.Signature, PCRs: qa.PCRs[:1]}, nonce[:], ReasonPCR},
	} {
		if err := VerifyQuote(c.q, a.AttestationKey(), c.n); err == nil || reason(t, err) != c.want {
			t.Errorf("%s: %v; want %s", c.name, err, c.want)
		}
	}
	// Measured after the quote: the values read then are the quote's (it read them before).
	if err := a.Extend(23, m[:]); err != nil {
		t.Fatal(err)
	}
	if err := VerifyQuote(qa, a.AttestationKey(), nonce[:]); err != nil {
		t.Errorf("a quote, its PCR extended after it: %v", err)
	}

	if _, err := VerifyEnrollment(eb, pool(t, swA.RootCA), pool(t, swA.Issuer)); err == nil || reason(t, err) != ReasonEK {
		t.Errorf("an EK certificate another CA made: %v", err)
	}
	swapped := *ea
	swapped.SigningKey = eb.SigningKey
	if _, err := VerifyEnrollment(&swapped, nil, nil); err == nil || reason(t, err) != ReasonCertify {
		t.Errorf("a certification of another TPM's key: %v", err)
	}
	akB := *ea
	akB.AttestationKey = eb.AttestationKey
	if _, err := VerifyEnrollment(&akB, nil, nil); err == nil || reason(t, err) != ReasonSignature {
		t.Errorf("another TPM's attestation key: %v", err)
	}
	asAK := *ea
	asAK.SigningKey = ea.AttestationKey
	if _, err := VerifyEnrollment(&asAK, nil, nil); err == nil || reason(t, err) != ReasonKey {
		t.Errorf("the attestation key given as the signing key: %v", err)
	}
	for _, bad := range [][]byte{nil, {0}, []byte("not a TPM structure")} {
		junk := *ea
		junk.Certify.Attest = bad
		if _, err := VerifyEnrollment(&junk, nil, nil); err == nil {
			t.Errorf("a certification of %q verified", bad)
		}
	}
}

// tpm2-tools' tpm2_checkquote (nobody here wrote it) verifies a quote as sealrun writes it: the
// TPMS_ATTEST as the message, the TPMT_SIGNATURE, the attestation key's PEM, the PCR values
// with their list, the nonce; and refuses it with another nonce or a PCR changed.
func TestCheckquoteInterop(t *testing.T) {
	checkquote := testenv.RequireTool(t, "tpm2_checkquote", "tpm2-tools")
	k, _ := open(t)
	m := sha256.Sum256([]byte("sealrund"))
	if err := k.Extend(23, m[:]); err != nil {
		t.Fatal(err)
	}
	nonce := sha256.Sum256([]byte("a run's statement"))
	q, err := k.Quote(nonce[:], []int{0, 7, 23})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	der, err := x509.MarshalPKIXPublicKey(k.AttestationKey())
	if err != nil {
		t.Fatal(err)
	}
	var pcrs []byte
	for _, p := range q.PCRs {
		v, _ := hex.DecodeString(p.SHA256)
		pcrs = append(pcrs, v...)
	}
	files := map[string][]byte{"ak.pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), "quote.msg": q.Attest, "quote.sig": q.Signature, "pcrs.bin": pcrs}
	for name, b := range files {
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	run := func(nonce []byte) ([]byte, error) {
		return exec.Command(checkquote, "-u", filepath.Join(dir, "ak.pem"), "-m", filepath.Join(dir, "quote.msg"), "-s", filepath.Join(dir, "quote.sig"),
			"-f", filepath.Join(dir, "pcrs.bin"), "-l", "sha256:0,7,23", "-g", "sha256", "-q", hex.EncodeToString(nonce)).CombinedOutput()
	}
	if out, err := run(nonce[:]); err != nil {
		t.Fatalf("tpm2_checkquote: %v\n%s", err, out)
	}
	other := sha256.Sum256([]byte("another run"))
	if out, err := run(other[:]); err == nil {
		t.Errorf("tpm2_checkquote took the quote for another nonce:\n%s", out)
	}
	pcrs[len(pcrs)-1] ^= 1
	os.WriteFile(filepath.Join(dir, "pcrs.bin"), pcrs, 0o644)
	if out, err := run(nonce[:]); err == nil {
		t.Errorf("tpm2_checkquote took a PCR changed:\n%s", out)
	}
}

// The attestation key bound to the EK: a challenge made from a TPM's EK certificate and its
// attestation key comes back open from that TPM only; another TPM cannot open it, nor can the
// right TPM for another TPM's attestation key.
func TestActivation(t *testing.T) {
	a, b, ea, eb, _ := twoEnrolled(t)
	rsaEK := func(e *Enrollment) *x509.Certificate {
		c := e.RSAEK()
		if c == nil {
			t.Fatal("no RSA EK certificate")
		}
		return c
	}
	c, secret, err := MakeChallenge(rsaEK(ea), ea.AttestationKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Activate(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckAnswer(secret, got); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Activate(c); err == nil && CheckAnswer(secret, got) == nil {
		t.Error("another TPM opened a challenge made for this one's EK")
	} else {
		t.Logf("another TPM: %v", err)
	}
	// B's operator claims A's EK for B's attestation key: A's TPM cannot open it for its own.
	c2, secret2, err := MakeChallenge(rsaEK(ea), eb.AttestationKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]*Keys{"A": a, "B": b} {
		if got, err := k.Activate(c2); err == nil && CheckAnswer(secret2, got) == nil {
			t.Errorf("TPM %s opened a challenge of A's EK naming B's attestation key", name)
		} else {
			t.Logf("TPM %s, A's EK and B's attestation key: %v", name, err)
		}
	}
	if err := CheckAnswer(secret, make([]byte, ChallengeSecretBytes)); err == nil || reason(t, err) != ReasonEK {
		t.Errorf("a wrong answer: %v", err)
	}
}

// The signing key through DSSE: an envelope sigstore's DSSE wrapper signs with the TPM's key
// verifies with the enrolled key's PEM, by sigstore's verifier and by openssl over the DSSE
// pre-authentication encoding (nobody here wrote either).
func TestSignerDSSE(t *testing.T) {
	openssl := testenv.RequireTool(t, "openssl", "openssl")
	k, _ := open(t)
	payload := []byte(`{"_type":"https://in-toto.io/Statement/v1"}`)
	env, err := dsse.WrapSigner(k.Signer(), "application/vnd.in-toto+json").SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadECDSAVerifier(k.SigningKey(), crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := dsse.WrapVerifier(v).VerifySignature(bytes.NewReader(env), nil); err != nil {
		t.Fatalf("sigstore's DSSE verifier: %v", err)
	}
	var e struct {
		Signatures []struct{ Sig string }
	}
	if err := json.Unmarshal(env, &e); err != nil || len(e.Signatures) != 1 {
		t.Fatalf("envelope: %v %s", err, env)
	}
	sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len("application/vnd.in-toto+json"), "application/vnd.in-toto+json", len(payload), payload)
	dir := t.TempDir()
	der, _ := x509.MarshalPKIXPublicKey(k.SigningKey())
	os.WriteFile(filepath.Join(dir, "sk.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	os.WriteFile(filepath.Join(dir, "pae"), []byte(pae), 0o644)
	os.WriteFile(filepath.Join(dir, "sig"), sig, 0o644)
	if out, err := exec.Command(openssl, "dgst", "-sha256", "-verify", filepath.Join(dir, "sk.pem"), "-signature", filepath.Join(dir, "sig"), filepath.Join(dir, "pae")).CombinedOutput(); err != nil {
		t.Fatalf("openssl dgst -verify: %v %s", err, out)
	}
}
