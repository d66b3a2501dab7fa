package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// SWTPM is a software TPM 2.0 (Debian's swtpm) a test started: manufactured by swtpm_setup with
// EK certificates from a certificate authority of the test's own (swtpm_localca's, in the
// test's directory, never the machine's), and served on a Unix socket.
type SWTPM struct {
	Socket string // the TPM's command socket (raw TPM 2.0 commands)
	RootCA string // the PEM file of the EK certificates' root CA
	Issuer string // the PEM file of the CA that issued them (signed by the root)
}

// Swtpm manufactures a TPM in a new directory and serves it until the test ends. Each call is
// another TPM: another EK, another CA.
func Swtpm(t testing.TB) *SWTPM {
	t.Helper()
	setup := RequireTool(t, "swtpm_setup", "swtpm-tools")
	swtpm := RequireTool(t, "swtpm", "swtpm")
	RequireTool(t, "swtpm_localca", "swtpm-tools")
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	for _, d := range []string{ca, filepath.Join(dir, "state")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"localca.conf":    fmt.Sprintf("statedir = %s\nsigningkey = %s/signkey.pem\nissuercert = %s/issuercert.pem\ncertserial = %s/certserial\n", ca, ca, ca, ca),
		"localca.options": "--platform-manufacturer sealrun-test\n--platform-version 1\n--platform-model swtpm\n",
		"setup.conf":      fmt.Sprintf("create_certs_tool = swtpm_localca\ncreate_certs_tool_config = %s/localca.conf\ncreate_certs_tool_options = %s/localca.options\nactive_pcr_banks = sha256\n", dir, dir),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(setup, "--tpm2", "--tpmstate", filepath.Join(dir, "state"), "--create-ek-cert", "--lock-nvram", "--config", filepath.Join(dir, "setup.conf")).CombinedOutput(); err != nil {
		t.Fatalf("swtpm_setup: %v\n%s", err, out)
	}
	s := &SWTPM{Socket: filepath.Join(dir, "tpm.sock"), RootCA: filepath.Join(ca, "swtpm-localca-rootca-cert.pem"), Issuer: filepath.Join(ca, "issuercert.pem")}
	cmd := exec.Command(swtpm, "socket", "--tpm2", "--tpmstate", "dir="+filepath.Join(dir, "state"),
		"--server", "type=unixio,path="+s.Socket, "--ctrl", "type=unixio,path="+filepath.Join(dir, "ctrl.sock"), "--flags", "startup-clear")
	log, err := os.Create(filepath.Join(dir, "swtpm.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("swtpm: %v", err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	// Served once its socket is there (it makes it before it takes commands).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(s.Socket); err == nil {
			return s
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(dir, "swtpm.log"))
			t.Fatalf("swtpm exited before it served (%v):\n%s", waitErr, b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("swtpm made no socket %s in 30 s", s.Socket)
		}
	}
}
