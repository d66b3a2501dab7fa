package attest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// pae is the DSSE pre-authentication encoding, written out independently of sigstore's code:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal.
func pae(payloadType string, body []byte) []byte {
	return append([]byte(fmt.Sprintf("DSSEv1 %d %s %d ", len(payloadType), payloadType, len(body))), body...)
}

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
			os.WriteFile(paePath, pae(o.payloadType, body), 0o644)
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
			os.WriteFile(paePath, pae("application/json", body), 0o644)
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
