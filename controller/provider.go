package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/sealrun/sealrun/internal/opt"
)

// Provider kinds: the API shapes the gateway knows.
const (
	KindOpenAI    = "openai"    // any OpenAI-compatible API: chat completions, responses
	KindAnthropic = "anthropic" // Anthropic messages
	KindGoogle    = "google"    // Google's Gemini API: generateContent, streamGenerateContent
	// KindNone is no model at all: the provider of a scripted scaffold's runs (the demo agent).
	// Its gateway refuses every request.
	KindNone = "none"
)

// NoProvider is the built-in provider of kind none (agent identity none/MODEL).
var NoProvider = ProviderConfig{Name: KindNone, Kind: KindNone}

// ProviderConfig is one [providers.NAME] table of the daemon config.
type ProviderConfig struct {
	Name    string `toml:"-"`
	Kind    string `toml:"kind"`     // openai, anthropic or google (default: the table's name when it is one)
	BaseURL string `toml:"base_url"` // https://api.example.com/v1 (openai), https://api.example.com (anthropic, google)
	KeyFile string `toml:"key_file"` // 0600, owned by root; never enters a container ("none": no key)
	Retries int    `toml:"retries"`  // tries after the first on 429, 5xx, resets, time-outs (default 30)
}

// NoKey is the key_file of a model server that takes no key (a vLLM, SGLang or Ollama server on
// the operator's network): the gateway sends it no credential.
const NoKey = "none"

// DefaultRetries is the seed methodology's count.
const DefaultRetries = 30

// Validate reports every problem of the provider table at once, as where: what; fix.
func (p ProviderConfig) Validate(where string) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", where, key, fmt.Sprintf(format, args...)))
	}
	if p.kind() == KindNone {
		if p.BaseURL != "" || p.KeyFile != "" {
			bad("kind", "a provider of kind none has no base_url and no key_file")
		}
		return errors.Join(errs...)
	}
	switch p.kind() {
	case KindOpenAI, KindAnthropic, KindGoogle:
	default:
		bad("kind", "%q is not a provider kind; use openai (any OpenAI-compatible API), anthropic or google (the Gemini API)", p.Kind)
	}
	if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		bad("base_url", "%q is not an http(s) URL with a host; write it as https://api.example.com/v1", p.BaseURL)
	} else if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		bad("base_url", "%q has a query, fragment or user info; give scheme, host and path only", p.BaseURL)
	}
	if p.KeyFile == "" {
		bad("key_file", "missing; give the file holding the API key (mode 0600, owned by root), or \"none\" for a model server that takes no key")
	} else if p.KeyFile == NoKey {
		// a server that takes no key: nothing to read
	} else if fi, err := os.Stat(p.KeyFile); err != nil {
		bad("key_file", "%v; create it with the API key on one line (install -m 0600 /dev/stdin %s)", err, p.KeyFile)
	} else if !fi.Mode().IsRegular() {
		bad("key_file", "%s is not a regular file", p.KeyFile)
	} else if fi.Mode().Perm()&0o077 != 0 {
		bad("key_file", "%s is mode %v: readable beyond its owner; chmod 0600 %s", p.KeyFile, fi.Mode().Perm(), p.KeyFile)
	}
	if p.Retries < 0 || p.Retries > 1000 {
		bad("retries", "%d; give 0 to 1000 (default %d)", p.Retries, DefaultRetries)
	}
	return errors.Join(errs...)
}

func (p ProviderConfig) kind() string {
	if p.Kind == "" {
		return p.Name
	}
	return p.Kind
}

// readKey reads the provider key: the file's first line, trimmed.
func readKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return "", fmt.Errorf("provider key %s is not readable by the daemon: %w", path, err)
		}
		return "", fmt.Errorf("provider key %s: %w", path, err)
	}
	key, _, _ := strings.Cut(string(b), "\n")
	key = strings.TrimSpace(key)
	if key == "" {
		return "", fmt.Errorf("provider key %s is empty; put the API key on its first line", path)
	}
	return key, nil
}

// Agent is a run's agent identity: MODEL[@EFFORT] on the CLI, with the provider it goes to.
type Agent struct {
	Provider string // the provider table's name ("openai")
	Model    string // the provider's model id ("gpt-x")
	Effort   string // reasoning effort ("high"), "" when the row has none
}

// ParseAgent parses PROVIDER/MODEL[@EFFORT].
func ParseAgent(s string) (Agent, error) {
	prov, rest, ok := strings.Cut(s, "/")
	model, effort, hasAt := strings.Cut(rest, "@")
	valid := func(x string) bool {
		if x == "" || len(x) > 128 {
			return false
		}
		for _, c := range x {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:-/", c)) {
				return false
			}
		}
		return true
	}
	if !ok || !valid(prov) || strings.Contains(prov, "/") || !valid(model) || (hasAt && !valid(effort)) {
		return Agent{}, opt.Field("agent", fmt.Sprintf("%q: write PROVIDER/MODEL[@EFFORT], for example openai/gpt-x@high", s))
	}
	return Agent{Provider: prov, Model: model, Effort: effort}, nil
}

func (a Agent) String() string {
	s := a.Provider + "/" + a.Model
	if a.Effort != "" {
		s += "@" + a.Effort
	}
	return s
}
