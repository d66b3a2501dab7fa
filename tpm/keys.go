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

// key is one of sealrun's keys: what it is made from, and its public half.
type key struct {
	hierarchy tpm2.TPMHandle
	public    tpm2.TPMTPublic
	pub       *ecdsa.PublicKey
}

// loaded is a key made (again) in the TPM for one operation, flushed after it.
type loaded struct {
	handle tpm2.TPMHandle
	name   tpm2.TPM2BName
}

func (l loaded) auth() tpm2.AuthHandle {
	return tpm2.AuthHandle{Handle: l.handle, Name: l.name, Auth: tpm2.PasswordAuth(nil)}
}

// Keys are the attestation key (under the endorsement hierarchy, beside the EK) and the signing
// key (under the owner hierarchy) of the TPM t. Each operation makes the key it needs again and
// unloads it after, so that nothing stays loaded between operations: a TPM reached without the
// kernel's resource manager (a raw device, swtpm's socket) keeps what a process loaded after it
// exits, and has room for three objects.
type Keys struct {
	t      transport.TPM
	ak, sk key
}

// LoadKeys makes (again: they are primary keys) the attestation and signing keys in t and reads
// their public halves.
func LoadKeys(t transport.TPM) (*Keys, error) {
	k := &Keys{t: t, ak: key{hierarchy: tpm2.TPMRHEndorsement, public: template(true)}, sk: key{hierarchy: tpm2.TPMRHOwner, public: template(false)}}
	for _, c := range []struct {
		k    *key
		what string
	}{{&k.ak, "attestation key"}, {&k.sk, "signing key"}} {
		l, out, err := k.load(c.k)
		if err != nil {
			return nil, fmt.Errorf("make the %s: %w", c.what, err)
		}
		k.unload(l)
		c.k.public = *out
		if c.k.pub, err = publicKey(out); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// load makes k in the TPM; unload it when done.
func (ks *Keys) load(k *key) (loaded, *tpm2.TPMTPublic, error) {
	r, err := tpm2.CreatePrimary{PrimaryHandle: k.hierarchy, InPublic: tpm2.New2B(template(k.public.ObjectAttributes.Restricted))}.Execute(ks.t)
	if err != nil {
		return loaded{}, nil, err
	}
	pub, err := r.OutPublic.Contents()
	if err != nil {
		ks.unload(loaded{handle: r.ObjectHandle})
		return loaded{}, nil, err
	}
	if k.pub != nil {
		if got, err := publicKey(pub); err != nil || !got.Equal(k.pub) {
			ks.unload(loaded{handle: r.ObjectHandle})
			return loaded{}, nil, errors.New("the TPM made another key than before from the same template: its hierarchy was cleared (enroll it again)")
		}
	}
	return loaded{handle: r.ObjectHandle, name: r.Name}, pub, nil
}

func (ks *Keys) unload(l loaded) {
	if l.handle != 0 {
		tpm2.FlushContext{FlushHandle: l.handle}.Execute(ks.t)
	}
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
	sk, _, err := k.load(&k.sk)
	if err != nil {
		return nil, fmt.Errorf("make the signing key: %w", err)
	}
	defer k.unload(sk)
	r, err := tpm2.Sign{KeyHandle: sk.auth(), Digest: tpm2.TPM2BDigest{Buffer: digest}, InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull},
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
