package tpm

import (
	"crypto"
	"crypto/sha256"
	"io"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Signer is the signing key as sigstore's signature.Signer (what DSSE wrapping, the ledger and
// the publication's list sign with): each message hashed with SHA-256 here and the digest signed
// by TPM2_Sign, one command at a time.
type Signer struct {
	mu sync.Mutex
	k  *Keys
}

var _ signature.Signer = (*Signer)(nil)

// Signer returns the signing key as a signature.Signer.
func (k *Keys) Signer() *Signer { return &Signer{k: k} }

// SignMessage signs the SHA-256 of message; the signature is ASN.1 DER (ECDSA P-256).
func (s *Signer) SignMessage(message io.Reader, _ ...signature.SignOption) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, message); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.k.SignDigest(h.Sum(nil))
}

// PublicKey is the signing key's public half (*ecdsa.PublicKey).
func (s *Signer) PublicKey(...signature.PublicKeyOption) (crypto.PublicKey, error) {
	return s.k.sk.pub, nil
}
