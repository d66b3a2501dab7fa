package attest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/digitorus/timestamp"
)

// testTSA is an RFC 3161 authority of this test's own (digitorus/timestamp's responder, a CA
// made here): the refusals below need one that misbehaves on purpose. (An authority someone else
// wrote, sigstore's timestamp-authority, is the daemon's test's.)
type testTSA struct {
	root, leaf *x509.Certificate
	key        *ecdsa.PrivateKey
	// misbehaviours
	nonce  *big.Int      // answer with this nonce instead
	skew   time.Duration // answer with a time this far off
	status bool          // answer "rejection"
	huge   bool          // answer more than MaxTimestampResponse bytes
}

func newTestTSA(t testing.TB, eku bool, notAfter time.Time) *testTSA {
	t.Helper()
	rk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rt := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test TSA root"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	rder, _ := x509.CreateCertificate(rand.Reader, rt, rt, &rk.PublicKey, rk)
	root, _ := x509.ParseCertificate(rder)
	lk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	lt := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test TSA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature}
	if eku {
		lt.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping}
		// RFC 3161: the extended key usage is critical.
		v, _ := asn1.Marshal([]asn1.ObjectIdentifier{{1, 3, 6, 1, 5, 5, 7, 3, 8}})
		lt.ExtraExtensions = []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Critical: true, Value: v}}
		lt.ExtKeyUsage = nil
	}
	lder, _ := x509.CreateCertificate(rand.Reader, lt, root, &lk.PublicKey, rk)
	leaf, _ := x509.ParseCertificate(lder)
	return &testTSA{root: root, leaf: leaf, key: lk}
}

func (a *testTSA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req, err := timestamp.ParseRequest(body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if a.status {
		resp, _ := timestamp.CreateErrorResponse(timestamp.Rejection, timestamp.BadAlgorithm)
		w.Write(resp)
		return
	}
	if a.huge {
		w.Write(bytes.Repeat([]byte{0}, MaxTimestampResponse+10))
		return
	}
	nonce := req.Nonce
	if a.nonce != nil {
		nonce = a.nonce
	}
	ts := timestamp.Timestamp{HashAlgorithm: req.HashAlgorithm, HashedMessage: req.HashedMessage, Time: time.Now().Add(a.skew).UTC().Truncate(time.Second),
		Nonce: nonce, Policy: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 2}, SerialNumber: big.NewInt(time.Now().UnixNano()), AddTSACertificate: true}
	resp, err := ts.CreateResponseWithOpts(a.leaf, a.key, crypto.SHA256)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Content-Type", "application/timestamp-reply")
	w.Write(resp)
}

func TestTimestamp(t *testing.T) {
	sig := []byte("the raw bytes of an envelope's signature")
	good := newTestTSA(t, true, time.Now().Add(24*time.Hour))
	srv := httptest.NewServer(good)
	defer srv.Close()
	a := &TSA{URL: srv.URL, Chain: []*x509.Certificate{good.leaf, good.root}}
	token, err := a.Timestamp(t.Context(), srv.Client(), sig)
	if err != nil {
		t.Fatal(err)
	}
	at, name, err := CheckTimestamp(token, sig, a.Chain)
	if err != nil || name != "CN=test TSA" || time.Since(at) > time.Minute {
		t.Fatalf("check: %v %q %v", at, name, err)
	}
	if _, _, err := CheckTimestamp(token, sig, []*x509.Certificate{good.root}); err != nil {
		t.Errorf("with the root alone (the token carries its certificate): %v", err)
	}
	// What Timestamp returns is the whole answer (a TimeStampResp, as Sigstore bundles hold
	// it); the bare token inside it (what openssl ts -token_out writes) checks too.
	resp, err := timestamp.ParseResponse(token)
	if err != nil {
		t.Fatalf("Timestamp returned no TimeStampResp: %v", err)
	}
	if _, _, err := CheckTimestamp(resp.RawToken, sig, a.Chain); err != nil {
		t.Errorf("the bare token: %v", err)
	}
	if _, _, err := CheckTimestamp(token, []byte("another signature"), a.Chain); err == nil || !strings.Contains(err.Error(), "another signature") {
		t.Errorf("a timestamp of another signature: %v", err)
	}
	other := newTestTSA(t, true, time.Now().Add(time.Hour))
	if _, _, err := CheckTimestamp(token, sig, []*x509.Certificate{other.root}); err == nil || !strings.Contains(err.Error(), "does not chain") {
		t.Errorf("another authority's root: %v", err)
	}
	if _, _, err := CheckTimestamp([]byte("garbage"), sig, a.Chain); err == nil {
		t.Error("garbage checked")
	}
	tampered := bytes.Clone(token)
	tampered[len(tampered)-5] ^= 1
	if _, _, err := CheckTimestamp(tampered, sig, a.Chain); err == nil {
		t.Error("a token with a flipped signature byte checked")
	}
	// Bundles carry the token; an empty list stays {} (bundles written before are unchanged).
	env := mustEnvelope(t)
	b, err := SigstoreBundle(env, "hint", token)
	if err != nil {
		t.Fatal(err)
	}
	got, err := BundleTimestamps(b)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], token) {
		t.Errorf("bundle timestamps: %d %v", len(got), err)
	}
	plain, _ := SigstoreBundle(env, "hint")
	if !bytes.Contains(plain, []byte(`"timestampVerificationData": {}`)) {
		t.Errorf("a bundle without timestamps changed:\n%s", plain)
	}

	for name, c := range map[string]struct {
		tsa  *testTSA
		want string
	}{
		"no time-stamping usage": {newTestTSA(t, false, time.Now().Add(time.Hour)), "for time-stamping"},
		"an expired certificate": {newTestTSA(t, true, time.Now().Add(-time.Minute)), "certificate validity"},
		"another nonce": {func() *testTSA {
			x := newTestTSA(t, true, time.Now().Add(time.Hour))
			x.nonce = big.NewInt(7)
			return x
		}(), "another request"},
		"a clock an hour off": {func() *testTSA { x := newTestTSA(t, true, time.Now().Add(3*time.Hour)); x.skew = -time.Hour; return x }(), "from this host's clock"},
		"a rejection":         {func() *testTSA { x := newTestTSA(t, true, time.Now().Add(time.Hour)); x.status = true; return x }(), "rejected"},
		"an oversized answer": {func() *testTSA { x := newTestTSA(t, true, time.Now().Add(time.Hour)); x.huge = true; return x }(), "over 65536 bytes"},
	} {
		ts := httptest.NewServer(c.tsa)
		a := &TSA{URL: ts.URL, Chain: []*x509.Certificate{c.tsa.leaf, c.tsa.root}}
		_, err := a.Timestamp(t.Context(), ts.Client(), sig)
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, c.want)
		}
	}
	down := httptest.NewServer(good)
	down.Close()
	if _, err := (&TSA{URL: down.URL, Chain: a.Chain}).Timestamp(t.Context(), http.DefaultClient, sig); err == nil || !strings.Contains(err.Error(), down.URL) {
		t.Errorf("an authority that is down: %v", err)
	}
}

func mustEnvelope(t *testing.T) []byte {
	t.Helper()
	st, _ := fixture(t, 2, 3)
	env, err := Sign(t.Context(), st, signer(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	return env
}
