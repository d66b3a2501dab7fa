package builder

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/scaffolds"
)

// Local image names. The digest is the identity; these names are for people and lock files.
const (
	LocalControllerName     = "sealrun.local/controller"
	LocalDemoControllerName = "sealrun.local/demo-controller"
	LocalPythonName         = "sealrun.local/python"
)

// The scripted demo scaffold (kits/demo-agent) as the demo controller image carries it.
const (
	DemoScaffoldName    = "scripted-demo"
	DemoScaffoldVersion = "1.0.0"
	demoScaffoldPath    = "/opt/sealrun/scaffold/agent.sh"
)

// DemoScaffoldConfigSHA256 is the demo scaffold's config hash: the SHA-256 of its script.
func DemoScaffoldConfigSHA256() string {
	b, _ := fs.ReadFile(kits.Sources, "demo-agent/agent.sh")
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The recipes' versions: bump when a recipe changes what it builds, so caches are not reused.
const (
	controllerRecipe     = "controller/v3"
	demoControllerRecipe = "demo-controller/v1"
	pythonRecipe         = "python/v5"
	// debootstrapRecipe keys the cached debootstrap result; the python recipe can change what is
	// added on top without a new debootstrap.
	debootstrapRecipe = "debootstrap/v1"
)

// BuildOptions configure BuildLocal.
type BuildOptions struct {
	// Images to build: "controller", "demo-controller", "python", and each scaffold's
	// ("controller-opencode", "controller-codex", ...: scaffolds.All) (default: all).
	Images []string
	// CacheDir keeps the debootstrap result between builds (default <state-dir>/build-cache).
	CacheDir string
	// Busybox is the static busybox binary copied into the controller (default /bin/busybox).
	Busybox string
	// Mirror and Suite for debootstrap (default http://deb.debian.org/debian, bookworm).
	Mirror, Suite string
	// Packages installed into the python image besides the minbase variant.
	Packages []string
	// NPMRegistry is where the scaffolds' npm tarballs are fetched (default
	// DefaultNPMRegistry); each is checked against its pinned SHA-256 whatever serves it.
	NPMRegistry string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

func (o *BuildOptions) defaults(stateDir string) {
	if len(o.Images) == 0 {
		o.Images = LocalImages()
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(stateDir, "build-cache")
	}
	if o.Busybox == "" {
		o.Busybox = "/bin/busybox"
	}
	if o.Mirror == "" {
		o.Mirror = "http://deb.debian.org/debian"
	}
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if len(o.Packages) == 0 {
		// OpenBLAS: torch's BLAS is Debian's alternative, the reference one (about 40x slower)
		// unless an optimised one is installed.
		o.Packages = []string{"python3", "python3-numpy", "python3-torch", "libopenblas0-pthread"}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// LocalImages are the images build-local makes: the test and demo images, then each scaffold's.
func LocalImages() []string {
	out := []string{"controller", "demo-controller", "python"}
	for _, sc := range scaffolds.All() {
		out = append(out, sc.ImageKey())
	}
	return out
}

// Built is one locally built image.
type Built struct {
	Key    string // "controller" or "python"
	Ref    string // name@sha256:<hex>
	Cached bool   // nothing changed since the last build
}

// BuildLocal builds the demo and test images from Debian packages and imports them into the
// store: controller (busybox shell and tools, no Python anywhere) and python (debootstrap
// minbase with python3, numpy and torch). Layers are reproducible, so the same rootfs always
// gives the same digest. A build whose inputs did not change since the last one reuses it.
func BuildLocal(ctx context.Context, s *images.Store, stateDir string, o BuildOptions) ([]Built, error) {
	o.defaults(stateDir)
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("build cache %s: %w", o.CacheDir, err)
	}
	var out []Built
	for _, key := range o.Images {
		var b Built
		var err error
		switch key {
		case "controller":
			b, err = buildController(ctx, s, o)
		case "demo-controller":
			b, err = buildDemoController(ctx, s, o)
		case "python":
			b, err = buildPython(ctx, s, o)
		default:
			sc, ok := scaffolds.ByImage(key)
			if !ok {
				err = fmt.Errorf("unknown local image %q; build-local makes %s", key, strings.Join(LocalImages(), ", "))
				break
			}
			b, err = buildScaffold(ctx, s, o, sc)
		}
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
	return out, nil
}

// stamp is a cache entry: the inputs' hash and the digest they produced.
func cached(s *images.Store, o BuildOptions, key, inputs string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(o.CacheDir, key+".stamp"))
	if err != nil {
		return "", false
	}
	in, ref, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || in != inputs {
		return "", false
	}
	d, err := images.ParsePinned(ref)
	if err != nil {
		return "", false
	}
	if _, err := s.Get(d.DigestStr()); err != nil {
		return "", false
	}
	return ref, true
}

func writeStamp(o BuildOptions, key, inputs, ref string) error {
	return fileio.WriteFile(filepath.Join(o.CacheDir, key+".stamp"), []byte(inputs+" "+ref+"\n"), 0o600)
}

func hashStrings(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func buildController(ctx context.Context, s *images.Store, o BuildOptions) (Built, error) {
	bb, err := fileio.SHA256(o.Busybox)
	if err != nil {
		return Built{}, fmt.Errorf("controller image needs a static busybox at %s (apt-get install busybox-static, or make deps): %w", o.Busybox, err)
	}
	inputs := hashStrings(controllerRecipe, bb)
	if ref, ok := cached(s, o, "controller", inputs); ok {
		fmt.Fprintf(o.Log, "controller: unchanged, %s\n", ref)
		return Built{Key: "controller", Ref: ref, Cached: true}, nil
	}
	fmt.Fprintf(o.Log, "controller: building from %s\n", o.Busybox)
	tmp, err := os.MkdirTemp(o.CacheDir, "controller-")
	if err != nil {
		return Built{}, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	if err := controllerRootfs(ctx, root, o.Busybox); err != nil {
		return Built{}, fmt.Errorf("controller rootfs: %w", err)
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/bin", "HOME=/workspace"}, WorkingDir: "/workspace", Cmd: []string{"/bin/sh"}}
	ref, err := s.ImportRootfs(ctx, root, LocalControllerName, cfg, tmp, nil, o.Log)
	if err != nil {
		return Built{}, err
	}
	fmt.Fprintf(o.Log, "controller: %s\n", ref)
	return Built{Key: "controller", Ref: ref}, writeStamp(o, "controller", inputs, ref)
}

// buildDemoController builds the controller image with the scripted demo scaffold
// (kits/demo-agent) as its command, labelled with the scaffold pin a track checks.
func buildDemoController(ctx context.Context, s *images.Store, o BuildOptions) (Built, error) {
	bb, err := fileio.SHA256(o.Busybox)
	if err != nil {
		return Built{}, fmt.Errorf("demo controller image needs a static busybox at %s (apt-get install busybox-static, or make deps): %w", o.Busybox, err)
	}
	script, err := fs.ReadFile(kits.Sources, "demo-agent/agent.sh")
	if err != nil {
		return Built{}, err
	}
	inputs := hashStrings(demoControllerRecipe, controllerRecipe, bb, string(script), DemoScaffoldVersion)
	if ref, ok := cached(s, o, "demo-controller", inputs); ok {
		fmt.Fprintf(o.Log, "demo-controller: unchanged, %s\n", ref)
		return Built{Key: "demo-controller", Ref: ref, Cached: true}, nil
	}
	fmt.Fprintf(o.Log, "demo-controller: building (busybox and the scripted demo scaffold)\n")
	tmp, err := os.MkdirTemp(o.CacheDir, "demo-controller-")
	if err != nil {
		return Built{}, err
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "rootfs")
	if err := controllerRootfs(ctx, root, o.Busybox); err != nil {
		return Built{}, fmt.Errorf("demo controller rootfs: %w", err)
	}
	dst := filepath.Join(root, demoScaffoldPath)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return Built{}, err
	}
	if err := os.WriteFile(dst, script, 0o755); err != nil {
		return Built{}, err
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/bin", "HOME=/workspace"}, WorkingDir: "/workspace",
		Entrypoint: []string{"/bin/sh", demoScaffoldPath},
		Labels:     map[string]string{images.LabelScaffoldName: DemoScaffoldName, images.LabelScaffoldVer: DemoScaffoldVersion, images.LabelScaffoldConfig: DemoScaffoldConfigSHA256()}}
	ref, err := s.ImportRootfs(ctx, root, LocalDemoControllerName, cfg, tmp, nil, o.Log)
	if err != nil {
		return Built{}, err
	}
	fmt.Fprintf(o.Log, "demo-controller: %s\n", ref)
	return Built{Key: "demo-controller", Ref: ref}, writeStamp(o, "demo-controller", inputs, ref)
}

// controllerRootfs lays out a busybox-only root: a shell and coreutils-level tools, no Python.
func controllerRootfs(ctx context.Context, root, busybox string) error {
	for _, d := range []string{"bin", "etc", "dev", "proc", "sys", "tmp", "root", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{"tmp", "var/tmp"} {
		if err := os.Chmod(filepath.Join(root, d), 0o1777); err != nil {
			return err
		}
	}
	if err := sandboxMountpoints(root); err != nil {
		return err
	}
	data, err := os.ReadFile(busybox)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), data, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", busybox, err)
	}
	applets := strings.Fields(string(out))
	sort.Strings(applets)
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	files := map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":    "root:x:0:\nagent:x:1000:\nnogroup:x:65534:\n",
		"etc/hostname": "controller\n",
		"etc/hosts":    "127.0.0.1 localhost\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func buildPython(ctx context.Context, s *images.Store, o BuildOptions) (Built, error) {
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return Built{}, errors.New("the python image needs debootstrap (apt-get install debootstrap, or make deps)")
	}
	if os.Geteuid() != 0 {
		return Built{}, errors.New("the python image is built with debootstrap, which needs root; run build-local as root")
	}
	debootKey := hashStrings(debootstrapRecipe, o.Suite, o.Mirror, strings.Join(o.Packages, ","), runtime.GOARCH)
	inputs := hashStrings(pythonRecipe, debootKey)
	if ref, ok := cached(s, o, "python", inputs); ok {
		fmt.Fprintf(o.Log, "python: unchanged, %s\n", ref)
		return Built{Key: "python", Ref: ref, Cached: true}, nil
	}
	root := filepath.Join(o.CacheDir, "python-"+debootKey[:16], "rootfs")
	if _, err := os.Stat(filepath.Join(root, ".sealrun-complete")); err != nil {
		fmt.Fprintf(o.Log, "python: debootstrap %s (%s) with %s — several minutes the first time\n", o.Suite, o.Mirror, strings.Join(o.Packages, ", "))
		if err := debootstrapInto(ctx, debootstrap, root, o); err != nil {
			return Built{}, err
		}
	} else {
		fmt.Fprintf(o.Log, "python: reusing the debootstrap in %s\n", filepath.Dir(root))
	}
	if err := sandboxMountpoints(root); err != nil {
		return Built{}, err
	}
	cfg := v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "HOME=/workspace"}, WorkingDir: "/workspace", Cmd: []string{"/usr/bin/python3"}}
	// Keep these directories but leave out their contents: mount points, scratch space, logs
	// and apt's download caches.
	// Files debootstrap copies from the build host (its resolver and name) are left out too:
	// an image carries no trace of where it was built (hostTraces).
	skip := func(rel string) bool {
		if rel == ".sealrun-complete" || slices.Contains(hostTraces, rel) {
			return true
		}
		if rel == "run/sealrun" || rel == "run/sealrun/agent.sock" {
			return false // the sandbox's mount point, kept
		}
		for _, d := range []string{"proc", "sys", "dev", "run", "tmp", "var/tmp", "var/log", "var/cache/apt/archives", "var/lib/apt/lists"} {
			if strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
	tmp, err := os.MkdirTemp(o.CacheDir, "python-pack-")
	if err != nil {
		return Built{}, err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(o.Log, "python: packing the rootfs into a reproducible layer\n")
	ref, err := s.ImportRootfs(ctx, root, LocalPythonName, cfg, tmp, skip, o.Log)
	if err != nil {
		return Built{}, err
	}
	fmt.Fprintf(o.Log, "python: %s\n", ref)
	return Built{Key: "python", Ref: ref}, writeStamp(o, "python", inputs, ref)
}

// hostTraces are files debootstrap copies from the machine that runs it. Containers get none of
// them (no network, and the runtime sets the hostname).
var hostTraces = []string{"etc/resolv.conf", "etc/hostname", "etc/hosts", "etc/mailname"}

// sandboxMountpoints adds the empty directories and files the sandbox mounts over (/workspace,
// /bundle, /usr/local/bin/runner, the agent socket /run/sealrun/agent.sock): the runtime must
// never have to create them, since that would write into the image store's rootfs.
func sandboxMountpoints(root string) error {
	for _, d := range []string{"workspace", "bundle", "usr/local/bin", "proc", "sys", "dev", "tmp", "run/sealrun"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{"usr/local/bin/runner", 0o755}, {"run/sealrun/agent.sock", 0o644}} {
		f, err := os.OpenFile(filepath.Join(root, p.path), os.O_CREATE|os.O_WRONLY, p.mode)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// debootstrapInto runs debootstrap into a fresh directory, makes sure nothing it mounted stays
// mounted, and marks the result complete.
func debootstrapInto(ctx context.Context, debootstrap, root string, o BuildOptions) error {
	parent := filepath.Dir(root)
	if err := os.RemoveAll(parent); err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(parent, "debootstrap.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"--variant=minbase", "--include=" + strings.Join(o.Packages, ","), o.Suite, root, o.Mirror}
	cmd := exec.CommandContext(ctx, debootstrap, args...)
	last := &lastLine{prefix: "I: "}
	out := io.MultiWriter(logf, last)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	start := time.Now()
	stop := images.Progress(o.Log, 5*time.Second, func() string {
		return fmt.Sprintf("  debootstrap %s (%s): %s", o.Suite, time.Since(start).Round(time.Second), strings.TrimPrefix(last.String(), "I: "))
	})
	runErr := cmd.Run()
	stop()
	if err := unmountUnder(root); err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return fmt.Errorf("debootstrap %s failed (%v); its log is %s (last lines: %s)", o.Suite, runErr, logPath, lastLines(logPath, 3))
	}
	return os.WriteFile(filepath.Join(root, ".sealrun-complete"), nil, 0o644)
}

// unmountUnder lazily unmounts every mount point at or below dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(dir)
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == abs || strings.HasPrefix(f[4], abs+"/")) {
			points = append(points, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var first error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && first == nil {
			first = fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return first
}

func lastLines(path string, n int) string {
	b, _ := os.ReadFile(path)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
