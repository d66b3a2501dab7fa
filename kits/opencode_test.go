package kits

import (
	"encoding/json"
	"strings"
	"testing"
)

// The rendered config: provider package by kind, the gateway, the model, the effort in the
// model's options (OpenAI-compatible only), webfetch denied.
func TestOpencodeConfig(t *testing.T) {
	s, err := OpencodeConfig("openai", "http://10.88.0.1:8080/", "gpt-x", "high")
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
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["sealrun"]
	if cfg.Model != "sealrun/gpt-x" || p.NPM != "@ai-sdk/openai-compatible" || p.Options.BaseURL != "http://10.88.0.1:8080/v1" ||
		p.Models["gpt-x"].Options["reasoningEffort"] != "high" || cfg.Permission["webfetch"] != "deny" {
		t.Errorf("config %s", s)
	}
	a, err := OpencodeConfig("anthropic", "http://10.88.0.1:8080", "claude-x", "high")
	if err != nil || !strings.Contains(a, `"@ai-sdk/anthropic"`) || strings.Contains(a, "reasoningEffort") {
		t.Errorf("anthropic: %v %s", err, a)
	}
	if n, err := OpencodeConfig("openai", "http://10.88.0.1:8080", "gpt-x", ""); err != nil || strings.Contains(n, "reasoningEffort") {
		t.Errorf("no effort: %v %s", err, n)
	}
}

// What a config cannot hold, and a provider kind opencode lacks, are refused naming the fix.
func TestOpencodeConfigRefusals(t *testing.T) {
	for _, c := range []struct{ kind, model, effort, want string }{
		{"none", "m", "", `this agent's provider is of kind "none"`},
		{"gemini", "m", "", `of kind "gemini"`},
		{"openai", `gpt"x`, "", `cannot hold model "gpt\"x"`},
		{"openai", "gpt x", "", `cannot hold model "gpt x"`},
		{"openai", "gpt@x", "", `cannot hold model "gpt@x"`},
		{"openai", "", "", `cannot hold model ""`},
		{"openai", strings.Repeat("m", 129), "", "at most 128"},
		{"openai", "m", "hi\ngh", `cannot hold effort "hi\ngh"`},
	} {
		if _, err := OpencodeConfig(c.kind, "http://10.88.0.1:8080", c.model, c.effort); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q %q: %v; want %q", c.kind, c.model, c.effort, err, c.want)
		}
	}
}
