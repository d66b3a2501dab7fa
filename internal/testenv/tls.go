package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// MakeCerts writes a CA and a server certificate for 127.0.0.1, ::1 and localhost signed by it
// (PEM; the key's file mode 0600), for a test's TLS servers.
func MakeCerts(caFile, crtFile, keyFile string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sealrun test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, srv, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{caFile, "CERTIFICATE", caDER}, {crtFile, "CERTIFICATE", der}, {keyFile, "EC PRIVATE KEY", kb}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Nginx runs Debian's nginx until the test ends, with servers (the http block's upstream and
// server blocks, as an operator writes them in sites-enabled) in a directory of the test's, and
// waits until it accepts on each of addrs (host:port). It returns nginx's error log.
func Nginx(t testing.TB, servers string, addrs ...string) (errorLog string) {
	t.Helper()
	bin := RequireTool(t, "nginx", "nginx")
	dir := t.TempDir()
	for _, d := range []string{"tmp", "logs"} {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	errorLog = filepath.Join(dir, "logs", "error.log")
	user := ""
	if os.Getuid() == 0 {
		user = "user root;\n" // its workers read and write the test's directories, which are root's
	}
	conf := fmt.Sprintf(`%sworker_processes 1;
pid %[2]s/nginx.pid;
error_log %[3]s warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path %[2]s/tmp/body;
    proxy_temp_path %[2]s/tmp/proxy;
    fastcgi_temp_path %[2]s/tmp/fastcgi;
    uwsgi_temp_path %[2]s/tmp/uwsgi;
    scgi_temp_path %[2]s/tmp/scgi;
    include %[2]s/sites.conf;
}
`, user, dir, errorLog)
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600)
	os.WriteFile(filepath.Join(dir, "sites.conf"), []byte(servers), 0o600)
	if out, err := exec.Command(bin, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t refuses the configuration: %v\n%s\n--- sites.conf:\n%s", err, out, servers)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	out, _ := os.Create(filepath.Join(dir, "logs", "stderr"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown of the master and its workers
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(errorLog)
			t.Logf("nginx's error log (last lines):\n%s", tailString(string(b), 3000))
		}
	})
	for _, a := range addrs {
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				b, _ := os.ReadFile(errorLog)
				t.Fatalf("nginx exited before serving %s: %s", a, tailString(string(b), 3000))
			default:
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("nginx does not accept on %s after 15 s", a)
			}
		}
	}
	return errorLog
}

// FreePort is a loopback TCP port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
