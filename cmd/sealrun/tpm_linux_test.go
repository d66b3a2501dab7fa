package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// sealrun tpm as an operator and a reader meet it, against two swtpm TPMs: enroll writes what to
// publish and overwrites nothing; verify takes the enrollment with the maker's CA, says what it
// shows and what not, and refuses another maker's CA; a challenge made from the enrollment is
// answered by its TPM and not by the other; hostile files get errors that name them.
func TestTPMCommands(t *testing.T) {
	a, b := testenv.Swtpm(t), testenv.Swtpm(t)
	dir := t.TempDir()
	ea, eb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, c := range []struct {
		sw  *testenv.SWTPM
		out string
	}{{a, ea}, {b, eb}} {
		r := sealrun(t, "tpm", "enroll", "--device", c.sw.Socket, "--out", c.out)
		if r.code != 0 || !strings.Contains(r.stdout, `keys.signing = "tpm:`+c.sw.Socket+`"`) {
			t.Fatalf("enroll: %+v", r)
		}
	}
	for _, f := range []string{"enrollment.json", "signing-key.pem", "attestation-key.pem", "ek-0.pem"} {
		if _, err := os.Stat(filepath.Join(ea, f)); err != nil {
			t.Errorf("enroll wrote no %s: %v", f, err)
		}
	}
	if r := sealrun(t, "tpm", "enroll", "--device", a.Socket, "--out", ea); r.code == 0 || !strings.Contains(r.stderr, "overwrites nothing") {
		t.Errorf("enroll over an enrollment: %+v", r)
	}
	enr := filepath.Join(ea, "enrollment.json")
	// The signing key in the TPM signs an attestation (keys.signing = "tpm:DEVICE"), which
	// verifies with the published signing-key.pem, and with B's not.
	pred, _ := goldenPredicate(t)
	os.WriteFile(filepath.Join(dir, "pred.json"), pred, 0o600)
	att := filepath.Join(dir, "att.json")
	if r := sealrun(t, "attest", "sign", "--predicate", filepath.Join(dir, "pred.json"), "--key", "tpm:"+a.Socket, "--out", att,
		"--subject", "bundle.tar.gz=sha256:8694ff758e31db8ecef363d4bfd657ea3a361da85c37d5ba32c7edec188e664d", "--subject", "report.json=sha256:"+sumOf("r")); r.code != 0 {
		t.Fatalf("attest sign --key tpm:: %+v", r)
	}
	if r := sealrun(t, "verify", att, "--key", filepath.Join(ea, "signing-key.pem")); r.code != 0 || !strings.Contains(r.stdout, "VALID") {
		t.Errorf("verify an attestation signed in the TPM: %+v", r)
	}
	if r := sealrun(t, "verify", att, "--key", filepath.Join(eb, "signing-key.pem")); r.code != 1 {
		t.Errorf("verify with another TPM's key: %+v", r)
	}
	if r := sealrun(t, "attest", "sign", "--predicate", filepath.Join(dir, "pred.json"), "--key", "tpm:"+filepath.Join(dir, "none"), "--out", att+"2", "--subject", "report.json=sha256:"+sumOf("r")); r.code == 0 || !strings.Contains(r.stderr, "a host's TPM is /dev/tpmrm0") {
		t.Errorf("a TPM that is not there: %+v", r)
	}
	if r := sealrun(t, "tpm", "verify", enr, "--ek-ca", a.RootCA, "--ek-intermediate", a.Issuer); r.code != 0 || !strings.Contains(r.stdout, "VALID") || !strings.Contains(r.stdout, "chained to the CA given") || !strings.Contains(r.stdout, "Not: that the attestation key is in that TPM") {
		t.Errorf("verify with the maker's CA: %+v", r)
	}
	if r := sealrun(t, "tpm", "verify", enr); r.code != 1 || !strings.Contains(r.stdout, "NOT VALID: its EK certificate cannot be checked without the TPM maker's CA") {
		t.Errorf("verify without a CA: %+v", r)
	}
	if r := sealrun(t, "tpm", "verify", enr, "--allow-unchecked-ek"); r.code != 0 || !strings.Contains(r.stdout, "EK certificate not checked (no --ek-ca") {
		t.Errorf("verify without a CA, accepted unchecked: %+v", r)
	}
	if r := sealrun(t, "tpm", "verify", enr, "--ek-ca", b.RootCA, "--ek-intermediate", b.Issuer); r.code != 1 || !strings.Contains(r.stdout, "NOT VALID: not valid (ek)") {
		t.Errorf("verify with another maker's CA: %+v", r)
	}
	// Hostile enrollments: each an error naming the file.
	for name, text := range map[string]string{"junk.json": "not json", "extra.json": `{"format":"sealrun-tpm-enrollment/v1","extra":1}`, "big.json": strings.Repeat(" ", 70<<10)} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		if r := sealrun(t, "tpm", "verify", p); r.code == 0 || !strings.Contains(r.stderr+r.stdout, name) {
			t.Errorf("verify %s: %+v", name, r)
		}
	}
	// verify's and verify-publication's TPM flags: each misuse a usage error naming the flag.
	for _, verb := range [][]string{{"verify", "result.att.json", "--key", "k.pem"}, {"verify-publication", dir, "--key", "k.pem"}} {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--ek-ca", a.RootCA}, "--ek-ca, --ek-intermediate and --allow-unchecked-ek go with --tpm ENROLLMENT"},
			{[]string{"--allow-unchecked-ek"}, "go with --tpm ENROLLMENT"},
			{[]string{"--tpm", enr}, "the TPM maker's CA"},
			{[]string{"--tpm", enr, "--ek-intermediate", a.Issuer}, "the TPM maker's CA"},
			{[]string{"--tpm", filepath.Join(dir, "junk.json"), "--ek-ca", a.RootCA}, "junk.json is not a TPM enrollment"},
			{[]string{"--tpm", enr, "--ek-ca", filepath.Join(dir, "junk.json")}, "junk.json holds no PEM certificate"},
		} {
			if r := sealrun(t, append(append([]string{}, verb...), c.args...)...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s %v: %+v; want exit 2 and %q", verb[0], c.args, r, c.want)
			}
		}
	}
	// The challenge: A answers it, B cannot.
	ch, secret := filepath.Join(dir, "challenge.json"), filepath.Join(dir, "secret")
	if r := sealrun(t, "tpm", "challenge", enr, "--out", ch, "--secret", secret); r.code != 0 {
		t.Fatalf("challenge: %+v", r)
	}
	if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the secret's file: %v %v", fi.Mode(), err)
	}
	r := sealrun(t, "tpm", "answer", ch, "--device", a.Socket)
	if r.code != 0 {
		t.Fatalf("answer: %+v", r)
	}
	if r := sealrun(t, "tpm", "challenge", "--secret", secret, "--answer", strings.TrimSpace(r.stdout)); r.code != 0 || !strings.Contains(r.stdout, "answer: VALID") {
		t.Errorf("the right TPM's answer: %+v", r)
	}
	if r := sealrun(t, "tpm", "answer", ch, "--device", b.Socket); r.code == 0 {
		if r := sealrun(t, "tpm", "challenge", "--secret", secret, "--answer", strings.TrimSpace(r.stdout)); r.code != 1 {
			t.Errorf("another TPM's answer taken: %+v", r)
		}
	}
	if r := sealrun(t, "tpm", "challenge", "--secret", secret, "--answer", strings.Repeat("00", 32)); r.code != 1 || !strings.Contains(r.stdout, "answer: NOT VALID") {
		t.Errorf("a wrong answer: %+v", r)
	}
	if r := sealrun(t, "tpm", "challenge", "--secret", secret, "--answer", "zz"); r.code != 2 || !strings.Contains(r.stderr, "--answer: not hex") {
		t.Errorf("an answer that is no hex: %+v", r)
	}
	if r := sealrun(t, "tpm", "answer", enr, "--device", a.Socket); r.code == 0 || !strings.Contains(r.stderr, "is not a challenge") {
		t.Errorf("answer of a file that is no challenge: %+v", r)
	}
}
