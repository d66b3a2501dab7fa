package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	dir := t.TempDir()
	logf, _ := os.Create(filepath.Join(dir, "timestamp-server.log"))
	serve := []string{bins["timestamp-server"], "serve", "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"--timestamp-signer", "memory", "--disable-ntp-monitoring", "--log-type", "prod"}
	// timestamp-server also serves its metrics on :2112, a port no flag changes, so two of them
	// (tests of two packages at once, or two tests of one) collide on one network. As root, each
	// gets a network namespace of its own (its loopback only, gone with it), and the test reaches
	// it through ln, a relay on the host's loopback.
	own := os.Geteuid() == 0
	var cmd *exec.Cmd
	if own {
		cmd = exec.Command("unshare", append([]string{"--net", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh"}, serve...)...)
	} else {
		ln.Close()
		cmd = exec.Command(serve[0], serve[1:]...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if own {
			ln.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("timestamp-server's log:\n%s", b)
		}
	})
	if own {
		go relayInto(ln, fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), fmt.Sprintf("127.0.0.1:%d", port))
	}
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

// relayInto accepts connections on ln until it is closed and joins each to addr in the network
// namespace at nsPath (dialled from a thread moved into it, which then ends with its goroutine).
func relayInto(ln net.Listener, nsPath, addr string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			d, err := dialIn(nsPath, addr)
			if err != nil {
				return
			}
			defer d.Close()
			done := make(chan struct{}, 2)
			for _, p := range [][2]net.Conn{{d, c}, {c, d}} {
				go func() {
					io.Copy(p[0], p[1])
					if tc, ok := p[0].(*net.TCPConn); ok {
						tc.CloseWrite()
					}
					done <- struct{}{}
				}()
			}
			<-done
			<-done
		}()
	}
}

// dialIn dials addr over TCP from inside the network namespace at nsPath.
func dialIn(nsPath, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, in another namespace, ends with this goroutine
		f, err := os.Open(nsPath)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err != nil {
			ch <- result{nil, fmt.Errorf("enter %s: %w", nsPath, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}
