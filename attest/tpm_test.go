//go:build linux

package attest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/tpm"
)

// A run's attestation signed by a key that never left a TPM (swtpm's; package tpm) verifies as
// any ECDSA P-256 host key's does, with the enrolled signing key's PEM; an amendment too.
func TestSignedInTPM(t *testing.T) {
	sw := testenv.Swtpm(t)
	dev, err := tpm.Open(sw.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	k, err := tpm.LoadKeys(dev)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.SigningKey())
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "sealrun.pub")
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
	v, _, err := LoadVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	st, bundle := fixture(t, 3, 10)
	env, err := Sign(context.Background(), st, k.Signer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(env, v, WithBundleDigest(bundle)); err != nil {
		t.Fatalf("an attestation signed in the TPM: %v", err)
	}
	if _, err := Verify(env, verifier(t, "ecdsa")); reason(t, err) != ReasonSignature {
		t.Errorf("with another ECDSA key: %v", err)
	}
	am, _ := amendmentFixture(t, "note")
	aenv, _, err := SignAmendment(context.Background(), am, k.Signer())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyAmendment(aenv, v); err != nil {
		t.Errorf("an amendment signed in the TPM: %v", err)
	}
}
