package tpm

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// Challenge is a credential only the TPM that holds both an EK and an attestation key can open
// (TPM2_MakeCredential's output, made without a TPM): whoever makes it from the EK certificate and
// the attestation key's public area, and gets its secret back from the host, knows the
// attestation key is in the TPM the EK certificate names. VerifyEnrollment cannot show that: the
// EK decrypts, it does not sign.
type Challenge struct {
	IDObject  []byte `json:"id_object"`        // TPM2B_ID_OBJECT's buffer
	EncSecret []byte `json:"encrypted_secret"` // TPM2B_ENCRYPTED_SECRET's buffer
}

// ChallengeSecretBytes is the size of a challenge's secret.
const ChallengeSecretBytes = 32

// MakeChallenge makes a challenge for the TPM whose RSA 2048 EK certificate is ek, and its
// attestation key ak (a TPMT_PUBLIC, an enrollment's), and returns the secret the TPM must give
// back.
func MakeChallenge(ek *x509.Certificate, ak []byte) (*Challenge, []byte, error) {
	pub, ok := ek.PublicKey.(*rsa.PublicKey)
	if !ok || pub.N.BitLen() != 2048 || pub.E != 65537 {
		return nil, nil, failf(ReasonEK, "the EK certificate's key is not the TCG's RSA 2048 EK (the challenge is made for that EK)")
	}
	tmpl := tpm2.RSAEKTemplate
	tmpl.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: pub.N.FillBytes(make([]byte, 256))})
	key, err := tpm2.ImportEncapsulationKey(&tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("the EK as an encapsulation key: %w", err)
	}
	akPub, err := tpm2.Unmarshal[tpm2.TPMTPublic](ak)
	if err != nil {
		return nil, nil, failf(ReasonForm, "the attestation key is not a TPMT_PUBLIC: %v", err)
	}
	name, err := tpm2.ObjectName(akPub)
	if err != nil {
		return nil, nil, failf(ReasonKey, "the attestation key's name: %v", err)
	}
	secret := make([]byte, ChallengeSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, nil, err
	}
	id, enc, err := tpm2.CreateCredential(rand.Reader, key, name.Buffer, secret)
	if err != nil {
		return nil, nil, fmt.Errorf("make the credential: %w", err)
	}
	return &Challenge{IDObject: id, EncSecret: enc}, secret, nil
}

// Activate opens a challenge with the TPM's RSA 2048 EK (made again from the TCG's template) and
// the attestation key: it gives the secret back only where both are in this TPM and the challenge
// names this attestation key.
func (k *Keys) Activate(c *Challenge) ([]byte, error) {
	ek, err := tpm2.CreatePrimary{PrimaryHandle: tpm2.TPMRHEndorsement, InPublic: tpm2.New2B(tpm2.RSAEKTemplate)}.Execute(k.t)
	if err != nil {
		return nil, fmt.Errorf("make the EK again: %w", err)
	}
	defer tpm2.FlushContext{FlushHandle: ek.ObjectHandle}.Execute(k.t)
	ak, _, err := k.load(&k.ak)
	if err != nil {
		return nil, fmt.Errorf("make the attestation key: %w", err)
	}
	defer k.unload(ak)
	r, err := tpm2.ActivateCredential{
		ActivateHandle: ak.auth(),
		KeyHandle:      tpm2.AuthHandle{Handle: ek.ObjectHandle, Name: ek.Name, Auth: tpm2.Policy(tpm2.TPMAlgSHA256, 16, endorsementSecret)},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: c.IDObject},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: c.EncSecret},
	}.Execute(k.t)
	if err != nil {
		return nil, fmt.Errorf("TPM2_ActivateCredential: %w (a challenge made for another TPM's EK, or another attestation key)", err)
	}
	return r.CertInfo.Buffer, nil
}

// endorsementSecret satisfies the EK's policy: TPM2_PolicySecret of the endorsement hierarchy.
func endorsementSecret(t transport.TPM, session tpm2.TPMISHPolicy, nonce tpm2.TPM2BNonce) error {
	_, err := tpm2.PolicySecret{AuthHandle: tpm2.TPMRHEndorsement, PolicySession: session, NonceTPM: nonce}.Execute(t)
	return err
}

// CheckAnswer says whether the secret the host gave back is the challenge's.
func CheckAnswer(secret, answer []byte) error {
	if len(answer) != ChallengeSecretBytes || !bytes.Equal(secret, answer) {
		return failf(ReasonEK, "the host's answer is not the challenge's secret: its attestation key is not in the TPM of that EK")
	}
	return nil
}
