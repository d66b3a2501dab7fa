package attest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// RFC 3161 timestamps. A timestamp authority (TSA) signs, with a certificate made for nothing
// else (extended key usage timeStamping), that a hash existed at a time. sealrun asks for one over
// an attestation's DSSE signature (the SHA-256 of its raw bytes, as Sigstore does for a DSSE
// bundle) and carries it in the Sigstore bundle beside the attestation
// (verificationMaterial.timestampVerificationData.rfc3161Timestamps): the attestation existed
// no later than that time, on the TSA's word instead of the operator's.

// ReasonTimestamp: (verify --tsa-chain) the attestation's timestamp is missing or does not
// check.
const ReasonTimestamp Reason = "timestamp"

// MaxTimestampResponse bounds a TSA's answer (a token with its certificate chain is a few KiB).
const MaxTimestampResponse = 64 << 10

// TSA is a timestamp authority: where to ask, and the certificate chain it publishes (its
// signing certificate first, its root last), which its answers must chain to.
type TSA struct {
	URL   string
	Chain []*x509.Certificate
}

// LoadTSAChain reads a TSA's certificate chain (PEM, as a TSA publishes it: its signing
// certificate, any intermediates, its root).
func LoadTSAChain(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %v", path, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate; give the chain the timestamp authority publishes (its signing certificate and its root)", path)
	}
	if !selfSigned(out[len(out)-1]) {
		return nil, fmt.Errorf("%s: the last certificate (%s) is not a self-signed root; the chain must end with the authority's root", path, out[len(out)-1].Subject)
	}
	return out, nil
}

func selfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}

// Timestamp asks the TSA for a timestamp over sig (an envelope's raw signature bytes) and checks
// the answer before it returns it (the DER TimeStampResp of RFC 3161 §2.4.2, as a Sigstore
// bundle's signedTimestamp holds it): granted, the nonce and the imprint sent, signed
// by a certificate of the TSA's chain made for time-stamping, at a time within a minute of now.
func (a *TSA) Timestamp(ctx context.Context, hc *http.Client, sig []byte) ([]byte, error) {
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, err
	}
	req, err := timestamp.CreateRequest(bytes.NewReader(sig), &timestamp.RequestOptions{Hash: crypto.SHA256, Certificates: true, Nonce: nonce})
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(req))
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %q: %w", a.URL, err)
	}
	hr.Header.Set("Content-Type", "application/timestamp-query")
	resp, err := hc.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %s: %w", a.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxTimestampResponse+1))
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %s: reading its answer: %w", a.URL, err)
	}
	if resp.StatusCode/100 != 2 { // sigstore's timestamp-authority answers 201 Created
		return nil, fmt.Errorf("timestamp authority %s answered %s", a.URL, resp.Status)
	}
	if len(body) > MaxTimestampResponse {
		return nil, fmt.Errorf("timestamp authority %s: an answer over %d bytes", a.URL, MaxTimestampResponse)
	}
	ts, err := timestamp.ParseResponse(body)
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %s: its answer: %v", a.URL, err)
	}
	if ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0 {
		return nil, fmt.Errorf("timestamp authority %s answered another request (nonce %v, sent %v): refused", a.URL, ts.Nonce, nonce)
	}
	at, _, err := CheckTimestamp(body, sig, a.Chain)
	if err != nil {
		return nil, fmt.Errorf("timestamp authority %s: %w", a.URL, err)
	}
	if d := time.Since(at); d > time.Minute || d < -time.Minute {
		return nil, fmt.Errorf("timestamp authority %s says it is %s, %s from this host's clock: refused (fix whichever clock is wrong)", a.URL, at.UTC().Format(time.RFC3339), d.Round(time.Second))
	}
	return body, nil
}

// CheckTimestamp verifies a timestamp over sig with a TSA's chain: its signature, the signing
// certificate chained to the chain's root and made for time-stamping, valid at the time it
// states, and the SHA-256 imprint of sig. der is a TSA's whole answer (a TimeStampResp, granted:
// what a Sigstore bundle carries) or the bare TimeStampToken in it (what openssl ts -token_out
// writes). It returns that time and the TSA's name (its signing certificate's subject).
func CheckTimestamp(der, sig []byte, chain []*x509.Certificate) (at time.Time, tsa string, err error) {
	// The ASN.1/BER parsers under it index past the end of some malformed input (a .tsr of
	// the two bytes "0\x82", FuzzCheckHeadTimestamp): a hostile timestamp is a failure to check,
	// never a crash of the reader's verifier.
	defer func() {
		if p := recover(); p != nil {
			at, tsa, err = time.Time{}, "", fmt.Errorf("not a well-formed timestamp (its parser failed on it: %v)", p)
		}
	}()
	return checkTimestamp(der, sig, chain)
}

