package images

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
)

// The opencode scaffold as the opencode controller image carries it: the binary from npm, pinned
// by version and by the SHA-256 of the npm tarball (the registry's tarball for that version);
// a tarball with another hash refuses the build.
const (
	LocalOpencodeControllerName = "sealrun.local/controller-opencode"
	OpencodeScaffoldName        = "opencode"
	OpencodeVersion             = "1.18.33"
	OpencodePackage             = "opencode-linux-x64"
	OpencodeTarballSHA256       = "149a676b59224b196626abda2fdbd34c8329ac326b57c4891ba3de446f3ca3c1"
	opencodeScaffoldPath        = "/opt/sealrun/scaffold/opencode.sh"
	opencodeRecipe              = "controller-opencode/v2"
	// DefaultNPMRegistry is where the opencode tarball is fetched from (BuildOptions.NPMRegistry).
	DefaultNPMRegistry = "https://registry.npmjs.org"
)

// opencodePackages are installed by debootstrap (minbase) for opencode: bash for its shell tool,
// ripgrep for its grep and glob tools (without rg it tries to download one), git because it uses
// a workspace repository when there is one. No Python: a build that finds one fails.
var opencodePackages = []string{"bash", "ripgrep", "git"}

// OpencodeConfigSHA256 is the opencode scaffold's config hash: the SHA-256 of its config
// template (kits/opencode/opencode.json), which the daemon renders for each run.
func OpencodeConfigSHA256() string {
	b, _ := fs.ReadFile(kits.Sources, "opencode/opencode.json")
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (s *Store) buildOpencodeController(ctx context.Context, o BuildOptions) (Built, error) {
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return Built{}, errors.New("the opencode controller image needs debootstrap (apt-get install debootstrap, or make deps)")
	}
	if os.Geteuid() != 0 {
		return Built{}, errors.New("the opencode controller image is built with debootstrap, which needs root; run build-local as root")
	}
	script, err := fs.ReadFile(kits.Sources, "opencode/opencode.sh")
	if err != nil {
		return Built{}, err
	}
	debootKey := hashStrings(debootstrapRecipe, o.Suite, o.Mirror, strings.Join(opencodePackages, ","), runtime.GOARCH)
	inputs := hashStrings(opencodeRecipe, debootKey, OpencodePackage, OpencodeVersion, OpencodeTarballSHA256, string(script), OpencodeConfigSHA256())
	if ref, ok := s.cached(o, "controller-opencode", inputs); ok {
		fmt.Fprintf(o.Log, "controller-opencode: unchanged, %s\n", ref)
		return Built{Key: "controller-opencode", Ref: ref, Cached: true}, nil
	}
	tgz, err := fetchOpencode(ctx, o)
	if err != nil {
		return Built{}, err
	}
	base, err := opencodeBase(ctx, debootstrap, debootKey, o)
	if err != nil {
		return Built{}, err
	}
	// The scaffold's files go into a separate tree packed after the base, so the cached base stays
	// as debootstrap left it.
	tmp, err := os.MkdirTemp(o.CacheDir, "controller-opencode-")
	if err != nil {
		return Built{}, err
	}
	defer os.RemoveAll(tmp)
	root, err := opencodeRootfs(ctx, base, tmp, tgz, script)
	if err != nil {
		return Built{}, err
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"}, WorkingDir: "/workspace",
		Entrypoint: []string{"/bin/bash", opencodeScaffoldPath},
		Labels:     map[string]string{LabelScaffoldName: OpencodeScaffoldName, LabelScaffoldVer: OpencodeVersion, LabelScaffoldConfig: OpencodeConfigSHA256()}}
	fmt.Fprintf(o.Log, "controller-opencode: packing the rootfs into a reproducible layer\n")
	ref, err := s.importRootfs(ctx, root, LocalOpencodeControllerName, cfg, tmp, opencodeSkip, o.Log)
	if err != nil {
		return Built{}, err
	}
	fmt.Fprintf(o.Log, "controller-opencode: %s\n", ref)
	return Built{Key: "controller-opencode", Ref: ref}, writeStamp(o, "controller-opencode", inputs, ref)
}

