package tpm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/asn1"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"

	"github.com/sealrun/sealrun/internal/fileio"
)

// EnrollmentFormat is the version of an Enrollment's JSON.
const EnrollmentFormat = "sealrun-tpm-enrollment/v1"

// enrollmentData is the qualifying data of the attestation key's certification of the signing key.
var enrollmentData = []byte("sealrun tpm enrollment v1")

// EK certificate NV indexes (TCG EK Credential Profile 2.0, section 2.2.1.4): RSA 2048 and ECC
// NIST P-256 in the low range, ECC NIST P-384 in the high range.
var ekCertIndexes = []tpm2.TPMHandle{0x01c00002, 0x01c0000a, 0x01c00016}

// Enrollment is what an operator publishes of the host's TPM: its EK certificates (its maker's
// word that the EK is in a genuine TPM), the attestation key and the signing key (their TPM
// public areas), and the attestation key's certification of the signing key (the TPM's word
// that the signing key is in it, fixed to it, and made inside it).
type Enrollment struct {
	Format         string      `json:"format"`
	EKCertificates [][]byte    `json:"ek_certificates"` // DER, as the TPM holds them
	AttestationKey []byte      `json:"attestation_key"` // TPMT_PUBLIC
	SigningKey     []byte      `json:"signing_key"`     // TPMT_PUBLIC
	Certify        Attestation `json:"certify"`         // TPM2_Certify of the signing key by the attestation key
}

// Attestation is a TPMS_ATTEST and the attestation key's TPMT_SIGNATURE over it.
type Attestation struct {
	Attest    []byte `json:"attest"`
	Signature []byte `json:"signature"`
}

// Enroll reads the TPM's EK certificates and certifies the signing key with the attestation key.
func (k *Keys) Enroll() (*Enrollment, error) {
	e := &Enrollment{Format: EnrollmentFormat, AttestationKey: tpm2.Marshal(&k.ak.public), SigningKey: tpm2.Marshal(&k.sk.public)}
	for _, idx := range ekCertIndexes {
		c, err := readNV(k, idx)
		if err != nil {
			continue // the TPM has no certificate of that kind
		}
		e.EKCertificates = append(e.EKCertificates, c)
	}
	ak, _, err := k.load(&k.ak)
	if err != nil {
		return nil, fmt.Errorf("make the attestation key: %w", err)
	}
	defer k.unload(ak)
	sk, _, err := k.load(&k.sk)
	if err != nil {
		return nil, fmt.Errorf("make the signing key: %w", err)
	}
	defer k.unload(sk)
	r, err := tpm2.Certify{ObjectHandle: sk.auth(), SignHandle: ak.auth(), QualifyingData: tpm2.TPM2BData{Buffer: enrollmentData}, InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull}}.Execute(k.t)
	if err != nil {
		return nil, fmt.Errorf("TPM2_Certify of the signing key: %w", err)
	}
	e.Certify = Attestation{Attest: r.CertifyInfo.Bytes(), Signature: tpm2.Marshal(&r.Signature)}
	return e, nil
}

func readNV(k *Keys, idx tpm2.TPMHandle) ([]byte, error) {
	pub, err := tpm2.NVReadPublic{NVIndex: idx}.Execute(k.t)
	if err != nil {
		return nil, err
	}
	nv, err := pub.NVPublic.Contents()
	if err != nil {
		return nil, err
	}
	var out []byte
	for off := uint16(0); off < nv.DataSize; {
		n := min(nv.DataSize-off, 1024)
		r, err := tpm2.NVRead{AuthHandle: tpm2.AuthHandle{Handle: idx, Name: pub.NVName, Auth: tpm2.PasswordAuth(nil)}, NVIndex: tpm2.NamedHandle{Handle: idx, Name: pub.NVName}, Size: n, Offset: off}.Execute(k.t)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Data.Buffer...)
		off += n
	}
	return out, nil
}

// RSAEK is the enrollment's RSA EK certificate (the one a challenge is made for), nil where it
// has none that parses.
func (e *Enrollment) RSAEK() *x509.Certificate {
	for _, der := range e.EKCertificates {
		if c, err := x509.ParseCertificate(der); err == nil && c.PublicKeyAlgorithm == x509.RSA {
			return c
		}
	}
	return nil
}

// Enrolled is what an enrollment that verified says.
type Enrolled struct {
	AttestationKey *ecdsa.PublicKey
	SigningKey     *ecdsa.PublicKey
	// EK is the EK certificate that chained to the roots given (nil: none were given).
	EK *x509.Certificate
}

// MaxEnrollmentBytes bounds an enrollment's JSON.
const MaxEnrollmentBytes = 64 << 10

