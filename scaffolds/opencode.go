package scaffolds

import (
	"encoding/json"
	"fmt"
	"strings"
)

// opencode's config names its provider package by the provider's kind, its base URL ends in /v1
// for either kind (the AI SDK's Anthropic provider appends /messages to it), and it carries the
// reasoning effort in the model's options only where the API has one (OpenAI-compatible).
func init() {
	renderers["opencode"] = func(s *Scaffold, r Run, fill func(string) string) (string, error) {
		npm := map[string]string{"openai": "@ai-sdk/openai-compatible", "anthropic": "@ai-sdk/anthropic"}[r.Kind]
		var cfg map[string]any
		text := strings.ReplaceAll(string(s.template), "@BASE_URL@", strings.TrimRight(r.Gateway, "/")+"/v1")
		if err := json.Unmarshal([]byte(strings.ReplaceAll(fill(text), "@NPM@", npm)), &cfg); err != nil {
			return "", fmt.Errorf("render the opencode config: %w", err)
		}
		m := cfg["provider"].(map[string]any)["sealrun"].(map[string]any)["models"].(map[string]any)[r.Model].(map[string]any)
		if r.Kind != "openai" || r.Effort == "" {
			// No reasoning effort to send: drop the option rather than send an empty one.
			delete(m, "options")
			m["reasoning"] = r.Effort != ""
		}
		out, err := json.Marshal(cfg)
		return string(out), err
	}
}
