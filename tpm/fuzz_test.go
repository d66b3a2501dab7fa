package tpm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"testing"
)

// FuzzVerify: any bytes as a quote's or an enrollment's parts give a *Failure, never a panic
// (what a reader is handed may be anyone's).
func FuzzVerify(f *testing.F) {
	for _, s := range [][]byte{nil, {0}, {0xff, 0x54, 0x43, 0x47, 0x80, 0x18}, {0, 0x18, 0, 0x0b, 0, 0x20}} {
		f.Add(s, s)
	}
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.Fuzz(func(t *testing.T, attest, sig []byte) {
		var fl *Failure
		if err := VerifyQuote(&Quote{Attest: attest, Signature: sig, PCRs: []PCR{{Index: 0, SHA256: "00"}}}, &priv.PublicKey, nil); !errors.As(err, &fl) {
			t.Fatalf("quote: %v", err)
		}
		if _, err := VerifyEnrollment(&Enrollment{Format: EnrollmentFormat, AttestationKey: attest, SigningKey: sig, Certify: Attestation{attest, sig}}, nil, nil); !errors.As(err, &fl) {
			t.Fatalf("enrollment: %v", err)
		}
	})
}
