package controller

import (
	"encoding/json"
	"testing"

	"github.com/sealrun/sealrun/audit"
)

// FuzzGatewayPin: whatever body the scaffold sends, the request the gateway forwards is one JSON
// object whose model (and reasoning effort on chat completions) is the run's agent's, or it is
// refused; it never panics. Duplicate keys are resolved by re-encoding: the provider sees one.
func FuzzGatewayPin(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-x","messages":[]}`, `{"model":"other"}`, `{"model":"other","model":"gpt-x"}`,
		`{"model":"gpt-x","reasoning_effort":"low"}`, `{"reasoning":{"effort":"high"}}`, `{"reasoning":3}`,
		`[]`, `null`, `{"model":1}`, `{}`,
	} {
		f.Add("/v1/chat/completions", []byte(s))
		f.Add("/v1/responses", []byte(s))
	}
	g, err := NewGateway(ProviderConfig{Name: "openai", Kind: KindOpenAI, BaseURL: "https://x/v1", KeyFile: keyFile(f, "k")},
		Agent{Provider: "openai", Model: "gpt-x", Effort: "high"}, &audit.Log{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		out, reason := g.pin(path, body)
		if reason != "" {
			if out != nil {
				t.Fatal("a refusal with a body")
			}
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("forwarded body is not a JSON object: %v", err)
		}
		var model string
		if json.Unmarshal(m["model"], &model) != nil || model != "gpt-x" {
			t.Fatalf("forwarded model %s", m["model"])
		}
		if path == "/v1/chat/completions" {
			var e string
			if json.Unmarshal(m["reasoning_effort"], &e) != nil || e != "high" {
				t.Fatalf("forwarded reasoning_effort %s", m["reasoning_effort"])
			}
		}
	})
}

// FuzzParseUsage: provider responses (JSON or server-sent events) never panic the usage reader.
func FuzzParseUsage(f *testing.F) {
	f.Add([]byte(`{"usage":{"prompt_tokens":3,"completion_tokens":4}}`), false)
	f.Add([]byte("data: {\"usage\":{\"input_tokens\":1}}\n\ndata: [DONE]\n\n"), true)
	f.Add([]byte("data: {"), true)
	f.Fuzz(func(t *testing.T, body []byte, streamed bool) {
		parseUsage(body, streamed)
	})
}
