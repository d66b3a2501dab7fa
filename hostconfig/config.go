package hostconfig

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/BurntSushi/toml"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/sandbox"
)

// DefaultPath is where make install puts the daemon's configuration.
const DefaultPath = "/etc/sealrun/sealrun.toml"

// Config is sealrun.toml: one file for the whole daemon.
type Config struct {
	StateDir string `toml:"state_dir"` // runs, images, content, journal (default /var/lib/sealrun)
	RunDir   string `toml:"run_dir"`   // volatile sandbox state (default /run/sealrun)
	Runtime  string `toml:"runtime"`   // OCI runtime binary: runc (default), crun or runsc
	Socket   string `toml:"socket"`    // admin socket (default /run/sealrun/sealrun.sock)
	Group    string `toml:"group"`     // group allowed on the admin socket (default sealrun)
	// Runner is the static runner client mounted into controllers (default: beside sealrund).
	// Compute calls start through the shim runner-exec beside it (runner.ExecShim), else
	// through it.
	Runner string `toml:"runner"`
	// Hook is the containers' network hook binary (default: beside sealrund). Containers start
	// with its relay sealrun-hook-relay beside it (sandbox.RelayBinary) where that is installed.
	Hook string `toml:"hook"`
	// CgroupParent is the cgroup runs are created under; "" (the default) decides at start: below
	// the daemon's own cgroup where systemd delegated it (cgroup v2: <cgroup>/runs), else /sealrun.
	CgroupParent string `toml:"cgroup_parent"`

	// Runtimes overrides runtime for some roles: [runtimes] runner = "crun", grader = "crun"
	// (gVisor as a second wall where the agent's code runs), controller = "crun".
	Runtimes map[string]string `toml:"runtimes"`

	Keys      KeysConfig                           `toml:"keys"`
	Providers map[string]controller.ProviderConfig `toml:"providers"`
	Resources ResourcesConfig                      `toml:"resources"`
	Metrics   MetricsConfig                        `toml:"metrics"`
	Ledger    LedgerConfig                         `toml:"ledger"`
	Prices    PricesConfig                         `toml:"prices"`
	// Witnesses are the outside parties the ledger's heads are shown to ([[witnesses]]).
	Witnesses []WitnessConfig `toml:"witnesses"`
	// Timestamp is an RFC 3161 timestamp authority every attestation's signature is sent to.
	Timestamp TimestampConfig `toml:"timestamp"`
	// TPM quotes each run's statement with the host's TPM and measures sealrund into it at
	// start ([tpm]; docs/TPM.md). It needs keys.signing = "tpm:DEVICE".
	TPM TPMConfig `toml:"tpm"`

	// File is the file the configuration was read from (its errors name it).
	File string `toml:"-"`
}

// NoProvider is the built-in provider of runs with no model (a scripted scaffold such as the
// demo agent): agent none/MODEL. Its gateway refuses every request.
const NoProvider = controller.KindNone

// HumanProvider is the built-in provider of human runs: agent human/HANDLE, a person at the
// run's terminal (sealrun attach) instead of a scaffold, on a track with [human]. The run has no
// model: its gateway refuses every request.
const HumanProvider = "human"

// IsHuman says whether an agent (PROVIDER/MODEL[@EFFORT]) is a person's.
func IsHuman(agent string) bool { return strings.HasPrefix(agent, HumanProvider+"/") }

// ScriptedProvider is the provider name kept for a scripted model (sealrun demo --scaffold NAME:
// controller/scriptedmodel on loopback): a [providers.scripted] table must point at
// loopback, and the leaderboard never presents its rows as a real model.
const ScriptedProvider = "scripted"

// KeysConfig is the signing key of attestations.
type KeysConfig struct {
	Signing        string `toml:"signing"`         // private key (PEM), a KMS reference, or tpm:DEVICE (the TPM's signing key)
	Public         string `toml:"public"`          // its public half, checked against it at start
	PassphraseFile string `toml:"passphrase_file"` // for an encrypted private key
}

// ResourcesConfig is what runs may use on this host.
type ResourcesConfig struct {
	GPUs        []string `toml:"gpus"`        // CDI device names, for example "nvidia.com/gpu=0"
	CDIDirs     []string `toml:"cdi_dirs"`    // where the CDI specs are (default /etc/cdi, /var/run/cdi)
	CPUs        int64    `toml:"cpus"`        // CPUs the daemon may hand to runs (default: all)
	Concurrency int      `toml:"concurrency"` // runs at once at most (default 1)
	// WorkspaceReadBPS and WorkspaceWriteBPS cap, in bytes a second, what each run's containers
	// read from and write to its workspace (the block device of its quota'd filesystem); 0: no cap.
	WorkspaceReadBPS  int64 `toml:"workspace_read_bps"`
	WorkspaceWriteBPS int64 `toml:"workspace_write_bps"`
}

