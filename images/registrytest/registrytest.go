// Package registrytest starts a real container registry for tests: Debian's docker-registry (the
// CNCF distribution registry) on loopback, with TLS from a certificate authority the test makes and
// htpasswd authentication, its storage in the test's directory. Nothing here is a fake.
package registrytest

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
)

// Registry is a running registry.
type Registry struct {
	Addr     string // 127.0.0.1:PORT
	CAFile   string // PEM of the CA that signed its certificate
	User     string
	Password string
	Storage  string // its filesystem storage root
	// AuthFile is a docker config.json holding User and Password for Addr, as `docker login`
	// (or `podman login --authfile`) writes it.
	AuthFile string

	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a registry; it is stopped at the test's cleanup.
func Start(t testing.TB) *Registry {
	t.Helper()
	bin := testenv.RequireTool(t, "docker-registry", "docker-registry")
	htpasswd := testenv.RequireTool(t, "htpasswd", "apache2-utils")
	dir := t.TempDir()
	r := &Registry{t: t, dir: dir, User: "sealrun-test", Password: "pw-" + randHex(8), Storage: filepath.Join(dir, "storage")}
	os.MkdirAll(r.Storage, 0o700)
	r.CAFile = filepath.Join(dir, "ca.pem")
	crt, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := testenv.MakeCerts(r.CAFile, crt, key); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(htpasswd, "-Bbc", filepath.Join(dir, "htpasswd"), r.User, r.Password).CombinedOutput(); err != nil {
		t.Fatalf("htpasswd: %v %s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: sealrun-test
    path: %s
`, r.Storage, r.Addr, crt, key, filepath.Join(dir, "htpasswd"))
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	r.AuthFile = filepath.Join(dir, "auth", "config.json")
	os.MkdirAll(filepath.Dir(r.AuthFile), 0o700)
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Addr: map[string]string{"auth": auth}}})
	os.WriteFile(r.AuthFile, b, 0o600)
	r.start(bin)
	t.Cleanup(r.Stop)
	return r
}

func (r *Registry) start(bin string) {
	r.t.Helper()
	r.cmd = exec.Command(bin, "serve", filepath.Join(r.dir, "config.yml"))
	r.cmd.Env = append(os.Environ(), "SEALRUN_TEST_REGISTRY="+r.dir) // testenv.KillByEnv finds it after a killed test
	logf, _ := os.OpenFile(filepath.Join(r.dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start docker-registry: %v", err)
	}
	r.done = make(chan struct{})
	go func() { r.cmd.Wait(); logf.Close(); close(r.done) }()
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(r.CAFile)
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := c.Get("https://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return
			}
		}
		select {
		case <-r.done:
			log, _ := os.ReadFile(filepath.Join(r.dir, "registry.log"))
			r.t.Fatalf("docker-registry exited: %s", log)
		default:
		}
	}
	r.t.Fatalf("docker-registry did not answer on %s in 20s", r.Addr)
}

// Stop kills the registry (as a crash would) and waits for it.
func (r *Registry) Stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		<-r.done
	}
}

// Restart starts it again on the same address and storage.
func (r *Registry) Restart() {
	r.t.Helper()
	r.Stop()
	r.start(r.cmd.Path)
}

// Ref names repo (with an optional :tag or @digest) on this registry.
func (r *Registry) Ref(repo string) string { return r.Addr + "/" + repo }

// BlobPath is where the registry keeps a blob's bytes (to tamper with them).
func (r *Registry) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.Storage, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// buildah runs buildah (Debian's package, as an operator would) with its storage in a directory of
// the test's, and returns how to run it again with the same storage.
func buildah(t testing.TB) func(args ...string) {
	t.Helper()
	bin := testenv.RequireTool(t, "buildah", "buildah")
	work := t.TempDir()
	storage := []string{"--root", filepath.Join(work, "root"), "--runroot", filepath.Join(work, "runroot"), "--storage-driver", "vfs"}
	t.Cleanup(func() { exec.Command(bin, append(storage, "rm", "--all")...).Run() })
	return func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append(storage, args...)...)
		cmd.Env = append(os.Environ(), "BUILDAH_ISOLATION=chroot", "TMPDIR="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

const localTag = "localhost/sealrun-test-build:latest"

// BuildOCI builds an image with buildah from the Containerfile in dir, its build context (with
// --build-arg for each of args, KEY=VALUE), and writes it to a new OCI image layout, which it
// returns: what `sealrun images import` takes.
func BuildOCI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	run := buildah(t)
	bud := []string{"bud", "--layers=false", "-f", filepath.Join(dir, "Containerfile"), "-t", localTag}
	for _, a := range args {
		bud = append(bud, "--build-arg", a)
	}
	run(append(bud, dir)...)
	out := filepath.Join(t.TempDir(), "oci")
	run("push", localTag, "oci:"+out)
	return out
}

// Build builds an image with buildah from the Containerfile in dir, its build context, and
// pushes it to repo:tag on the registry; it returns the pushed image as repo@sha256:<hex>, the
// digest buildah reports.
func (r *Registry) Build(t testing.TB, dir, repoTag string) string {
	t.Helper()
	run := buildah(t)
	run("bud", "--layers=false", "-f", filepath.Join(dir, "Containerfile"), "-t", localTag, dir)
	work := t.TempDir()
	certs := filepath.Join(work, "certs")
	os.MkdirAll(certs, 0o700)
	ca, _ := os.ReadFile(r.CAFile)
	os.WriteFile(filepath.Join(certs, "ca.crt"), ca, 0o600)
	digestFile := filepath.Join(work, "digest")
	run("push", "--cert-dir", certs, "--creds", r.User+":"+r.Password, "--digestfile", digestFile, localTag, "docker://"+r.Ref(repoTag))
	d, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	repo := repoTag
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	return r.Ref(repo) + "@" + strings.TrimSpace(string(d))
}
