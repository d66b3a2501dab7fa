package kits

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
)

// OpencodeConfig renders the opencode scaffold's config (opencode/opencode.json, whose SHA-256
// is the [scaffold] config_sha256 of a track that pins opencode) for one run: the provider
// package for the agent's provider kind, the gateway as base URL, the run's model, and its
// reasoning effort on every request (OpenAI-compatible providers; Anthropic's API has no effort
// level, so the row's effort is only recorded). The error names what cannot be rendered.
func OpencodeConfig(kind, gateway, model, effort string) (string, error) {
	npm := map[string]string{"openai": "@ai-sdk/openai-compatible", "anthropic": "@ai-sdk/anthropic"}[kind]
	if npm == "" {
		return "", fmt.Errorf("the opencode scaffold needs a model provider of kind openai or anthropic; this agent's provider is of kind %q: run it with an agent of a configured model provider", kind)
	}
	for what, v := range map[string]string{"model": model, "effort": effort} {
		if len(v) > 128 || strings.ContainsAny(v, "\"\\@\x00\n\r\t ") || (what == "model" && v == "") {
			return "", fmt.Errorf("the opencode config cannot hold %s %q: use letters, digits and . _ : - / only (at most 128)", what, v)
		}
	}
	tmpl, err := fs.ReadFile(Sources, "opencode/opencode.json")
	if err != nil {
		return "", err
	}
	r := strings.NewReplacer("@NPM@", npm, "@BASE_URL@", strings.TrimRight(gateway, "/")+"/v1", "@MODEL@", model, "@EFFORT@", effort)
	var cfg map[string]any
	if err := json.Unmarshal([]byte(r.Replace(string(tmpl))), &cfg); err != nil {
		return "", fmt.Errorf("render the opencode config: %w", err)
	}
	if kind != "openai" || effort == "" {
		// No reasoning effort to send: drop the option rather than send an empty one.
		m := cfg["provider"].(map[string]any)["sealrun"].(map[string]any)["models"].(map[string]any)[model].(map[string]any)
		delete(m, "options")
		m["reasoning"] = effort != ""
	}
	out, err := json.Marshal(cfg)
	return string(out), err
}