// MetricsConfig is the opt-in Prometheus listener.
// LedgerConfig names the host's run ledger (state_dir/ledger.jsonl).
type LedgerConfig struct {
	// Origin is the ledger's name in its signed heads; "" for sealrun.ledger/<hostname>. It is
	// fixed when the ledger is made: a later change does not rename it.
	Origin string `toml:"origin"`
	// WitnessQuorum is how many of [[witnesses]] must cosign a head before sealrun ledger export
	// --witnessed takes it (default: all of them).
	WitnessQuorum int `toml:"witness_quorum"`
}

// TimestampConfig names an RFC 3161 timestamp authority ([timestamp]): each attestation's
// signature is timestamped, and the token carried in the Sigstore bundle beside it.
type TimestampConfig struct {
	URL   string `toml:"url"`   // where to POST application/timestamp-query
	Chain string `toml:"chain"` // the authority's certificate chain (PEM: its signing certificate, its root)
}

// TPMConfig is [tpm]: the host's TPM quotes each run (its attestation key, over PCRs, with the
// statement's SHA-256 as qualifying data), and sealrund measures its own binary into a PCR at
// start. The TPM is keys.signing's ("tpm:DEVICE").
type TPMConfig struct {
	// Enrollment is what sealrun tpm enroll wrote (enrollment.json): sealrund checks at start
	// that the TPM's keys are the ones it names, as readers will.
	Enrollment string `toml:"enrollment"`
	// PCRs are quoted with each run (default: 0, 2, 4, 7 and SealrundPCR).
	PCRs []int `toml:"pcrs"`
	// SealrundPCR is where sealrund extends the SHA-256 of its binary at start (default 23,
	// which nothing else of a Linux host measures into).
	SealrundPCR *int `toml:"sealrund_pcr"`
}

// DefaultSealrundPCR is the PCR sealrund measures itself into unless [tpm] sealrund_pcr names
// another.
const DefaultSealrundPCR = 23

// Enabled says whether [tpm] is configured.
func (t TPMConfig) Enabled() bool {
	return t.Enrollment != "" || len(t.PCRs) > 0 || t.SealrundPCR != nil
}

// MeasurePCR is the PCR sealrund measures itself into.
func (t TPMConfig) MeasurePCR() int {
	if t.SealrundPCR != nil {
		return *t.SealrundPCR
	}
	return DefaultSealrundPCR
}

// QuotePCRs are the PCRs each run's quote covers, in index order.
func (t TPMConfig) QuotePCRs() []int {
	ps := t.PCRs
	if len(ps) == 0 {
		ps = []int{0, 2, 4, 7, t.MeasurePCR()}
	}
	out := append([]int(nil), ps...)
	slices.Sort(out)
	return slices.Compact(out)
}

// TSA is the configured timestamp authority, its chain loaded (nil: none configured).
func (c *Config) TSA() (*attest.TSA, error) {
	if c.Timestamp.URL == "" {
		return nil, nil
	}
	chain, err := attest.LoadTSAChain(c.Timestamp.Chain)
	if err != nil {
		return nil, err
	}
	return &attest.TSA{URL: c.Timestamp.URL, Chain: chain}, nil
}

// WitnessConfig is one witness (C2SP tlog-witness) the ledger's heads are sent to.
type WitnessConfig struct {
	Name string `toml:"name"` // what logs and sealrun doctor call it
	URL  string `toml:"url"`  // its submission prefix (http or https); POST <url>/add-checkpoint
	Key  string `toml:"key"`  // its public key, "name+id+base64" (sealrun witness key prints one)
}

// WitnessTargets are the configured witnesses, their keys parsed (Validate has checked them).
func (c *Config) WitnessTargets() []witness.Target {
	var out []witness.Target
	for _, w := range c.Witnesses {
		v, err := witness.NewVerifier(w.Key)
		if err != nil {
			continue
		}
		out = append(out, witness.Target{Name: w.Name, URL: strings.TrimSuffix(w.URL, "/"), Verifier: v})
	}
	return out
}

