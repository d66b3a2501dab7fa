// Package scriptedmodel is the scripted model provider that ships with sealrun: the demo's model
// (sealrun demo --scaffold opencode) and the tests' stand-in for a provider: an OpenAI-compatible and
// Anthropic-compatible HTTP server on loopback that answers from a script — a queue of
// responses, including tool calls, server-sent event streams, 429s and 500s, slow answers and
// dropped connections — and records every request it received. It never reaches beyond
// loopback.
package scriptedmodel

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// Response is one scripted answer.
type Response struct {
	Status  int               // default 200
	Headers map[string]string // e.g. Retry-After
	Body    string            // a JSON body (ignored when Events is set)
	// Events are server-sent event data payloads, sent with Content-Type text/event-stream, each
	// as "data: <payload>\n\n", EventGap apart, then "data: [DONE]".
	Events []string
	// EventNames, when set, name each event ("event: NAME" before its data), as Anthropic's
	// and the Responses API's streams do; those streams end without "data: [DONE]", as
	// Gemini's do (NoDone).
	EventNames []string
	NoDone     bool
	EventGap   time.Duration
	Delay      time.Duration // before the status line
	Drop       bool          // close the connection without an answer (a reset)
}

// Request is one request the provider received.
type Request struct {
	Method, Path string
	Query        string // the raw query
	Header       http.Header
	Body         []byte
	At           time.Time
}

// Provider is the fake. Script answers in order; when the script is empty, Default answers.
type Provider struct {
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	script   []Response
	Default  Response
	requests []Request
	steps    []Step
	agent    bool
	main     string // the scripted agent's session: its system prompt's key (agent.go)
}

// Step is one turn of a scripted agent: the shell command it runs next, given the output of the
// last one ("" at the start).
type Step func(lastOutput string) string

// Agent makes the provider a scripted model for a real scaffold (opencode, Codex, Claude Code,
// Gemini CLI, Qwen Code), in whichever API the request speaks — OpenAI chat completions, the
// Responses API, Anthropic messages, the Gemini API; streamed as that API streams when the
// request asks: each answer is the next step as a call of the scaffold's shell tool (found among
// the tools the request offers) — which step is counted from the tool calls already in the
// conversation, so retries and the scaffold's own requests cannot skip one; after the last
// step, a closing message. A request of another session (a scaffold's side requests: a title, a
// summary, a memory subagent) is answered in plain words. Queued responses still come first
// (agent.go).
func (p *Provider) Agent(steps ...Step) {
	p.mu.Lock()
	p.steps, p.agent = steps, true
	p.mu.Unlock()
}

// New starts a provider on 127.0.0.1; Close stops it.
func New() *Provider {
	p := &Provider{Default: Response{Body: ChatCompletion("hello from the fake provider", 10, 5)}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p
}

// Close stops the server.
func (p *Provider) Close() { p.srv.Close() }

// Queue appends answers to the script.
func (p *Provider) Queue(rs ...Response) {
	p.mu.Lock()
	p.script = append(p.script, rs...)
	p.mu.Unlock()
}

// Requests returns what the provider received so far.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.requests = append(p.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, At: time.Now()})
	resp := p.Default
	switch {
	case len(p.script) > 0:
		resp, p.script = p.script[0], p.script[1:]
	case p.agent:
		resp = p.agentTurn(r.URL.Path, body)
	}
	p.mu.Unlock()
	time.Sleep(resp.Delay)
	if resp.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	if len(resp.Events) > 0 {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		f, _ := w.(http.Flusher)
		for i, e := range resp.Events {
			if i < len(resp.EventNames) {
				io.WriteString(w, "event: "+resp.EventNames[i]+"\n")
			}
			io.WriteString(w, "data: "+e+"\n\n")
			if f != nil {
				f.Flush()
			}
			time.Sleep(resp.EventGap)
		}
		if len(resp.EventNames) == 0 && !resp.NoDone {
			io.WriteString(w, "data: [DONE]\n\n")
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(status)
	io.WriteString(w, resp.Body)
}

// ChatCompletion is an OpenAI chat completion body with usage.
func ChatCompletion(text string, prompt, completion int) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":` + strconv.Quote(text) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":` + strconv.Itoa(prompt) + `,"completion_tokens":` + strconv.Itoa(completion) +
		`,"completion_tokens_details":{"reasoning_tokens":` + strconv.Itoa(completion/2) + `}}}`
}

// ToolCall is an OpenAI chat completion that calls a tool.
func ToolCall(name, args string) string {
	return `{"id":"chatcmpl-2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":` +
		strconv.Quote(name) + `,"arguments":` + strconv.Quote(args) + `}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":8}}`
}

// Message is an Anthropic messages body with usage.
func Message(text string, in, out int) string {
	return `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":` + strconv.Quote(text) +
		`}],"stop_reason":"end_turn","usage":{"input_tokens":` + strconv.Itoa(in) + `,"output_tokens":` + strconv.Itoa(out) + `}}`
}

// GeminiContent is a Gemini API generateContent answer with usage metadata.
func GeminiContent(text string, prompt, candidates int) string {
	return `{"candidates":[{"content":{"role":"model","parts":[{"text":` + strconv.Quote(text) + `}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":` + strconv.Itoa(prompt) + `,"candidatesTokenCount":` + strconv.Itoa(candidates) +
		`,"totalTokenCount":` + strconv.Itoa(prompt+candidates) + `},"modelVersion":"gemini-x"}`
}
