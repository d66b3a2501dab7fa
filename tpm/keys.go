package tpm

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// template is the public area of both keys sealrun makes in a TPM: ECDSA P-256 with SHA-256
// (what TPMs sign with), fixed to the TPM and made inside it. The attestation key is restricted
// (it signs only what the TPM itself produced: quotes, certifications); the signing key is not
// (it signs attestations' DSSE encodings). Both are primary keys: the same template under the
// same hierarchy gives the same key again, so nothing of them is stored outside the TPM.
func template(restricted bool) tpm2.TPMTPublic {
	return tpm2.TPMTPublic{Type: tpm2.TPMAlgECC, NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{FixedTPM: true, FixedParent: true, SensitiveDataOrigin: true, UserWithAuth: true, NoDA: true, Restricted: restricted, SignEncrypt: true},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgECC, &tpm2.TPMSECCParms{CurveID: tpm2.TPMECCNistP256,
			Scheme: tpm2.TPMTECCScheme{Scheme: tpm2.TPMAlgECDSA, Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgECDSA, &tpm2.TPMSSigSchemeECDSA{HashAlg: tpm2.TPMAlgSHA256})}})}
}

// key is one key loaded in the TPM.
type key struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
	public tpm2.TPMTPublic
	pub    *ecdsa.PublicKey
}

func (k *key) auth() tpm2.AuthHandle {
	return tpm2.AuthHandle{Handle: k.handle, Name: k.name, Auth: tpm2.PasswordAuth(nil)}
}

// Keys are the attestation key (under the endorsement hierarchy, beside the EK) and the signing
// key (under the owner hierarchy), loaded in the TPM t until Close.
type Keys struct {
	t      transport.TPM
	ak, sk key
}

// LoadKeys makes (again: they are primary keys) the attestation and signing keys in t.
func LoadKeys(t transport.TPM) (*Keys, error) {
	k := &Keys{t: t}
	var err error
	if k.ak, err = primary(t, tpm2.TPMRHEndorsement, template(true)); err != nil {
		return nil, fmt.Errorf("make the attestation key: %w", err)
	}
	if k.sk, err = primary(t, tpm2.TPMRHOwner, template(false)); err != nil {
		k.Close()
		return nil, fmt.Errorf("make the signing key: %w", err)
	}
	return k, nil
}

func primary(t transport.TPM, hierarchy tpm2.TPMHandle, tmpl tpm2.TPMTPublic) (key, error) {
	r, err := tpm2.CreatePrimary{PrimaryHandle: hierarchy, InPublic: tpm2.New2B(tmpl)}.Execute(t)
	if err != nil {
		return key{}, err
	}
	pub, err := r.OutPublic.Contents()
	if err != nil {
		return key{}, err
	}
	k := key{handle: r.ObjectHandle, name: r.Name, public: *pub}
	if k.pub, err = publicKey(pub); err != nil {
		return key{}, err
	}
	return k, nil
}

// Close unloads the keys from the TPM (they are made again by the next LoadKeys).
func (k *Keys) Close() {
	for _, h := range []tpm2.TPMHandle{k.ak.handle, k.sk.handle} {
		if h != 0 {
			tpm2.FlushContext{FlushHandle: h}.Execute(k.t)
		}
	}
	k.ak.handle, k.sk.handle = 0, 0
}

// SigningKey is the signing key's public half.
func (k *Keys) SigningKey() *ecdsa.PublicKey { return k.sk.pub }

// AttestationKey is the attestation key's public half.
func (k *Keys) AttestationKey() *ecdsa.PublicKey { return k.ak.pub }

// SignDigest signs a SHA-256 digest with the signing key and returns the signature in ASN.1 DER
// (what crypto/ecdsa and DSSE verifiers read).
func (k *Keys) SignDigest(digest []byte) ([]byte, error) {
	if len(digest) != sha256.Size {
		return nil, fmt.Errorf("sign: a SHA-256 digest is %d bytes, not %d", sha256.Size, len(digest))
	}
	r, err := tpm2.Sign{KeyHandle: k.sk.auth(), Digest: tpm2.TPM2BDigest{Buffer: digest}, InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
		Validation: tpm2.TPMTTKHashCheck{Tag: tpm2.TPMSTHashCheck, Hierarchy: tpm2.TPMRHNull}}.Execute(k.t)
	if err != nil {
		return nil, fmt.Errorf("TPM2_Sign: %w", err)
	}
	return derSignature(r.Signature)
}

// Extend extends PCR pcr's SHA-256 bank with digest (a measurement: sealrund's own binary at its
// start, say), as an event log records it.
func (k *Keys) Extend(pcr int, digest []byte) error {
	if pcr < 0 || pcr > 23 || len(digest) != sha256.Size {
		return errors.New("extend: a PCR is 0 to 23 and a measurement a SHA-256 digest")
	}
	_, err := tpm2.PCRExtend{PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
		Digests: tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: digest}}}}.Execute(k.t)
	if err != nil {
		return fmt.Errorf("TPM2_PCR_Extend %d: %w", pcr, err)
	}
	return nil
}