// Quorum is how many witnesses must cosign a head: witness_quorum, or all of them.
func (c *Config) Quorum() int {
	if c.Ledger.WitnessQuorum > 0 {
		return c.Ledger.WitnessQuorum
	}
	return len(c.Witnesses)
}

type MetricsConfig struct {
	Listen string `toml:"listen"` // loopback host:port, "" for none
}

var providerNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Load reads and validates the configuration file; every problem is reported at once, as
// file:key: what is wrong; the fix.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; write one from deploy/sealrun.toml (make install does)", path, fileio.Cause(err))
	}
	return Parse(path, data)
}

// Parse parses and validates configuration data read from path.
func Parse(path string, data []byte) (*Config, error) {
	c := &Config{File: path}
	md, err := toml.Decode(string(data), c)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	var problems []string
	for _, k := range md.Undecoded() {
		problems = append(problems, fmt.Sprintf("%s:%s: unknown key; see deploy/sealrun.toml for every key", path, k.String()))
	}
	c.defaults()
	if err := c.Validate(); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if len(problems) > 0 {
		return nil, &Error{Path: path, Problems: problems}
	}
	return c, nil
}

// Error lists every problem of a configuration file.
type Error struct {
	Path     string
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "\n") }

func (c *Config) defaults() {
	if c.StateDir == "" {
		c.StateDir = "/var/lib/sealrun"
	}
	if c.RunDir == "" {
		c.RunDir = "/run/sealrun"
	}
	if c.Runtime == "" {
		c.Runtime = "runc"
	}
	if c.Socket == "" {
		c.Socket = filepath.Join(c.RunDir, "sealrun.sock")
	}
	if c.Group == "" {
		c.Group = "sealrun"
	}
	if c.Resources.Concurrency == 0 {
		c.Resources.Concurrency = 1
	}
	self, _ := os.Executable()
	dir := filepath.Dir(self)
	if c.Runner == "" {
		c.Runner = filepath.Join(dir, "runner")
	}
	if c.Hook == "" {
		c.Hook = filepath.Join(dir, "sealrun-netns-hook")
	}
	for name, p := range c.Providers {
		p.Name = name
		c.Providers[name] = p
	}
}

