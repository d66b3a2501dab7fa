// Package scaffolds owns the agents sealrun ships ready to run: each a directory of its own
// (scaffolds/NAME/) holding its recipe (scaffold.toml: the CLI's npm packages pinned by version
// and tarball SHA-256, the Debian packages of its base, the provider kinds it speaks), its config
// template (whose SHA-256 is a track's [scaffold] config_sha256), and its entrypoint script (what
// sealrun sets for it: the gateway, the model, its own approvals and sandbox off because sealrun
// is the sandbox, telemetry and update checks off). images builds a controller image from a
// directory; the daemon renders its config for each run. Adding an agent is adding a directory.
package scaffolds

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/sealrun/sealrun/digest"
)

//go:embed */scaffold.toml */*
var embedded embed.FS

// files are the scaffolds' directories read (embedded; a test reads others).
var files fs.FS = embedded

// Scaffold is one agent's directory, read.
type Scaffold struct {
	// Name is the scaffold's name: its image's label and a track's [scaffold] name.
	Name    string `toml:"name"`
	Version string `toml:"version"`
	// Kinds are the provider kinds it speaks (controller.KindOpenAI, ...).
	Kinds []string `toml:"kinds"`
	// Debian packages of its base, beyond the shared ones (BasePackages).
	Debian []string `toml:"debian"`
	// Entrypoint is the script in the directory the image runs (at EntrypointPath).
	Entrypoint string `toml:"entrypoint"`
	// Config is the config template in the directory; ConfigEnv the variable the rendered config
	// reaches the scaffold in.
	Config    string `toml:"config"`
	ConfigEnv string `toml:"config_env"`
	// Env is what else sealrun sets for it, rendered like the config (@MODEL@, @EFFORT@...).
	Env []string `toml:"env"`
	NPM []NPM    `toml:"npm"`
	// Memory is the least controller memory it runs in (a size as tracks write it: "2GiB"),
	// measured: its peak in TestShippedScaffoldsSealedRun, with room. A track that pins the
	// scaffold and gives less ([resources] memory) is refused at admission: below it the
	// kernel's OOM killer ends the scaffold mid-run and the run is a zero for memory the operator
	// did not give. MemoryBytes is it in bytes.
	Memory      string `toml:"memory"`
	MemoryBytes int64  `toml:"-"`

	dir      string
	template []byte
	script   []byte
	recipe   []byte
}

// NPM is one npm tarball the image takes files from.
type NPM struct {
	Package string `toml:"package"`
	Version string `toml:"version"`
	SHA256  string `toml:"sha256"`
	// Take is a file of the tarball ("package/bin/opencode"), or a directory ending in "/"
	// ("package/" for the whole package), put at To in the image.
	Take string `toml:"take"`
	To   string `toml:"to"`
	// Executables are files under Take made executable (a tarball that forgot the bit).
	Executables []string `toml:"executables"`
}

// BasePackages are the Debian packages every scaffold's base has: bash (each CLI's shell tool),
// ripgrep (their grep and glob tools; without it some download one), git (their workspaces).
var BasePackages = []string{"bash", "ripgrep", "git"}

// EntrypointPath is where an image holds its scaffold's entrypoint.
const EntrypointPath = "/opt/sealrun/scaffold/entry.sh"

// ImageKey is the local image of a scaffold (sealrun images build-local --only ...).
func (s *Scaffold) ImageKey() string { return "controller-" + s.Name }

// ImageName is its name in the image store.
func (s *Scaffold) ImageName() string { return "sealrun.local/controller-" + s.Name }

// Dir is the scaffold's directory in the repository (scaffolds/NAME).
func (s *Scaffold) Dir() string { return "scaffolds/" + s.dir }

// Template is the config template; ConfigSHA256 its SHA-256, the track's config_sha256.
func (s *Scaffold) Template() []byte { return s.template }

// ConfigSHA256 is the SHA-256 of the config template.
func (s *Scaffold) ConfigSHA256() string {
	sum := sha256.Sum256(s.template)
	return hex.EncodeToString(sum[:])
}

// Script is the entrypoint script.
func (s *Scaffold) Script() []byte { return s.script }

// Recipe is scaffold.toml's bytes (an image's build inputs include them).
func (s *Scaffold) Recipe() []byte { return s.recipe }

// Packages are the Debian packages of its base: BasePackages, then its own, sorted.
func (s *Scaffold) Packages() []string {
	p := append(slices.Clone(BasePackages), s.Debian...)
	sort.Strings(p)
	return slices.Compact(p)
}

// Speaks reports whether the scaffold speaks a provider kind.
func (s *Scaffold) Speaks(kind string) bool { return slices.Contains(s.Kinds, kind) }

var (
	all     []*Scaffold
	byName  = map[string]*Scaffold{}
	loadErr error
)

func init() { loadErr = load() }

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// memoryRE is a scaffold's memory: whole MiB or GiB, as tracks write sizes (policy.ParseBytes
// takes more; this package imports nothing of sealrun's).
var memoryRE = regexp.MustCompile(`^([1-9][0-9]{0,6})(MiB|GiB)$`)

// load reads every directory's scaffold.toml and files, and checks them.
func load() error {
	dirs, err := fs.ReadDir(files, ".")
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		s, err := read(d.Name())
		if err != nil {
			return fmt.Errorf("scaffolds/%s: %w", d.Name(), err)
		}
		all = append(all, s)
		byName[s.Name] = s
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return nil
}

