package images

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry is how to reach container registries: which certificate authorities to trust beyond
// the system's, whose credentials to present, and where to report progress.
type Registry struct {
	// CAFile is a PEM bundle of certificate authorities trusted for registries' TLS, besides the
	// system's (a registry with a private CA).
	CAFile string
	// AuthFile is a docker config.json (`docker login`'s, or `podman login --authfile`'s) whose
	// auths and credential helpers (credHelpers, credsStore: docker-credential-<name> on PATH)
	// give the credentials. "" reads them as crane and skopeo do: $DOCKER_CONFIG/config.json or
	// ~/.docker/config.json, then podman's auth.json ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR).
	AuthFile string
	// Progress receives a line about a pull or push at least every few seconds (nil: none).
	Progress io.Writer
}

// keychain is where credentials come from.
func (o Registry) keychain() authn.Keychain {
	if o.AuthFile != "" {
		return fileKeychain{o.AuthFile}
	}
	return authn.DefaultKeychain
}

// transport trusts the system's CAs and CAFile's.
func (o Registry) transport() (*http.Transport, error) {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, fmt.Errorf("the registry CA bundle %s: %w", o.CAFile, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the registry CA bundle %s holds no PEM certificate", o.CAFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// remoteOptions are ggcr's options for o.
func (o Registry) remoteOptions(ctx context.Context) ([]remote.Option, error) {
	t, err := o.transport()
	if err != nil {
		return nil, err
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.keychain()), remote.WithTransport(t)}, nil
}

// client is an HTTP client for repo's blobs, authenticated (basic or bearer, as the registry asks).
func (o Registry) client(ctx context.Context, repo name.Repository, scopes ...string) (*http.Client, error) {
	t, err := o.transport()
	if err != nil {
		return nil, err
	}
	auth, err := authn.Resolve(ctx, o.keychain(), repo)
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", repo.RegistryStr(), err)
	}
	rt, err := transport.NewWithContext(ctx, repo.Registry, auth, t, scopes)
	if err != nil {
		return nil, explainRegistry(repo.RegistryStr(), o, err)
	}
	return &http.Client{Transport: rt}, nil
}

// explainRegistry turns a registry error into one that names the registry and the fix.
func explainRegistry(reg string, o Registry, err error) error {
	var ue x509.UnknownAuthorityError
	var te *transport.Error
	msg := err.Error()
	switch {
	case errors.As(err, &ue) || strings.Contains(msg, "certificate signed by unknown authority"):
		fix := "give its CA with --ca-file"
		if o.CAFile != "" {
			fix = "the CA in " + o.CAFile + " did not sign it: give the right CA bundle"
		}
		return fmt.Errorf("registry %s: its TLS certificate is signed by an authority this host does not trust; %s: %w", reg, fix, err)
	case errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized || strings.Contains(msg, "UNAUTHORIZED") || strings.Contains(msg, "401 Unauthorized"):
		where := "docker login " + reg + " (or --authfile)"
		if o.AuthFile != "" {
			where = o.AuthFile
		}
		return fmt.Errorf("registry %s refused the credentials (wrong user or password, or none): check %s: %w", reg, where, err)
	case errors.As(err, &te) && te.StatusCode == http.StatusNotFound:
		return fmt.Errorf("registry %s has no such image or blob: %w", reg, err)
	}
	return fmt.Errorf("registry %s: %w", reg, err)
}

// fileKeychain reads credentials from one docker config.json, its credential helpers included.
type fileKeychain struct{ path string }

func (k fileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	f, err := os.Open(k.path)
	if err != nil {
		return nil, fmt.Errorf("the registry auth file %s: %w", k.path, err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("the registry auth file %s: %w", k.path, err)
	}
	key := r.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	c, err := cf.GetAuthConfig(key)
	if err != nil {
		return nil, fmt.Errorf("the registry auth file %s, credentials for %s: %w", k.path, key, err)
	}
	if c.Username == "" && c.Password == "" && c.Auth == "" && c.IdentityToken == "" && c.RegistryToken == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: c.Username, Password: c.Password, Auth: c.Auth, IdentityToken: c.IdentityToken, RegistryToken: c.RegistryToken}), nil
}

// progress prints a line at most every interval, and one at the end.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	last  time.Time
	every time.Duration
}

func newProgress(w io.Writer) *progress { return &progress{w: w, every: 2 * time.Second} }

func (p *progress) printf(force bool, format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !force && time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// human writes a byte count as people read it.
func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Progress prints status() to w every interval until the returned stop is called: what a step of
// more than a few seconds (a debootstrap, packing a layer) is doing and how far it is.
func Progress(w io.Writer, interval time.Duration, status func() string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(w, status())
			}
		}
	}()
	return func() { close(done); <-finished }
}

// counter counts the bytes written through it.
type counter struct {
	w io.Writer
	n atomic.Int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}