func checkTimestamp(der, sig []byte, chain []*x509.Certificate) (time.Time, string, error) {
	if len(chain) == 0 {
		return time.Time{}, "", errors.New("no certificate chain to check the timestamp with")
	}
	ts, err := timestamp.ParseResponse(der)
	if err != nil {
		var terr error
		if ts, terr = timestamp.Parse(der); terr != nil {
			return time.Time{}, "", fmt.Errorf("not a timestamp response (%v) nor a timestamp token (%v)", err, terr)
		}
	}
	token := ts.RawToken
	if ts.HashAlgorithm != crypto.SHA256 {
		return time.Time{}, "", fmt.Errorf("the timestamp's imprint is %v, not SHA-256", ts.HashAlgorithm)
	}
	sum := sha256.Sum256(sig)
	if !bytes.Equal(ts.HashedMessage, sum[:]) {
		return time.Time{}, "", errors.New("the timestamp is of another signature")
	}
	p7, err := pkcs7.Parse(token)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("the timestamp's signature: %v", err)
	}
	signer := p7.GetOnlySigner()
	if signer == nil {
		// The token carries no certificate: the chain's first is the signer.
		p7.Certificates = append(p7.Certificates, chain[0])
		if signer = p7.GetOnlySigner(); signer == nil {
			return time.Time{}, "", errors.New("the timestamp has no single signer")
		}
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range chain {
		if selfSigned(c) {
			roots.AddCert(c)
		} else {
			inter.AddCert(c)
		}
	}
	for _, c := range p7.Certificates {
		if !selfSigned(c) {
			inter.AddCert(c)
		}
	}
	if !timeStampingOnly(signer) {
		return time.Time{}, "", fmt.Errorf("the timestamp's certificate %q is not made for time-stamping only (RFC 3161: one critical extended key usage, timeStamping)", signer.Subject.String())
	}
	if _, err := signer.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: ts.Time, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}}); err != nil {
		return time.Time{}, "", fmt.Errorf("the timestamp's certificate %q does not chain to the given authority for time-stamping at %s: %v", signer.Subject.String(), ts.Time.UTC().Format(time.RFC3339), err)
	}
	if err := p7.Verify(); err != nil {
		return time.Time{}, "", fmt.Errorf("the timestamp's signature does not verify: %v", err)
	}
	return ts.Time, signer.Subject.String(), nil
}

// EnvelopeSignature is the raw signature of a DSSE envelope with one signature: what a
// timestamp covers.
func EnvelopeSignature(env []byte) ([]byte, error) {
	var e bundleEnvelope
	if err := strictDecode(env, &e, true); err != nil || len(e.Signatures) != 1 {
		return nil, failf(ReasonEnvelopeSyntax, "not an envelope with one signature (%v)", err)
	}
	sig, err := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "the signature is not base64")
	}
	return sig, nil
}

// timeStampingOnly: the certificate's extended key usage is timeStamping alone, and critical.
func timeStampingOnly(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageTimeStamping || len(c.UnknownExtKeyUsage) > 0 {
		return false
	}
	for _, e := range c.Extensions {
		if e.Id.Equal(oidExtKeyUsage) {
			return e.Critical
		}
	}
	return false
}

var oidExtKeyUsage = asn1.ObjectIdentifier{2, 5, 29, 37}

// CheckBundleTimestamps checks the RFC 3161 timestamps a Sigstore bundle (bundle, as read)
// carries over the signature of env, the attestation's envelope, with chain: the bundle must
// carry env itself, and at least one timestamp must check. It returns the earliest time one
// vouches for, and its authority. A bundle that carries none is an error saying so.
func CheckBundleTimestamps(bundle, env []byte, chain []*x509.Certificate) (time.Time, string, error) {
	if benv, err := EnvelopeOf(bundle); err != nil || !SameEnvelope(benv, env) {
		return time.Time{}, "", &VerificationFailure{Reason: ReasonTimestamp, Detail: "the Sigstore bundle carries another envelope than the attestation"}
	}
	sig, err := EnvelopeSignature(env)
	if err != nil {
		return time.Time{}, "", err
	}
	tokens, err := BundleTimestamps(bundle)
	if err != nil {
		return time.Time{}, "", err
	}
	if len(tokens) == 0 {
		return time.Time{}, "", &VerificationFailure{Reason: ReasonTimestamp, Detail: "the Sigstore bundle carries no RFC 3161 timestamp (the host names no [timestamp] authority, or it failed: sealrun logs RUN says)"}
	}
	var best time.Time
	var tsa string
	var first error
	for i, tok := range tokens {
		at, name, err := CheckTimestamp(tok, sig, chain)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("rfc3161Timestamps[%d]: %w", i, err)
			}
			continue
		}
		if best.IsZero() || at.Before(best) {
			best, tsa = at.UTC(), name
		}
	}
	if best.IsZero() {
		return time.Time{}, "", &VerificationFailure{Reason: ReasonTimestamp, Detail: fmt.Sprintf("no timestamp checks with the given chain: %v", first)}
	}
	return best, tsa, nil
}

// CheckHeadTimestamp checks der, the RFC 3161 timestamp of a ledger's witnessed head (ledger
// export --tsa writes it beside the export, as LEDGER.tsr), with chain against each of the
// ledger's signed heads, the newest first. It returns the time, the authority and which head
// (an index of heads) it is of.
func CheckHeadTimestamp(der []byte, heads []string, chain []*x509.Certificate) (time.Time, string, int, error) {
	var lastErr error = errors.New("the ledger has no signed head")
	for i := len(heads) - 1; i >= 0; i-- {
		at, name, err := CheckTimestamp(der, []byte(heads[i]), chain)
		if err == nil {
			return at, name, i, nil
		}
		lastErr = err
	}
	return time.Time{}, "", -1, fmt.Errorf("the timestamp is of no head of this ledger, or not by the given authority (%v)", lastErr)
}

// EnvelopePayload is the payload of a DSSE envelope (the statement's bytes): what a run's TPM
// quote binds, by its SHA-256. It checks nothing; Verify does.
func EnvelopePayload(env []byte) ([]byte, error) {
	var e bundleEnvelope
	if err := strictDecode(env, &e, true); err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "not an envelope (%v)", err)
	}
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "the payload is not base64")
	}
	return p, nil
}
