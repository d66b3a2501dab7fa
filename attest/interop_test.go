package attest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// A second implementation checks sealrun's signatures: openssl's command line on the PAE bytes,
// exactly as attest/VERIFY.md tells a third party to do it.
func TestOpenSSLVerifiesSignatures(t *testing.T) {
	openssl := testenv.RequireTool(t, "openssl", "openssl")
	for _, key := range []string{"ed25519", "ecdsa"} {
		t.Run(key, func(t *testing.T) {
			st, _ := fixture(t, 5, 10)
			env := sign(t, st, key)
			o := openEnvelope(t, env)
			body, sig := o.payload, o.sig
			dir := t.TempDir()
			paePath, sigPath := filepath.Join(dir, "pae.bin"), filepath.Join(dir, "sig.bin")
			os.WriteFile(paePath, PAE(o.payloadType, body), 0o644)
			os.WriteFile(sigPath, sig, 0o644)
			pub := filepath.Join("testdata", key+".pub")
			var args []string
			if key == "ed25519" {
				args = []string{"pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", paePath, "-sigfile", sigPath}
			} else {
				args = []string{"dgst", "-sha256", "-verify", pub, "-signature", sigPath, paePath}
			}
			out, err := exec.Command(openssl, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("openssl rejects sealrun's signature: %v\n%s", err, out)
			}
			// And rejects a tampered PAE.
			os.WriteFile(paePath, PAE("application/json", body), 0o644)
			if out, err := exec.Command(openssl, args...).CombinedOutput(); err == nil {
				t.Fatalf("openssl accepted a PAE with another payload type:\n%s", out)
			}
		})
	}
}

// The shell recipe for the audit chain in VERIFY.md computes the same head as AuditHead.
func TestVerifyDocAuditRecipe(t *testing.T) {
	doc, err := os.ReadFile("VERIFY.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "h=$(printf '0%.0s' $(seq 64))")
	end := strings.Index(text[start:], "echo \"$h $n\"")
	if start < 0 || end < 0 {
		t.Fatal("VERIFY.md no longer has the audit recipe this test runs")
	}
	recipe := text[start : start+end+len(`echo "$h $n"`)]
	dir := t.TempDir()
	log := auditLog(7) + `{"note":"tab\there, backslash \\ and spaces  "}` + "\n"
	os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte(log), 0o644)
	cmd := exec.Command("bash", "-c", recipe)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("recipe: %v", err)
	}
	head, n, err := AuditHead(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%s %d", head, n); got != want {
		t.Errorf("recipe prints %q, AuditHead %q", got, want)
	}
}

// Other DSSE tools fill in keyid (the key's own id, a fingerprint, a KMS name, any hint); the
// verdict is the signature's alone, and sealrun's own envelopes keep keyid empty.
func TestVerifyIgnoresKeyID(t *testing.T) {
	st, _ := fixture(t, 2, 3)
	env := sign(t, st, "ed25519")
	var m map[string]any
	if err := json.Unmarshal(env, &m); err != nil {
		t.Fatal(err)
	}
	sig := m["signatures"].([]any)[0].(map[string]any)
	if k, _ := sig["keyid"].(string); k != "" {
		t.Errorf("sealrun wrote keyid %q; it leaves it empty", k)
	}
	pub, _ := verifier(t, "ed25519").PublicKey()
	own, _ := KeyID(pub)
	for _, hint := range []string{own, "SHA256:abcdef", "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k", "0123456789abcdef0123456789abcdef01234567"} {
		sig["keyid"] = hint
		b, _ := json.Marshal(m)
		if _, err := Verify(b, verifier(t, "ed25519")); err != nil {
			t.Errorf("keyid %q: %v", hint, err)
		}
	}
	// A keyid does not rescue a signature made by another key.
	sig["keyid"] = own
	other := sign(t, st, "ecdsa")
	var mo map[string]any
	json.Unmarshal(other, &mo)
	sig["sig"] = mo["signatures"].([]any)[0].(map[string]any)["sig"]
	b, _ := json.Marshal(m)
	var vf *VerificationFailure
	if _, err := Verify(b, verifier(t, "ed25519")); !errors.As(err, &vf) || vf.Reason != ReasonSignature {
		t.Errorf("foreign signature with our keyid: %v", err)
	}
}

// The Sigstore bundle beside each envelope: v0.3, a public-key hint, no log entry, the very
// envelope inside; verify takes it as well as the envelope.
func TestSigstoreBundle(t *testing.T) {
	st, _ := fixture(t, 2, 3)
	env := sign(t, st, "ecdsa")
	pub, _ := verifier(t, "ecdsa").PublicKey()
	hint, _ := KeyID(pub)
	b, err := SigstoreBundle(env, hint)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		MediaType            string `json:"mediaType"`
		VerificationMaterial struct {
			PublicKey                 struct{ Hint string } `json:"publicKey"`
			TlogEntries               []any                 `json:"tlogEntries"`
			TimestampVerificationData map[string]any        `json:"timestampVerificationData"`
		} `json:"verificationMaterial"`
		DSSEEnvelope struct {
			Payload, PayloadType string
			Signatures           []struct{ Sig, Keyid string }
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	o := openEnvelope(t, env)
	if got.MediaType != BundleMediaType || got.VerificationMaterial.PublicKey.Hint != hint || got.VerificationMaterial.TlogEntries == nil ||
		len(got.VerificationMaterial.TlogEntries) != 0 || got.DSSEEnvelope.PayloadType != PayloadType || len(got.DSSEEnvelope.Signatures) != 1 {
		t.Errorf("bundle: %s", b)
	}
	if p, _ := base64.StdEncoding.DecodeString(got.DSSEEnvelope.Payload); !bytes.Equal(p, o.payload) {
		t.Error("the bundle's payload is not the envelope's")
	}
	inner, err := EnvelopeOf(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(inner, verifier(t, "ecdsa")); err != nil {
		t.Errorf("verify through the bundle: %v", err)
	}
	if same, err := EnvelopeOf(env); err != nil || !bytes.Equal(same, env) {
		t.Errorf("an envelope is not passed through: %v", err)
	}
	for name, bad := range map[string]string{
		"other media type":  `{"mediaType":"application/json","dsseEnvelope":{}}`,
		"message signature": `{"mediaType":"` + BundleMediaType + `","verificationMaterial":{},"messageSignature":{}}`,
		"no envelope":       `{"mediaType":"` + BundleMediaType + `","verificationMaterial":{}}`,
	} {
		var vf *VerificationFailure
		if _, err := EnvelopeOf([]byte(bad)); !errors.As(err, &vf) {
			t.Errorf("%s: %v; want a verdict", name, err)
		}
	}
	if got := BundlePath("/runs/x/result.att.json"); got != "/runs/x/result.sigstore.json" {
		t.Errorf("BundlePath = %s", got)
	}
}
