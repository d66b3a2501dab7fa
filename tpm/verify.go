package tpm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/asn1"
	"fmt"
	"math/big"

	"github.com/google/go-tpm/tpm2"
)

// Reasons a verification fails, each a Failure's.
const (
	ReasonForm      = "form"      // not a TPM structure of the kind expected
	ReasonSignature = "signature" // the attestation key's signature does not verify
	ReasonNonce     = "nonce"     // the qualifying data is not what the reader binds: a replayed quote
	ReasonPCR       = "pcr"       // the PCR values given are not the ones quoted
	ReasonKey       = "key"       // a key's attributes are not a TPM-resident key's
	ReasonCertify   = "certify"   // the certification is not of the signing key
	ReasonEK        = "ek"        // an EK certificate does not chain to the roots given
)

// Failure is why a TPM structure was refused.
type Failure struct {
	Reason string
	Msg    string
}

func (f *Failure) Error() string { return fmt.Sprintf("not valid (%s): %s", f.Reason, f.Msg) }

func failf(reason, format string, a ...any) error {
	return &Failure{Reason: reason, Msg: fmt.Sprintf(format, a...)}
}

// publicKey is the ECDSA P-256 public key of a TPM public area.
func publicKey(pub *tpm2.TPMTPublic) (*ecdsa.PublicKey, error) {
	if pub.Type != tpm2.TPMAlgECC {
		return nil, failf(ReasonKey, "a key of algorithm %#x; sealrun's TPM keys are ECC", pub.Type)
	}
	parms, err := pub.Parameters.ECCDetail()
	if err != nil || parms.CurveID != tpm2.TPMECCNistP256 {
		return nil, failf(ReasonKey, "an ECC key not on NIST P-256")
	}
	pt, err := pub.Unique.ECC()
	if err != nil {
		return nil, failf(ReasonKey, "no ECC point: %v", err)
	}
	if len(pt.X.Buffer) > 32 || len(pt.Y.Buffer) > 32 {
		return nil, failf(ReasonKey, "a coordinate longer than P-256's 32 bytes")
	}
	// The uncompressed point, 0x04 || X || Y, each coordinate left-padded to 32 bytes.
	point := make([]byte, 65)
	point[0] = 4
	copy(point[33-len(pt.X.Buffer):33], pt.X.Buffer)
	copy(point[65-len(pt.Y.Buffer):], pt.Y.Buffer)
	k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, failf(ReasonKey, "the point is not a P-256 public key: %v", err)
	}
	return k, nil
}

// derSignature is a TPM ECDSA signature in ASN.1 DER.
func derSignature(sig tpm2.TPMTSignature) ([]byte, error) {
	es, err := sig.Signature.ECDSA()
	if err != nil || sig.SigAlg != tpm2.TPMAlgECDSA {
		return nil, failf(ReasonForm, "not an ECDSA signature (algorithm %#x)", sig.SigAlg)
	}
	return asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(es.SignatureR.Buffer), new(big.Int).SetBytes(es.SignatureS.Buffer)})
}

// checkAttest verifies the attestation key ak's signature (a TPMT_SIGNATURE) over attest (a
// TPMS_ATTEST as the TPM produced it) and returns what it says, of type typ.
func checkAttest(attest, sig []byte, ak *ecdsa.PublicKey, typ tpm2.TPMST) (*tpm2.TPMSAttest, error) {
	s, err := tpm2.Unmarshal[tpm2.TPMTSignature](sig)
	if err != nil {
		return nil, failf(ReasonForm, "the signature is not a TPMT_SIGNATURE: %v", err)
	}
	der, err := derSignature(*s)
	if err != nil {
		return nil, err
	}
	if es, _ := s.Signature.ECDSA(); es.Hash != tpm2.TPMAlgSHA256 { // an ECDSA signature: derSignature said so
		return nil, failf(ReasonForm, "the signature's hash is not SHA-256")
	}
	h := sha256.Sum256(attest)
	if !ecdsa.VerifyASN1(ak, h[:], der) {
		return nil, failf(ReasonSignature, "the attestation key's signature does not verify: the structure was altered, or another TPM's key signed it")
	}
	a, err := tpm2.Unmarshal[tpm2.TPMSAttest](attest)
	if err != nil {
		return nil, failf(ReasonForm, "not a TPMS_ATTEST: %v", err)
	}
	if a.Magic != tpm2.TPMGeneratedValue {
		return nil, failf(ReasonForm, "magic %#x is not TPM_GENERATED: the TPM did not produce it", uint32(a.Magic))
	}
	if a.Type != typ {
		return nil, failf(ReasonForm, "a TPMS_ATTEST of type %#x; expected %#x", uint16(a.Type), uint16(typ))
	}
	if rest := tpm2.Marshal(a); !bytes.Equal(rest, attest) {
		return nil, failf(ReasonForm, "bytes after the TPMS_ATTEST, or not its encoding")
	}
	return a, nil
}
