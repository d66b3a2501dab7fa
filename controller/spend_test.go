package controller

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/policy"
)

// Each API's cache counts, as its providers document them: OpenAI counts cached tokens inside
// prompt_tokens (input_tokens), Anthropic apart from input_tokens (reads and writes), Gemini
// inside promptTokenCount.
func TestUsageCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		body     string
		streamed bool
		want     audit.Usage
	}{
		{"openai chat", `{"usage":{"prompt_tokens":1200,"completion_tokens":80,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":30}}}`, false,
			audit.Usage{Prompt: 1200, Completion: 80, Reasoning: 30, CachedPrompt: 1024}},
		{"openai chat streamed", "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":512}}}\n\ndata: [DONE]\n\n", true,
			audit.Usage{Prompt: 900, Completion: 7, CachedPrompt: 512}},
		{"openai responses streamed", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":3000,\"output_tokens\":200,\"input_tokens_details\":{\"cached_tokens\":2048},\"output_tokens_details\":{\"reasoning_tokens\":150}}}}\n\n", true,
			audit.Usage{Prompt: 3000, Completion: 200, Reasoning: 150, CachedPrompt: 2048}},
		{"anthropic", `{"usage":{"input_tokens":50,"cache_read_input_tokens":4000,"cache_creation_input_tokens":600,"output_tokens":90}}`, false,
			audit.Usage{Prompt: 4650, Completion: 90, CachedPrompt: 4000, CacheWrite: 600}},
		{"anthropic streamed", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"cache_read_input_tokens\":3000,\"cache_creation_input_tokens\":0,\"output_tokens\":1}}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":77}}\n\n", true,
			audit.Usage{Prompt: 3012, Completion: 77, CachedPrompt: 3000}},
		{"gemini", `{"usageMetadata":{"promptTokenCount":5000,"cachedContentTokenCount":4096,"candidatesTokenCount":40,"thoughtsTokenCount":60}}`, false,
			audit.Usage{Prompt: 5000, Completion: 100, Reasoning: 60, CachedPrompt: 4096}},
	} {
		if got := parseUsage([]byte(tc.body), tc.streamed); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	u := audit.Usage{Prompt: 4650, Completion: 90, Reasoning: 10, CachedPrompt: 4000, CacheWrite: 600}
	if got := u.Tokens(); got != (policy.Tokens{Input: 4650, CachedInput: 4000, CacheWrite: 600, Output: 90, Reasoning: 10}) {
		t.Errorf("tokens %+v", got)
	}
}

// A track's max_tokens: the requests until the bound is reached are answered; the next is refused
// 403 with the reason in the body the agent reads, and the refusal is audited. The model listing
// is still answered (it costs nothing).
func TestGatewayTokenBound(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x", 1, WithSpendLimit(250, 0, nil))
	x.prov.Default = scriptedmodel.Response{Body: scriptedmodel.ChatCompletion("ok", 100, 50)} // 150 a request
	for i := range 2 {
		if resp, body := x.do("POST", "/v1/chat/completions", `{"messages":[]}`, nil); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i+1, resp.StatusCode, body)
		}
		x.records() // the spend is counted when the entry is written
	}
	resp, body := x.do("POST", "/v1/chat/completions", `{"messages":[]}`, nil)
	if resp.StatusCode != 403 || !strings.Contains(body, "token budget is spent: 300 tokens used (200 in, 100 out) of the track's max_tokens 250") || !strings.Contains(body, "runner finalize") {
		t.Fatalf("past the bound: %d %s", resp.StatusCode, body)
	}
	if n := len(x.prov.Requests()); n != 2 {
		t.Errorf("the provider saw %d requests; the refused one must not reach it", n)
	}
	if resp, _ := x.do("GET", "/v1/models", "", nil); resp.StatusCode != 200 {
		t.Errorf("model listing past the bound: %d", resp.StatusCode)
	}
	rs := x.records()
	if r := rs[2]; r.Status != 403 || !strings.Contains(r.Refused, "max_tokens 250") {
		t.Errorf("audit of the refusal: %+v", r)
	}
	if st := x.g.Stats(); st.Tokens.Total() != 300 || st.Refused != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A track's max_cost, at the host's price: cached input is priced apart.
func TestGatewayCostBound(t *testing.T) {
	price := &policy.Price{Currency: "USD", Input: 2, CachedInput: 0.5, CacheWrite: 2, Output: 8, Taken: "2026-11-01"}
	x := newGW(t, KindOpenAI, "openai/gpt-x", 1, WithSpendLimit(0, 0.009, price))
	// 1000 in (800 cached), 500 out: 200*2 + 800*0.5 + 500*8 = 4800 per million: 0.0048 USD.
	x.prov.Default = scriptedmodel.Response{Body: `{"choices":[{"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1000,"completion_tokens":500,"prompt_tokens_details":{"cached_tokens":800}}}`}
	for i := range 3 {
		resp, body := x.do("POST", "/v1/chat/completions", `{"messages":[]}`, nil)
		x.records()
		if want := 200; i == 2 {
			if resp.StatusCode != 403 || !strings.Contains(body, "cost budget is spent: 0.0096 USD used of the track's max_cost 0.009 USD") {
				t.Errorf("third request: %d %s", resp.StatusCode, body)
			}
		} else if resp.StatusCode != want {
			t.Errorf("request %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if st := x.g.Stats(); st.Cost != 0.0096 {
		t.Errorf("cost %v", st.Cost)
	}
	if _, err := NewGateway(ProviderConfig{Name: "openai", BaseURL: "https://x/v1", KeyFile: keyFile(t, "k")}, Agent{Provider: "openai", Model: "m"},
		x.log, WithSpendLimit(0, 1, nil)); err == nil || !strings.Contains(err.Error(), "needs the model's price") {
		t.Errorf("a cost bound without a price: %v", err)
	}
}

// An OpenAI-compatible model server on the operator's network (vLLM, SGLang, Ollama) over plain
// HTTP with no key: key_file = "none"; the server sees no credential at all.
func TestGatewayServerWithoutKey(t *testing.T) {
	prov := scriptedmodel.New()
	t.Cleanup(prov.Close)
	prov.Default = scriptedmodel.Response{Body: scriptedmodel.ChatCompletion("from an open-weight model", 30, 4)}
	log, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	p := ProviderConfig{Name: "vllm", Kind: KindOpenAI, BaseURL: prov.URL + "/v1", KeyFile: NoKey}
	if err := p.Validate("providers.vllm"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.BaseURL, "http://") {
		t.Fatalf("the scripted server is not plain HTTP: %s", p.BaseURL)
	}
	g, err := NewGateway(p, Agent{Provider: "vllm", Model: "Qwen/Qwen3-8B"}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	x := &gw{t: t, g: g, prov: prov, srv: srv, log: log}
	resp, body := x.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer sk-agent"})
	if resp.StatusCode != 200 || !strings.Contains(body, "open-weight") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := prov.Requests()[0]
	if got.Header.Get("Authorization") != "" || got.Header.Get("X-Api-Key") != "" {
		t.Errorf("a keyless server got credentials: %v", got.Header)
	}
	var sent map[string]any
	json.Unmarshal(got.Body, &sent)
	if sent["model"] != "Qwen/Qwen3-8B" {
		t.Errorf("model %v", sent["model"])
	}
	if r := x.records()[0]; r.Usage.Prompt != 30 || r.Usage.Completion != 4 {
		t.Errorf("usage %+v", r.Usage)
	}
}
