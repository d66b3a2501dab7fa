package scaffolds

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/BurntSushi/toml"
)

// Every directory reads: its recipe, its entrypoint and its config template; each scaffold's
// image key and name follow from its name.
func TestScaffoldsLoad(t *testing.T) {
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if got := strings.Join(Names(), ","); got != "claude,codex,gemini,opencode,qwen" {
		t.Errorf("scaffolds %s", got)
	}
	for _, s := range All() {
		if s.ImageKey() != "controller-"+s.Name || !strings.HasPrefix(string(s.Script()), "#!/bin/bash\n") || len(s.ConfigSHA256()) != 64 {
			t.Errorf("%s: image %s, script %.20q, config %s", s.Name, s.ImageKey(), s.Script(), s.ConfigSHA256())
		}
		if got, ok := ByImage(s.ImageKey()); !ok || got != s {
			t.Errorf("%s: ByImage", s.Name)
		}
	}
}

// A scaffold's memory is whole MiB or GiB; anything else is refused naming the key and the form.
func TestScaffoldMemory(t *testing.T) {
	if s, _ := Lookup("qwen"); s.MemoryBytes != 2<<30 {
		t.Errorf("qwen: %d bytes", s.MemoryBytes)
	}
	defer func(f fs.FS) { files = f }(files)
	for mem, want := range map[string]string{`"1536MiB"`: "", `"2GiB"`: "", `""`: `memory ""`, `"2GB"`: `memory "2GB"`, `"0GiB"`: `memory "0GiB"`, `"-1GiB"`: `memory "-1GiB"`,
		`"99999999999GiB"`: `memory "99999999999GiB"`, `"1.5GiB"`: `memory "1.5GiB"`, `2048`: "incompatible types", `"2GiB\n"`: `memory "2GiB\n"`} {
		toml := "name = \"x\"\nversion = \"1\"\nkinds = [\"openai\"]\nentrypoint = \"entry.sh\"\nconfig = \"c.json\"\nconfig_env = \"C\"\nmemory = " + mem +
			"\n[[npm]]\npackage = \"p\"\nversion = \"1\"\nsha256 = \"" + strings.Repeat("a", 64) + "\"\ntake = \"package/\"\nto = \"/opt/p\"\n"
		files = fstest.MapFS{"x/scaffold.toml": {Data: []byte(toml)}, "x/entry.sh": {Data: []byte("#!/bin/bash\n")}, "x/c.json": {Data: []byte("{}")}}
		s, err := read("x")
		switch {
		case want == "" && (err != nil || s.MemoryBytes == 0):
			t.Errorf("memory = %s: %v, %d bytes", mem, err, s.MemoryBytes)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("memory = %s: %v; want an error naming %s", mem, err, want)
		}
	}
}

// Each scaffold's config, rendered for a run of each kind it speaks, is its format's (JSON or
// TOML), names the gateway and the model, and the effort only when the run has one.
func TestRender(t *testing.T) {
	for _, s := range All() {
		for _, kind := range s.Kinds {
			for _, effort := range []string{"high", ""} {
				env, err := s.Render(Run{Kind: kind, Gateway: "http://10.88.0.1:8080", Model: "model-x", Effort: effort})
				if err != nil {
					t.Fatalf("%s %s %q: %v", s.Name, kind, effort, err)
				}
				cfg, ok := strings.CutPrefix(env[0], s.ConfigEnv+"=")
				if !ok {
					t.Fatalf("%s: first variable %q", s.Name, env[0])
				}
				var v any
				if strings.HasSuffix(s.Config, ".toml") {
					_, err = toml.Decode(cfg, &v)
				} else {
					err = json.Unmarshal([]byte(cfg), &v)
				}
				if err != nil || !strings.Contains(cfg, "model-x") || strings.Contains(cfg, "@") && !strings.Contains(cfg, "@ai-sdk") {
					t.Errorf("%s %s %q: %v\n%s", s.Name, kind, effort, err, cfg)
				}
				if (effort == "") == strings.Contains(cfg, `"high"`) && s.Name != "opencode" {
					if strings.Contains(string(s.Template()), "@EFFORT@") {
						t.Errorf("%s %s %q: effort in the config: %s", s.Name, kind, effort, cfg)
					}
				}
				for _, e := range env[1:] {
					if strings.Contains(e, "@") {
						t.Errorf("%s: %q not rendered", s.Name, e)
					}
				}
			}
		}
	}
	codex, _ := Lookup("codex")
	env, _ := codex.Render(Run{Kind: "openai", Gateway: "http://10.88.0.1:8080/", Model: "gpt-x"})
	if !strings.Contains(env[0], `base_url = "http://10.88.0.1:8080/v1"`) || strings.Contains(env[0], "model_reasoning_effort") {
		t.Errorf("codex without effort:\n%s", env[0])
	}
	claude, _ := Lookup("claude")
	env, _ = claude.Render(Run{Kind: "anthropic", Gateway: "http://10.88.0.1:8080", Model: "claude-x"})
	if strings.Join(env[1:], " ") != "ANTHROPIC_MODEL=claude-x ANTHROPIC_SMALL_FAST_MODEL=claude-x ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-x ANTHROPIC_DEFAULT_SONNET_MODEL=claude-x ANTHROPIC_DEFAULT_OPUS_MODEL=claude-x" {
		t.Errorf("claude's variables %q", env[1:])
	}
}