// fetchOpencode returns the pinned npm tarball from the build cache, fetching it (and checking
// its SHA-256) when it is not there.
func fetchOpencode(ctx context.Context, o BuildOptions) (string, error) {
	name := fmt.Sprintf("%s-%s.tgz", OpencodePackage, OpencodeVersion)
	path := filepath.Join(o.CacheDir, "npm", name)
	if sum, err := fileio.SHA256(path); err == nil && sum == OpencodeTarballSHA256 {
		return path, nil
	}
	reg := o.NPMRegistry
	if reg == "" {
		reg = DefaultNPMRegistry
	}
	url := fmt.Sprintf("%s/%s/-/%s", strings.TrimRight(reg, "/"), OpencodePackage, name)
	fmt.Fprintf(o.Log, "controller-opencode: fetching %s\n", url)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch opencode %s from npm: %w", OpencodeVersion, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch opencode %s from npm: %s answered %s", OpencodeVersion, url, resp.Status)
	}
	f, err := os.CreateTemp(filepath.Dir(path), name+".part-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, 1<<30)); err != nil {
		f.Close()
		return "", fmt.Errorf("fetch opencode %s from npm: %w", OpencodeVersion, err)
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != OpencodeTarballSHA256 {
		return "", fmt.Errorf("the npm tarball %s has sha256 %s, but sealrun pins %s (images.OpencodeTarballSHA256): the registry served other bytes for this version; the build is refused — check the registry, or pin a new version deliberately", url, got, OpencodeTarballSHA256)
	}
	return path, os.Rename(f.Name(), path)
}

// extractOpencode writes the tarball's package/bin/opencode to dst (0755); nothing else of the
// package is used.
func extractOpencode(tgz, dst string) error {
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
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("%s holds no package/bin/opencode", tgz)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", tgz, err)
		}
		if h.Name != "package/bin/opencode" || h.Typeflag != tar.TypeReg {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, io.LimitReader(tr, 1<<30)); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
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

// opencodeBase is the opencode controller's Debian base in the build cache: debootstrapped once
// (the package list in its key), holding no Python, with sealrun's mount points.
func opencodeBase(ctx context.Context, debootstrap, debootKey string, o BuildOptions) (string, error) {
	base := filepath.Join(o.CacheDir, "opencode-"+debootKey[:16], "rootfs")
	if _, err := os.Stat(filepath.Join(base, ".sealrun-complete")); err != nil {
		fmt.Fprintf(o.Log, "controller-opencode: debootstrap %s (%s) with %s — a few minutes the first time\n", o.Suite, o.Mirror, strings.Join(opencodePackages, ", "))
		do := o
		do.Packages = opencodePackages
		if err := debootstrapInto(ctx, debootstrap, base, do); err != nil {
			return "", err
		}
	} else {
		fmt.Fprintf(o.Log, "controller-opencode: reusing the debootstrap in %s\n", filepath.Dir(base))
	}
	if py := findPython(base); py != "" {
		return "", fmt.Errorf("the opencode controller must hold no Python, but its Debian packages brought %s; check opencodePackages", py)
	}
	if err := sandboxMountpoints(base); err != nil {
		return "", err
	}
	return base, nil
}

// opencodeRootfs copies the base into tmp/rootfs and adds opencode's binary (from the tarball
// tgz) and the scaffold's script, keeping the cached base as debootstrap left it.
func opencodeRootfs(ctx context.Context, base, tmp, tgz string, script []byte) (string, error) {
	extra := filepath.Join(tmp, "extra")
	if err := extractOpencode(tgz, filepath.Join(extra, "usr/local/bin/opencode")); err != nil {
		return "", err
	}
	dst := filepath.Join(extra, opencodeScaffoldPath)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(dst, script, 0o755); err != nil {
		return "", err
	}
	root := filepath.Join(tmp, "rootfs")
	if out, err := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", base, root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy the opencode base rootfs: %v: %s", err, out)
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", extra+"/.", root).CombinedOutput(); err != nil {
		return "", fmt.Errorf("add opencode to the rootfs: %v: %s", err, out)
	}
	return root, nil
}

// opencodeSkip leaves out of the opencode controller's layer what a rootfs built on this host
// must not carry: host traces, runtime and cache directories, documentation.
func opencodeSkip(rel string) bool {
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