// VerifyEnrollment checks an enrollment: both keys are ECDSA P-256 keys fixed to a TPM and made
// inside it, the attestation key restricted; the attestation key's certification is of the
// signing key, with sealrun's qualifying data; and, with roots (the TPM maker's CAs; for swtpm,
// its local CA), an EK certificate chains to them through intermediates.
//
// What it does not show: that the attestation key is in the same TPM as the EK. The TPM says so
// only to one who challenges it (TPM2_ActivateCredential, docs/TPM.md).
func VerifyEnrollment(e *Enrollment, roots, intermediates *x509.CertPool) (*Enrolled, error) {
	if e.Format != EnrollmentFormat {
		return nil, failf(ReasonForm, "format %q; expected %s", e.Format, EnrollmentFormat)
	}
	ak, err := residentKey(e.AttestationKey, "attestation key", true)
	if err != nil {
		return nil, err
	}
	sk, err := residentKey(e.SigningKey, "signing key", false)
	if err != nil {
		return nil, err
	}
	a, err := checkAttest(e.Certify.Attest, e.Certify.Signature, ak.pub, tpm2.TPMSTAttestCertify)
	if err != nil {
		return nil, err
	}
	info, err := a.Attested.Certify()
	if err != nil {
		return nil, failf(ReasonForm, "not a certification: %v", err)
	}
	name, err := tpm2.ObjectName(&sk.public)
	if err != nil {
		return nil, failf(ReasonKey, "the signing key's name: %v", err)
	}
	switch {
	case !bytes.Equal(a.ExtraData.Buffer, enrollmentData):
		return nil, failf(ReasonCertify, "the certification's qualifying data is %q, not sealrun's enrollment's", a.ExtraData.Buffer)
	case !bytes.Equal(info.Name.Buffer, name.Buffer):
		return nil, failf(ReasonCertify, "the attestation key certified another key than the signing key given")
	}
	out := &Enrolled{AttestationKey: ak.pub, SigningKey: sk.pub}
	if roots == nil {
		return out, nil
	}
	var errs []error
	for i, der := range e.EKCertificates {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			errs = append(errs, fmt.Errorf("EK certificate %d: %v", i, err))
			continue
		}
		// The TCG's EK profile marks the subject alternative name (the TPM's maker, model and
		// version) critical; Go leaves it unhandled. It is read here, not trusted beyond the chain.
		var unhandled []asn1.ObjectIdentifier
		for _, oid := range c.UnhandledCriticalExtensions {
			if !oid.Equal(oidSubjectAltName) {
				unhandled = append(unhandled, oid)
			}
		}
		c.UnhandledCriticalExtensions = unhandled
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			errs = append(errs, fmt.Errorf("EK certificate %d (%s): %v", i, c.Issuer, err))
			continue
		}
		out.EK = c
		return out, nil
	}
	if len(e.EKCertificates) == 0 {
		errs = append(errs, errors.New("the enrollment has no EK certificate"))
	}
	return nil, failf(ReasonEK, "no EK certificate chains to the roots given: %v", errors.Join(errs...))
}

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// residentKey reads a TPMT_PUBLIC and checks it is an ECDSA P-256 signing key fixed to its TPM
// and made inside it (restricted, for the attestation key).
func residentKey(b []byte, what string, restricted bool) (*key, error) {
	pub, err := tpm2.Unmarshal[tpm2.TPMTPublic](b)
	if err != nil {
		return nil, failf(ReasonForm, "the %s is not a TPMT_PUBLIC: %v", what, err)
	}
	a := pub.ObjectAttributes
	switch {
	case !a.FixedTPM || !a.FixedParent:
		return nil, failf(ReasonKey, "the %s may leave its TPM (fixedTPM, fixedParent unset)", what)
	case !a.SensitiveDataOrigin:
		return nil, failf(ReasonKey, "the %s was not made inside its TPM (sensitiveDataOrigin unset): it may exist outside", what)
	case !a.SignEncrypt || a.Decrypt:
		return nil, failf(ReasonKey, "the %s is not a signing key", what)
	case a.Restricted != restricted:
		return nil, failf(ReasonKey, "the %s's restricted attribute is %v; expected %v", what, a.Restricted, restricted)
	}
	k := &key{public: *pub}
	if k.pub, err = publicKey(pub); err != nil {
		return nil, err
	}
	return k, nil
}

// ReadEnrollment reads an enrollment file strictly (bounded, no unknown member).
func ReadEnrollment(path string) (*Enrollment, error) {
	b, err := fileio.ReadLimited(path, "TPM enrollment", MaxEnrollmentBytes)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxEnrollmentBytes {
		return nil, fmt.Errorf("%s: over %d bytes; an enrollment is a few kilobytes", path, MaxEnrollmentBytes)
	}
	var e Enrollment
	if err := decodeStrict(b, &e); err != nil {
		return nil, fmt.Errorf("%s is not a TPM enrollment (sealrun tpm enroll writes one): %v", path, err)
	}
	return &e, nil
}

// decodeStrict reads one JSON value into v: no unknown member, nothing after it.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more after its JSON")
	}
	return nil
}

// CertPool reads PEM certificates (a TPM maker's CAs) into a pool; nil for no files.
func CertPool(files []string) (*x509.CertPool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	p := x509.NewCertPool()
	for _, f := range files {
		b, err := fileio.ReadLimited(f, "certificate", 1<<20)
		if err != nil {
			return nil, err
		}
		if !p.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return p, nil
}