// What a config cannot hold, and a provider kind a scaffold does not speak, are refused naming
// the fix.
func TestRenderRefusals(t *testing.T) {
	for _, c := range []struct{ name, kind, model, effort, want string }{
		{"opencode", "none", "m", "", `needs a model provider of kind openai or anthropic; this agent's provider is of kind "none"`},
		{"codex", "anthropic", "m", "", "needs a model provider of kind openai"},
		{"claude", "openai", "m", "", "of kind anthropic"},
		{"gemini", "openai", "m", "", "of kind google"},
		{"qwen", "google", "m", "", "of kind openai"},
		{"codex", "openai", `gpt"x`, "", `cannot hold model "gpt\"x"`},
		{"codex", "openai", "gpt x", "", `cannot hold model "gpt x"`},
		{"claude", "anthropic", "", "", `cannot hold model ""`},
		{"gemini", "google", strings.Repeat("m", 129), "", "at most 128"},
		{"qwen", "openai", "m", "hi\ngh", `cannot hold effort "hi\ngh"`},
	} {
		s, _ := Lookup(c.name)
		if _, err := s.Render(Run{Kind: c.kind, Gateway: "http://10.88.0.1:8080", Model: c.model, Effort: c.effort}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %q %q: %v; want %q", c.name, c.kind, c.model, c.effort, err, c.want)
		}
	}
}

// opencode's config as it was: the provider package by kind, the gateway, the model, the effort in
// the model's options (OpenAI-compatible only), webfetch denied.
func TestOpencodeRender(t *testing.T) {
	s, _ := Lookup("opencode")
	env, err := s.Render(Run{Kind: "openai", Gateway: "http://10.88.0.1:8080/", Model: "gpt-x", Effort: "high"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model      string            `json:"model"`
		Permission map[string]string `json:"permission"`
		Provider   map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
			} `json:"options"`
			Models map[string]struct {
				Options map[string]string `json:"options"`
			} `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(env[0], "OPENCODE_CONFIG_CONTENT=")), &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["sealrun"]
	if cfg.Model != "sealrun/gpt-x" || p.NPM != "@ai-sdk/openai-compatible" || p.Options.BaseURL != "http://10.88.0.1:8080/v1" ||
		p.Models["gpt-x"].Options["reasoningEffort"] != "high" || cfg.Permission["webfetch"] != "deny" {
		t.Errorf("config %s", env[0])
	}
	a, err := s.Render(Run{Kind: "anthropic", Gateway: "http://10.88.0.1:8080", Model: "claude-x", Effort: "high"})
	if err != nil || !strings.Contains(a[0], `"@ai-sdk/anthropic"`) || strings.Contains(a[0], "reasoningEffort") || !strings.Contains(a[0], `"baseURL":"http://10.88.0.1:8080/v1"`) {
		t.Errorf("anthropic: %v %s", err, a)
	}
	if n, err := s.Render(Run{Kind: "openai", Gateway: "http://10.88.0.1:8080", Model: "gpt-x"}); err != nil || strings.Contains(n[0], "reasoningEffort") {
		t.Errorf("no effort: %v %s", err, n)
	}
}
