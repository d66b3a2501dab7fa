package builder

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/scaffolds"
)

// A scaffold's controller image (scaffolds/NAME): a Debian base (debootstrap minbase with the
// scaffold's packages, cached and shared by every scaffold with the same list, holding no
// Python), the files its recipe takes from npm tarballs — each pinned by version and by the
// SHA-256 of the registry's tarball; a tarball with another hash refuses the build — and its
// entrypoint script, labelled with its scaffold pin (name, version, the SHA-256 of its config
// template).
const (
	scaffoldRecipe = "controller-scaffold/v1"
	// DefaultNPMRegistry is where npm tarballs are fetched from (BuildOptions.NPMRegistry).
	DefaultNPMRegistry = "https://registry.npmjs.org"
)

func buildScaffold(ctx context.Context, s *images.Store, o BuildOptions, sc *scaffolds.Scaffold) (Built, error) {
	key := sc.ImageKey()
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return Built{}, fmt.Errorf("the %s image needs debootstrap (apt-get install debootstrap, or make deps)", key)
	}
	if os.Geteuid() != 0 {
		return Built{}, fmt.Errorf("the %s image is built with debootstrap, which needs root; run build-local as root", key)
	}
	debootKey := hashStrings(debootstrapRecipe, o.Suite, o.Mirror, strings.Join(sc.Packages(), ","), runtime.GOARCH)
	parts := []string{scaffoldRecipe, debootKey, string(sc.Recipe()), string(sc.Script()), sc.ConfigSHA256()}
	inputs := hashStrings(parts...)
	if ref, ok := cached(s, o, key, inputs); ok {
		fmt.Fprintf(o.Log, "%s: unchanged, %s\n", key, ref)
		return Built{Key: key, Ref: ref, Cached: true}, nil
	}
	var tarballs []string
	for _, n := range sc.NPM {
		tgz, err := fetchNPM(ctx, o, key, n)
		if err != nil {
			return Built{}, err
		}
		tarballs = append(tarballs, tgz)
	}
	base, err := scaffoldBase(ctx, debootstrap, debootKey, key, sc.Packages(), o)
	if err != nil {
		return Built{}, err
	}
	// The scaffold's files go into a separate tree laid over a copy of the base, so the cached
	// base stays as debootstrap left it.
	tmp, err := os.MkdirTemp(o.CacheDir, key+"-")
	if err != nil {
		return Built{}, err
	}
	defer os.RemoveAll(tmp)
	extra := filepath.Join(tmp, "extra")
	for i, n := range sc.NPM {
		if err := extractNPM(tarballs[i], n, extra); err != nil {
			return Built{}, err
		}
	}
	if err := writeFile(filepath.Join(extra, scaffolds.EntrypointPath), sc.Script(), 0o755); err != nil {
		return Built{}, err
	}
	if py := findPython(extra); py != "" {
		return Built{}, fmt.Errorf("the %s image must hold no Python, but its npm files bring %s", key, py)
	}
	root := filepath.Join(tmp, "rootfs")
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", base, root).CombinedOutput(); err != nil {
		return Built{}, fmt.Errorf("copy the scaffolds' base rootfs: %v: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", extra+"/.", root).CombinedOutput(); err != nil {
		return Built{}, fmt.Errorf("add %s to the rootfs: %v: %s", sc.Name, err, out)
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"}, WorkingDir: "/workspace",
		Entrypoint: []string{"/bin/bash", scaffolds.EntrypointPath},
		Labels:     map[string]string{images.LabelScaffoldName: sc.Name, images.LabelScaffoldVer: sc.Version, images.LabelScaffoldConfig: sc.ConfigSHA256()}}
	fmt.Fprintf(o.Log, "%s: packing the rootfs into a reproducible layer\n", key)
	ref, err := s.ImportRootfs(ctx, root, sc.ImageName(), cfg, tmp, scaffoldSkip, o.Log)
	if err != nil {
		return Built{}, err
	}
	fmt.Fprintf(o.Log, "%s: %s\n", key, ref)
	return Built{Key: key, Ref: ref}, writeStamp(o, key, inputs, ref)
}

// countWriter counts what passes, for progress lines read from another goroutine.
type countWriter struct{ n atomic.Int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

func writeFile(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, mode)
}

// npmFile is a tarball's name in the build cache and on the registry.
func npmFile(n scaffolds.NPM) (cache, url string) {
	base := path.Base(n.Package) // a scoped package's tarball is named without its scope
	file := base + "-" + n.Version + ".tgz"
	cache = file
	if scope, _, ok := strings.Cut(n.Package, "/"); ok {
		cache = strings.TrimPrefix(scope, "@") + "+" + file
	}
	return cache, n.Package + "/-/" + file
}