func read(dir string) (*Scaffold, error) {
	recipe, err := fs.ReadFile(files, path.Join(dir, "scaffold.toml"))
	if err != nil {
		return nil, err
	}
	s := &Scaffold{dir: dir, recipe: recipe}
	md, err := toml.NewDecoder(bytes.NewReader(recipe)).Decode(s)
	if err != nil {
		return nil, fmt.Errorf("scaffold.toml: %w", err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		return nil, fmt.Errorf("scaffold.toml: unknown key %s", u[0])
	}
	var errs []error
	if !nameRE.MatchString(s.Name) || s.Name != dir {
		errs = append(errs, fmt.Errorf("name %q: give the directory's name (lowercase letters, digits, -)", s.Name))
	}
	if s.Version == "" || len(s.Kinds) == 0 || s.Entrypoint == "" || s.Config == "" || s.ConfigEnv == "" || len(s.NPM) == 0 {
		errs = append(errs, errors.New("name, version, kinds, entrypoint, config, config_env and at least one [[npm]] are required"))
	}
	if m := memoryRE.FindStringSubmatch(s.Memory); m == nil {
		errs = append(errs, fmt.Errorf("memory %q: give the least controller memory it runs in, measured, as whole MiB or GiB (\"2GiB\", \"1536MiB\")", s.Memory))
	} else {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		s.MemoryBytes = n << 20
		if m[2] == "GiB" {
			s.MemoryBytes = n << 30
		}
	}
	for i, n := range s.NPM {
		if n.Package == "" || n.Version == "" || !digest.IsHex(n.SHA256) || !strings.HasPrefix(n.Take, "package/") || !path.IsAbs(n.To) {
			errs = append(errs, fmt.Errorf("npm[%d]: give package, version, sha256 (64 hex), take (under package/) and to (absolute)", i))
		}
	}
	if s.script, err = fs.ReadFile(files, path.Join(dir, s.Entrypoint)); err != nil {
		errs = append(errs, err)
	}
	if s.template, err = fs.ReadFile(files, path.Join(dir, s.Config)); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// All are the scaffolds, by name.
func All() []*Scaffold {
	if loadErr != nil {
		panic(loadErr) // a directory of this repository is broken: TestScaffoldsLoad names it
	}
	return all
}

// Lookup finds a scaffold by name.
func Lookup(name string) (*Scaffold, bool) {
	All()
	s, ok := byName[name]
	return s, ok
}

// ByImage finds a scaffold by its local image key (controller-NAME).
func ByImage(key string) (*Scaffold, bool) {
	name, ok := strings.CutPrefix(key, "controller-")
	if !ok {
		return nil, false
	}
	return Lookup(name)
}

// Names are the scaffolds' names, sorted.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name)
	}
	return out
}

// Run is what a run gives a scaffold: its provider's kind, the gateway's URL, the model and its
// effort.
type Run struct {
	Kind, Gateway, Model, Effort string
}

var safeRE = regexp.MustCompile(`^[A-Za-z0-9._:/-]{0,128}$`)

// Render is the run's configuration of the scaffold, as environment variables: its config (the
// template with @MODEL@, @EFFORT@, @BASE_URL@ and @GATEWAY@ filled in; a line holding @EFFORT@
// is left out when the run has none) in ConfigEnv, and its Env rendered the same way. The error
// names what the scaffold cannot take: a provider kind it does not speak, a model or effort its
// config cannot hold.
func (s *Scaffold) Render(r Run) ([]string, error) {
	if !s.Speaks(r.Kind) {
		return nil, fmt.Errorf("the %s scaffold needs a model provider of kind %s; this agent's provider is of kind %q: run it with an agent of a configured model provider of that kind", s.Name, strings.Join(s.Kinds, " or "), r.Kind)
	}
	for what, v := range map[string]string{"model": r.Model, "effort": r.Effort} {
		if !safeRE.MatchString(v) || (what == "model" && v == "") {
			return nil, fmt.Errorf("the %s config cannot hold %s %q: use letters, digits and . _ : - / only (at most 128)", s.Name, what, v)
		}
	}
	gw := strings.TrimRight(r.Gateway, "/")
	base := gw
	if r.Kind == "openai" {
		base += "/v1"
	}
	repl := strings.NewReplacer("@MODEL@", r.Model, "@EFFORT@", r.Effort, "@BASE_URL@", base, "@GATEWAY@", gw, "@KIND@", r.Kind)
	fill := func(text string) string {
		var b strings.Builder
		for _, line := range strings.SplitAfter(text, "\n") {
			if r.Effort == "" && strings.Contains(line, "@EFFORT@") {
				continue
			}
			b.WriteString(repl.Replace(line))
		}
		return b.String()
	}
	var cfg string
	if f, ok := renderers[s.Name]; ok {
		var err error
		if cfg, err = f(s, r, fill); err != nil {
			return nil, err
		}
	} else {
		cfg = fill(string(s.template))
	}
	env := []string{s.ConfigEnv + "=" + cfg}
	for _, e := range s.Env {
		if r.Effort == "" && strings.Contains(e, "@EFFORT@") {
			continue
		}
		env = append(env, repl.Replace(e))
	}
	return env, nil
}

// renderers are the scaffolds whose config needs more than the template's words.
var renderers = map[string]func(s *Scaffold, r Run, fill func(string) string) (string, error){}
