package attest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testSums = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  runs/r-1/result.att.json\n" +
	"60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752  leaderboard.json\n"

// TestManifest: a publication's list signed and verified; what a verifier must refuse: another
// key's signature, an attestation's envelope given as a manifest, a payload edited under the
// signature, two signatures, an envelope over the bound.
func TestManifest(t *testing.T) {
	ctx := context.Background()
	env, err := SignManifest(ctx, []byte(testSums), signer(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	sums, id, err := VerifyManifest(env, verifier(t, "ed25519"))
	if err != nil || string(sums) != testSums || id == "" {
		t.Fatalf("VerifyManifest: %q %q %v", sums, id, err)
	}
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     []byte `json:"payload"`
		Signatures  []json.RawMessage
	}
	if err := json.Unmarshal(env, &e); err != nil || e.PayloadType != ManifestPayloadType || string(e.Payload) != testSums || len(e.Signatures) != 1 {
		t.Fatalf("the envelope as a third party reads it: %+v %v", e, err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(env, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		env  []byte
		key  string
		want string
	}{
		"another key":             {env, "ecdsa", "signature"},
		"an attestation envelope": {golden, "ed25519", "payloadType"},
		"the payload edited": {edit(func(m map[string]any) {
			m["payload"] = []byte(strings.Replace(testSums, "r-1", "r-2", 1))
		}), "ed25519", "signature"},
		"two signatures": {edit(func(m map[string]any) {
			s := m["signatures"].([]any)
			m["signatures"] = append(s, s[0])
		}), "ed25519", "signature"},
		"over the bound": {append(bytes.Repeat([]byte(" "), MaxManifestBytes+1), env...), "ed25519", "bytes"},
		"not JSON":       {[]byte("SHA256SUMS"), "ed25519", ""},
	} {
		_, _, err := VerifyManifest(c.env, verifier(t, c.key))
		var vf *VerificationFailure
		if err == nil || !errors.As(err, &vf) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a VerificationFailure naming %q", name, err, c.want)
		}
	}
}

// FuzzVerifyManifest: a manifest's envelope as a mirror may rewrite it: never a panic, and what
// verifies is always the list that was signed.
func FuzzVerifyManifest(f *testing.F) {
	env, err := SignManifest(context.Background(), []byte(testSums), signer(f, "ed25519"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env)
	f.Add(bytes.Replace(env, []byte(ManifestPayloadType), []byte(PayloadType), 1))
	f.Add([]byte(`{"payloadType":"` + ManifestPayloadType + `","payload":"","signatures":[]}`))
	f.Add([]byte(`{"payload":null}`))
	v := verifier(f, "ed25519")
	f.Fuzz(func(t *testing.T, b []byte) {
		sums, _, err := VerifyManifest(b, v)
		if err == nil && string(sums) != testSums {
			t.Fatalf("a manifest verified with a list that was never signed: %q", sums)
		}
	})
}

// FuzzCheckHeadTimestamp: a ledger's .tsr as anyone may write it: never a panic, and what checks
// is a timestamp of the one head the authority was asked about.
func FuzzCheckHeadTimestamp(f *testing.F) {
	tsa := newTestTSA(f, true, time.Now().Add(24*time.Hour))
	srv := httptest.NewServer(tsa)
	defer srv.Close()
	heads := []string{"origin\n3\nhash-of-three\n", "origin\n7\nhash-of-seven\n"}
	a := &TSA{URL: srv.URL, Chain: []*x509.Certificate{tsa.leaf, tsa.root}}
	tok, err := a.Timestamp(context.Background(), srv.Client(), []byte(heads[1]))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:len(tok)/2])
	f.Add([]byte{0x30, 0x82, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _, i, err := CheckHeadTimestamp(der, heads, a.Chain)
		if err == nil && i != 1 {
			t.Fatalf("a timestamp checked as of head %d, which was never timestamped", i)
		}
	})
}
