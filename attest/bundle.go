package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// BundleMediaType is the Sigstore bundle format sealrun writes beside each envelope: v0.3,
// which carries a DSSE envelope and names the verification key by a hint.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// BundleSuffix replaces ".att.json" in the bundle's file name: result.att.json ->
// result.sigstore.json.
const BundleSuffix = ".sigstore.json"

// BundlePath is the Sigstore bundle's path for an envelope's path.
func BundlePath(envelopePath string) string {
	return strings.TrimSuffix(strings.TrimSuffix(envelopePath, ".json"), ".att") + BundleSuffix
}

type bundleSignature struct {
	Sig   string `json:"sig"`
	KeyID string `json:"keyid"`
}

type bundleEnvelope struct {
	Payload     string            `json:"payload"`
	PayloadType string            `json:"payloadType"`
	Signatures  []bundleSignature `json:"signatures"`
}

type sigstoreBundle struct {
	MediaType            string `json:"mediaType"`
	VerificationMaterial struct {
		PublicKey struct {
			Hint string `json:"hint"`
		} `json:"publicKey"`
		TlogEntries               []json.RawMessage `json:"tlogEntries"`
		TimestampVerificationData timestampData     `json:"timestampVerificationData"`
	} `json:"verificationMaterial"`
	DSSEEnvelope bundleEnvelope `json:"dsseEnvelope"`
}

// timestampData is a bundle's timestampVerificationData: RFC 3161 timestamps of the signature.
type timestampData struct {
	RFC3161Timestamps []signedTimestamp `json:"rfc3161Timestamps,omitempty"`
}

type signedTimestamp struct {
	SignedTimestamp string `json:"signedTimestamp"` // base64 of the DER TimeStampResp (RFC 3161 §2.4.2), as Sigstore has it
}

// SigstoreBundle wraps a signed envelope in a Sigstore bundle (v0.3) with a public-key hint
// (keyHint: the key's id, KeyID), no transparency-log entry, and the RFC 3161 timestamps of its
// signature given (DER TimeStampResps; none for none): the result is verified offline against the
// operator's public key (and the TSA's chain), as attest/VERIFY.md shows with cosign.
func SigstoreBundle(env []byte, keyHint string, timestamps ...[]byte) ([]byte, error) {
	var e bundleEnvelope
	if err := strictDecode(env, &e, true); err != nil {
		return nil, fmt.Errorf("sigstore bundle: the envelope: %w", err)
	}
	if len(e.Signatures) != 1 || e.PayloadType != PayloadType {
		return nil, fmt.Errorf("sigstore bundle: the envelope must have one signature and payloadType %s", PayloadType)
	}
	var b sigstoreBundle
	b.MediaType = BundleMediaType
	b.VerificationMaterial.PublicKey.Hint = keyHint
	b.VerificationMaterial.TlogEntries = []json.RawMessage{}
	for _, t := range timestamps {
		b.VerificationMaterial.TimestampVerificationData.RFC3161Timestamps = append(b.VerificationMaterial.TimestampVerificationData.RFC3161Timestamps, signedTimestamp{base64.StdEncoding.EncodeToString(t)})
	}
	b.DSSEEnvelope = e
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// EnvelopeOf returns the DSSE envelope of a file that is either an envelope or a Sigstore
// bundle (v0.3 or later carrying a dsseEnvelope), so verify takes both.
func EnvelopeOf(data []byte) ([]byte, error) {
	// No key can be mediaType (encoding/json matches keys without case, and after unescaping)
	// where neither the word in any case nor an escape is in the bytes: an envelope, as is.
	if !bytes.Contains(data, []byte(`\u`)) && !containsFoldASCII(data, "mediatype") {
		return data, nil
	}
	var probe struct {
		MediaType *string `json:"mediaType"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.MediaType == nil {
		return data, nil // not a bundle: Verify judges it as an envelope
	}
	if !strings.HasPrefix(*probe.MediaType, "application/vnd.dev.sigstore.bundle") {
		return nil, failf(ReasonEnvelopeSyntax, "mediaType %q is not a Sigstore bundle", *probe.MediaType)
	}
	var b struct {
		MediaType            string          `json:"mediaType"`
		VerificationMaterial json.RawMessage `json:"verificationMaterial"`
		DSSEEnvelope         json.RawMessage `json:"dsseEnvelope"`
	}
	if err := strictDecode(data, &b, true); err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "Sigstore bundle: %v", err)
	}
	if len(b.DSSEEnvelope) == 0 {
		return nil, failf(ReasonEnvelopeSyntax, "the Sigstore bundle carries no dsseEnvelope (a message-signature bundle is not a sealrun attestation)")
	}
	return b.DSSEEnvelope, nil
}

// containsFoldASCII reports whether data holds word (lower-case ASCII letters whose only case
// folds are ASCII: not k or s) in any mix of cases. It compares from the word's end and skips
// ahead by the last byte compared (Horspool's rule): in an envelope's base64 most bytes are not
// in the word, and most places are skipped whole.
func containsFoldASCII(data []byte, word string) bool {
	n := len(word)
	if n == 0 {
		return true
	}
	var skip [256]int
	for c := range skip {
		skip[c] = n
	}
	for j := range n - 1 {
		skip[word[j]], skip[word[j]&^0x20] = n-1-j, n-1-j
	}
	for i := 0; i+n <= len(data); i += skip[data[i+n-1]] {
		j := n - 1
		for ; j >= 0 && data[i+j]|0x20 == word[j]; j-- {
		}
		if j < 0 {
			return true
		}
	}
	return false
}

// BundleTimestamps returns the RFC 3161 timestamps (DER TimeStampResps, or bare tokens) a Sigstore bundle carries.
func BundleTimestamps(data []byte) ([][]byte, error) {
	var b struct {
		VerificationMaterial struct {
			TimestampVerificationData timestampData `json:"timestampVerificationData"`
		} `json:"verificationMaterial"`
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "Sigstore bundle: %v", err)
	}
	var out [][]byte
	for i, t := range b.VerificationMaterial.TimestampVerificationData.RFC3161Timestamps {
		der, err := base64.StdEncoding.DecodeString(t.SignedTimestamp)
		if err != nil || len(der) > MaxTimestampResponse {
			return nil, failf(ReasonTimestamp, "rfc3161Timestamps[%d]: not a base64 timestamp of at most %d bytes", i, MaxTimestampResponse)
		}
		out = append(out, der)
	}
	return out, nil
}

// SameEnvelope reports whether two DSSE envelopes (as a file holds one, or as a bundle carries
// it, formatted otherwise) are the same: payload, payload type and signatures.
func SameEnvelope(a, b []byte) bool {
	var x, y bundleEnvelope
	if strictDecode(a, &x, false) != nil || strictDecode(b, &y, false) != nil {
		return false
	}
	if x.Payload != y.Payload || x.PayloadType != y.PayloadType || len(x.Signatures) != len(y.Signatures) {
		return false
	}
	for i := range x.Signatures {
		if x.Signatures[i] != y.Signatures[i] {
			return false
		}
	}
	return true
}

// TPMQuoteFile is a run's TPM quote beside its attestation (package tpm's RunQuote: the quote of
// the statement and sealrund's event log), where its host has [tpm].
const TPMQuoteFile = "result.tpm.json"