// fetchNPM returns a pinned npm tarball from the build cache, fetching it (and checking its
// SHA-256) when it is not there.
func fetchNPM(ctx context.Context, o BuildOptions, key string, n scaffolds.NPM) (string, error) {
	name, rel := npmFile(n)
	p := filepath.Join(o.CacheDir, "npm", name)
	if sum, err := fileio.SHA256(p); err == nil && sum == n.SHA256 {
		return p, nil
	}
	reg := o.NPMRegistry
	if reg == "" {
		reg = DefaultNPMRegistry
	}
	url := strings.TrimRight(reg, "/") + "/" + rel
	fmt.Fprintf(o.Log, "%s: fetching %s\n", key, url)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 15 * time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch %s %s from npm: %w", n.Package, n.Version, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch %s %s from npm: %s answered %s", n.Package, n.Version, url, resp.Status)
	}
	f, err := os.CreateTemp(filepath.Dir(p), name+".part-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	var got countWriter
	done := make(chan struct{})
	go func() { // a tarball of hundreds of MB: say how far it is every few seconds
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(o.Log, "%s: %s: %d MiB fetched\n", key, name, got.n.Load()>>20)
			}
		}
	}()
	_, err = io.Copy(io.MultiWriter(f, h, &got), io.LimitReader(resp.Body, 2<<30))
	close(done)
	if err != nil {
		f.Close()
		return "", fmt.Errorf("fetch %s %s from npm: %w", n.Package, n.Version, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != n.SHA256 {
		return "", fmt.Errorf("the npm tarball %s has sha256 %s, but sealrun pins %s (scaffolds/%s/scaffold.toml): the registry served other bytes for this version; the build is refused — check the registry, or pin a new version deliberately", url, sum, n.SHA256, strings.TrimPrefix(key, "controller-"))
	}
	return p, os.Rename(f.Name(), p)
}

// extractNPM writes what n takes of the tarball tgz under root: one file (to is its path), or
// a directory (take ends in "/"; to is where its files go). Only regular files and directories
// are taken; a link, or a name that would leave the directory, refuses the tarball.
func extractNPM(tgz string, n scaffolds.NPM, root string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", tgz, err)
	}
	tr := tar.NewReader(zr)
	dir := strings.HasSuffix(n.Take, "/")
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tgz, err)
		}
		name := path.Clean(h.Name)
		var dst string
		switch {
		case !dir && name == n.Take:
			dst = n.To
		case dir && strings.HasPrefix(name+"/", n.Take):
			rel := strings.TrimPrefix(name, strings.TrimSuffix(n.Take, "/"))
			dst = path.Join(n.To, rel)
		default:
			continue
		}
		if strings.Contains(h.Name, "..") || path.IsAbs(h.Name) {
			return fmt.Errorf("%s holds %q, a name outside its package; refused", tgz, h.Name)
		}
		host := filepath.Join(root, filepath.FromSlash(dst))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(host, 0o755); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("%s holds %s, which is not a regular file (type %q); sealrun takes files and directories only", tgz, h.Name, h.Typeflag)
		}
		mode := os.FileMode(0o644)
		if h.Mode&0o111 != 0 || slices.Contains(n.Executables, strings.TrimPrefix(dst, n.To+"/")) {
			mode = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(host, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, io.LimitReader(tr, 2<<30)); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		os.Chmod(host, mode)
		found = true
	}
	if !found {
		return fmt.Errorf("%s holds no %s", tgz, n.Take)
	}
	return nil
}

// findPython returns a Python interpreter found in root's usual places, or "".
func findPython(root string) string {
	for _, d := range []string{"usr/bin", "bin", "usr/local/bin", "usr/sbin"} {
		entries, _ := os.ReadDir(filepath.Join(root, d))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "python") {
				return "/" + d + "/" + e.Name()
			}
		}
	}
	return ""
}

// scaffoldBase is a scaffold's Debian base in the build cache: debootstrapped once per package
// list, holding no Python, with sealrun's mount points.
func scaffoldBase(ctx context.Context, debootstrap, debootKey, key string, packages []string, o BuildOptions) (string, error) {
	base := filepath.Join(o.CacheDir, "scaffold-"+debootKey[:16], "rootfs")
	if _, err := os.Stat(filepath.Join(base, ".sealrun-complete")); err != nil {
		fmt.Fprintf(o.Log, "%s: debootstrap %s (%s) with %s — a few minutes the first time\n", key, o.Suite, o.Mirror, strings.Join(packages, ", "))
		do := o
		do.Packages = packages
		if err := debootstrapInto(ctx, debootstrap, base, do); err != nil {
			return "", err
		}
	} else {
		fmt.Fprintf(o.Log, "%s: reusing the debootstrap in %s\n", key, filepath.Dir(base))
	}
	if py := findPython(base); py != "" {
		return "", errors.New("a scaffold's controller must hold no Python, but its Debian packages brought " + py + "; check the scaffold's debian list")
	}
	if err := sandboxMountpoints(base); err != nil {
		return "", err
	}
	return base, nil
}

// scaffoldSkip leaves out of a scaffold's layer what a rootfs built on this host must not carry:
// host traces, runtime and cache directories, documentation.
func scaffoldSkip(rel string) bool {
	if rel == ".sealrun-complete" || slices.Contains(hostTraces, rel) {
		return true
	}
	if rel == "run/sealrun" || rel == "run/sealrun/agent.sock" {
		return false
	}
	for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "var/tmp", "var/log", "var/cache/apt/archives", "var/lib/apt/lists",
		// Documentation, and the Python pretty-printers gcc and gdb ship (inert without an
		// interpreter, but the controller holds no Python at all).
		"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/gcc", "usr/share/gdb"} {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}