// Validate reports every problem at once, one per line, as file:key: problem; fix. It is long on
// purpose: one rule per key, in the order of the file's documentation, read top to bottom.
func (c *Config) Validate() error {
	var out []string
	bad := func(key, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s:%s: %s", c.File, key, fmt.Sprintf(format, args...)))
	}
	for _, d := range []struct{ key, v string }{{"state_dir", c.StateDir}, {"run_dir", c.RunDir}, {"socket", c.Socket}} {
		if !filepath.IsAbs(d.v) {
			bad(d.key, "%q is not an absolute path", d.v)
		}
	}
	for _, b := range []struct{ key, v string }{{"runner", c.Runner}, {"hook", c.Hook}} {
		if st, err := os.Stat(b.v); err != nil {
			bad(b.key, "%s: %v; build it (make build) or give its path", b.v, fileio.Cause(err))
		} else if st.Mode()&0o111 == 0 {
			bad(b.key, "%s is not executable", b.v)
		}
	}
	switch {
	case c.Keys.Signing == "":
		bad("keys.signing", "missing; give the attestation signing key (sealrun keys generate --out /etc/sealrun/keys)")
	case strings.HasPrefix(c.Keys.Signing, "tpm:"):
		// The signing key of the host's TPM (sealrun tpm enroll; docs/TPM.md): the device must be
		// there; the key is made and checked against keys.public at start.
		if dev := strings.TrimPrefix(c.Keys.Signing, "tpm:"); dev == "" {
			bad("keys.signing", "tpm: names no device; give tpm:/dev/tpmrm0")
		} else if _, err := os.Stat(dev); err != nil {
			bad("keys.signing", "TPM %s: %v (a host's TPM is /dev/tpmrm0; its kernel module is tpm_tis or tpm_crb)", dev, fileio.Cause(err))
		}
	case !strings.Contains(c.Keys.Signing, "://"):
		if st, err := os.Stat(c.Keys.Signing); err != nil {
			bad("keys.signing", "%s: %v", c.Keys.Signing, fileio.Cause(err))
		} else if st.Mode().Perm()&0o077 != 0 {
			bad("keys.signing", "%s is mode %v: readable beyond its owner; chmod 0600 %s", c.Keys.Signing, st.Mode().Perm(), c.Keys.Signing)
		}
	}
	if c.Keys.Public == "" {
		bad("keys.public", "missing; give the public half of keys.signing (verifiers need it)")
	} else if _, err := os.Stat(c.Keys.Public); err != nil {
		bad("keys.public", "%s: %v", c.Keys.Public, fileio.Cause(err))
	}
	if _, ok := c.Providers[NoProvider]; ok {
		bad("providers."+NoProvider, "%q is built in (runs of a scripted scaffold, with no model); name the provider otherwise", NoProvider)
	}
	if _, ok := c.Providers[HumanProvider]; ok {
		bad("providers."+HumanProvider, "%q is built in (human runs: agent human/HANDLE); name the provider otherwise", HumanProvider)
	}
	if p, ok := c.Providers[ScriptedProvider]; ok {
		if u, err := url.Parse(p.BaseURL); err == nil && !isLoopback(u.Hostname()) {
			bad("providers."+ScriptedProvider+".base_url", "%q is not on loopback: the name %q is kept for a scripted model on this machine (the leaderboard labels its rows scripted); name a real provider otherwise", p.BaseURL, ScriptedProvider)
		}
	}
	names := make([]string, 0, len(c.Providers))
	for n := range c.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !providerNameRE.MatchString(n) {
			bad("providers."+n, "the provider name must be lowercase letters, digits, '-' or '_' (it is the first part of --agent NAME/model)")
		}
		if err := c.Providers[n].Validate(c.File + ":providers." + n); err != nil {
			out = append(out, strings.Split(err.Error(), "\n")...)
		}
	}
	c.Prices.validate(c.Providers, bad)
	seen := map[string]bool{}
	for i, g := range c.Resources.GPUs {
		if !strings.Contains(g, "=") || strings.ContainsAny(g, " \t") {
			bad(fmt.Sprintf("resources.gpus[%d]", i), "%q is not a CDI device name (vendor/class=name, as sealrun doctor lists them)", g)
		}
		if seen[g] {
			bad(fmt.Sprintf("resources.gpus[%d]", i), "%q is listed twice", g)
		}
		seen[g] = true
	}
	rtKeys := make([]string, 0, len(c.Runtimes))
	for k := range c.Runtimes {
		rtKeys = append(rtKeys, k)
	}
	sort.Strings(rtKeys)
	for _, k := range rtKeys {
		switch v := c.Runtimes[k]; {
		case k != "controller" && k != "runner" && k != "grader":
			bad("runtimes."+k, "not a role; give controller, runner or grader")
		case v == "" || strings.ContainsAny(v, " \t\n"):
			bad("runtimes."+k, "%q: give a runtime binary (runc, crun or runsc) or its path", v)
		}
	}
	if p := c.CgroupParent; p != "" && (!strings.HasPrefix(p, "/") || filepath.Clean(p) != p || p == "/") {
		bad("cgroup_parent", "%q: give an absolute, clean cgroup path below the root (like /sealrun), or leave it out to let sealrund place runs below its delegated cgroup", p)
	}
	if c.Resources.CPUs < 0 {
		bad("resources.cpus", "%d; give 0 (all) or more", c.Resources.CPUs)
	}
	for _, b := range []struct {
		key string
		v   int64
	}{{"resources.workspace_read_bps", c.Resources.WorkspaceReadBPS}, {"resources.workspace_write_bps", c.Resources.WorkspaceWriteBPS}} {
		if b.v < 0 || (b.v > 0 && b.v < 1<<20) {
			bad(b.key, "%d; give 0 (no cap) or at least 1048576 (1 MiB a second)", b.v)
		}
	}
	if c.Resources.Concurrency < 1 || c.Resources.Concurrency > 64 {
		bad("resources.concurrency", "%d; give 1 to 64", c.Resources.Concurrency)
	}
	if l := c.Metrics.Listen; l != "" && !strings.HasPrefix(l, "127.0.0.1:") && !strings.HasPrefix(l, "[::1]:") && !strings.HasPrefix(l, "localhost:") {
		bad("metrics.listen", "%q is not a loopback address; metrics are served on loopback only (127.0.0.1:9464)", l)
	}
	if o := c.Ledger.Origin; o != "" && (len(o) > 200 || strings.ContainsAny(o, " +\t\r\n") || strings.ContainsFunc(o, unicode.IsControl)) {
		bad("ledger.origin", "%q is not a log name (1 to 200 printable characters, no spaces, no '+'); for example sealrun.ledger/gpu-node-07", o)
	}
	wnames, wkeys := map[string]bool{}, map[string]bool{}
	for i, w := range c.Witnesses {
		key := fmt.Sprintf("witnesses[%d]", i)
		if w.Name == "" || strings.ContainsAny(w.Name, " \t\n") {
			bad(key+".name", "%q: give the witness a name without spaces (logs and sealrun doctor use it)", w.Name)
		} else if wnames[w.Name] {
			bad(key+".name", "%q is listed twice", w.Name)
		}
		wnames[w.Name] = true
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			bad(key+".url", "%q is not an http(s) URL of a witness's submission prefix (sealrun posts to <url>/add-checkpoint), like https://witness.example.org", w.URL)
		} else if u.User != nil {
			bad(key+".url", "%q carries a user name or password: sealrund sends a witness its heads and nothing else; give the URL without them", u.Redacted())
		}
		if v, err := witness.NewVerifier(w.Key); err != nil {
			bad(key+".key", "%v", err)
		} else if wkeys[v.Name()] {
			bad(key+".key", "the key %s is listed twice: each witness counts once toward the quorum", v.Name())
		} else {
			wkeys[v.Name()] = true
		}
	}
	if ts := c.Timestamp; ts.URL != "" || ts.Chain != "" {
		if u, err := url.Parse(ts.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("timestamp.url", "%q is not the http(s) URL of an RFC 3161 timestamp authority", ts.URL)
		}
		if ts.Chain == "" {
			bad("timestamp.chain", "missing; give the authority's certificate chain (PEM, as it publishes it), which its answers must chain to")
		} else if _, err := attest.LoadTSAChain(ts.Chain); err != nil {
			bad("timestamp.chain", "%v", err)
		}
	}
	if t := c.TPM; t.Enabled() {
		if !strings.HasPrefix(c.Keys.Signing, "tpm:") {
			bad("tpm", "quotes runs with the TPM whose signing key signs them: set keys.signing = \"tpm:/dev/tpmrm0\" (sealrun tpm enroll prints the lines), or remove [tpm]")
		}
		if t.Enrollment == "" {
			bad("tpm.enrollment", "missing; give the enrollment.json sealrun tpm enroll wrote (readers check quotes against it, and sealrund checks the TPM is its)")
		} else if _, err := os.Stat(t.Enrollment); err != nil {
			bad("tpm.enrollment", "%s: %v (sealrun tpm enroll --device D --out DIR writes it)", t.Enrollment, fileio.Cause(err))
		}
		if p := t.MeasurePCR(); p != 23 && (p < 8 || p > 15) {
			bad("tpm.sealrund_pcr", "%d: give 8 to 15 or 23 (0 to 7 are the firmware's, 16 the debug PCR, 17 to 22 the dynamic root's; 23, the default, is one nothing else on a Linux host measures into)", p)
		}
		seen := map[int]bool{}
		for _, p := range t.PCRs {
			if p < 0 || p > 23 || seen[p] {
				bad("tpm.pcrs", "%v: each PCR 0 to 23, once", t.PCRs)
				break
			}
			seen[p] = true
		}
		if len(t.PCRs) > 0 && !seen[t.MeasurePCR()] {
			bad("tpm.pcrs", "%v leaves out PCR %d, where sealrund measures itself: a quote without it says nothing of sealrund; add it", t.PCRs, t.MeasurePCR())
		}
	}
	switch q := c.Ledger.WitnessQuorum; {
	case q < 0:
		bad("ledger.witness_quorum", "%d; give 1 to the number of [[witnesses]] (%d), or leave it out for all of them", q, len(c.Witnesses))
	case q > len(c.Witnesses):
		bad("ledger.witness_quorum", "%d, but only %d [[witnesses]] are listed: a head could never be witnessed; list more witnesses or lower it", q, len(c.Witnesses))
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "\n"))
}

// CDIDirs are the directories sealrund reads CDI specs from.
func (c *Config) CDIDirs() []string {
	if len(c.Resources.CDIDirs) > 0 {
		return c.Resources.CDIDirs
	}
	return []string{"/etc/cdi", "/var/run/cdi"}
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// RoleRuntimes is [runtimes] as the sandbox takes it.
func (c *Config) RoleRuntimes() map[sandbox.Role]string {
	out := map[sandbox.Role]string{}
	for k, v := range c.Runtimes {
		out[sandbox.Role(k)] = v
	}
	return out
}
