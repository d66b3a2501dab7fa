//go:build linux

package tpm

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkSign: a run's attestation signed in the TPM (swtpm: a software stand-in, so a figure
// to report, not a target) beside the same signature with a key file's key in memory, the
// baseline.
func BenchmarkSign(b *testing.B) {
	d := sha256.Sum256([]byte("DSSEv1 28 application/vnd.in-toto+json 2 {}"))
	b.Run("tpm", func(b *testing.B) {
		k, _ := open(b)
		for b.Loop() {
			if _, err := k.SignDigest(d[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file-key", func(b *testing.B) {
		priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, priv, d[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQuote: a run's quote of PCRs 0, 7 and 23 with its nonce, and reading their values.
func BenchmarkQuote(b *testing.B) {
	k, _ := open(b)
	nonce := sha256.Sum256([]byte("a run's statement"))
	for b.Loop() {
		if _, err := k.Quote(nonce[:], []int{0, 7, 23}); err != nil {
			b.Fatal(err)
		}
	}
}
