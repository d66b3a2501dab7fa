package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TimestampAuthority starts sigstore's timestamp-authority (v1.2.9, built once from the Go module
// proxy into BUILD_CACHE/tools) on loopback with its in-memory signer and no NTP monitoring (which
// would reach off this machine), until the test ends. It returns the RFC 3161 endpoint and a file
// holding the certificate chain it publishes.
func TimestampAuthority(t testing.TB) (url, chain string) {
	t.Helper()
	bins := GoTools(t, "timestamp-authority-v1.2.9", map[string]string{"go.mod": "module sealrun.test/tsa\n\ngo 1.26\n"},
		[]string{"github.com/sigstore/timestamp-authority/cmd/timestamp-server@v1.2.9"},
		map[string]string{"timestamp-server": "github.com/sigstore/timestamp-authority/cmd/timestamp-server"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	logf, _ := os.Create(filepath.Join(dir, "timestamp-server.log"))
	cmd := exec.Command(bins["timestamp-server"], "serve", "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"--timestamp-signer", "memory", "--disable-ntp-monitoring", "--log-type", "prod")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("timestamp-server's log:\n%s", b)
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var pem []byte
	for i := 0; i < 300; i++ {
		if resp, err := http.Get(base + "/api/v1/timestamp/certchain"); err == nil {
			pem, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(pem) == 0 {
		t.Fatal("timestamp-server did not serve its certificate chain within 30 s")
	}
	chain = filepath.Join(dir, "tsa-chain.pem")
	if err := os.WriteFile(chain, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return base + "/api/v1/timestamp", chain
}
