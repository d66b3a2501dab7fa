package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/policy"
)

// Gateway defaults.
const (
	DefaultMaxRequestBytes  = 8 << 20
	DefaultMaxResponseBytes = 64 << 20
	DefaultPort             = 8080
)

// routes: what each provider kind forwards. The agent's path maps to the base URL's path plus
// the suffix: openai's base URL carries /v1, anthropic's does not. Google's paths name the model
// (geminiPath).
var routes = map[string]map[string]string{
	KindOpenAI:    {"/v1/chat/completions": "/chat/completions", "/v1/responses": "/responses"},
	KindAnthropic: {"/v1/messages": "/v1/messages"},
}

// geminiPath is a Gemini API method of a model: /v1beta/models/MODEL:METHOD (or /v1/...).
var geminiPath = regexp.MustCompile(`^/(v1beta|v1)/models/([A-Za-z0-9._-]{1,128}):(generateContent|streamGenerateContent|countTokens)$`)

// forwardHeaders are the only request headers that reach the provider (besides the key the
// gateway adds and the length it sets). Everything else — the agent's Authorization or
// x-api-key, cookies, proxy and hop-by-hop headers, X-Forwarded-* — is dropped.
var forwardHeaders = []string{"Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta", "Openai-Beta"}

type gwOptions struct {
	log         *audit.Log
	bodiesDir   string
	transport   http.RoundTripper
	backoffBase time.Duration
	backoffMax  time.Duration
	maxReq      int64
	maxResp     int64
	now         func() time.Time
	onInfra     func(error)
	maxTokens   int64
	maxCost     float64
	price       *policy.Price
}

// GatewayOption configures a Gateway.
type GatewayOption func(*gwOptions)

// WithBodiesDir keeps each request and response body whole, gzip-compressed, under dir
// (BodyName): written and synced before the request's audit entry, so that every body the audit
// log hashes can be checked against it. A body that cannot be kept is the infrastructure's
// failure (the infra handler is called).
func WithBodiesDir(dir string) GatewayOption { return func(o *gwOptions) { o.bodiesDir = dir } }

// WithTransport is the HTTP transport to the provider (default: a dedicated http.Transport).
func WithTransport(rt http.RoundTripper) GatewayOption {
	return func(o *gwOptions) { o.transport = rt }
}

// WithBackoff sets the jittered exponential backoff between tries (default 1s doubling to 60s).
func WithBackoff(base, maxWait time.Duration) GatewayOption {
	return func(o *gwOptions) { o.backoffBase, o.backoffMax = base, maxWait }
}

// WithSizeLimits caps request and response bodies (defaults 8 MiB and 64 MiB).
func WithSizeLimits(request, response int64) GatewayOption {
	return func(o *gwOptions) { o.maxReq, o.maxResp = request, response }
}

// WithGatewayInfraHandler is called with every infrastructure error the gateway meets (an
// audit entry or a body that could not be written): the daemon marks the run invalid.
func WithGatewayInfraHandler(f func(error)) GatewayOption {
	return func(o *gwOptions) { o.onInfra = f }
}

// WithSpendLimit bounds the run's model use (a track's [budget] max_tokens and max_cost): once the
// tokens of its answered requests (input and output) reach maxTokens, or their cost at price
// reaches maxCost, every further request is refused (403, audited, the reason in the body the
// agent reads). Zero is no bound; a request in flight when a bound is reached completes. The
// price, when given, also prices each request for the gateway's stats.
func WithSpendLimit(maxTokens int64, maxCost float64, price *policy.Price) GatewayOption {
	return func(o *gwOptions) { o.maxTokens, o.maxCost, o.price = maxTokens, maxCost, price }
}

// WithGatewayClock injects the clock of audit times and latencies.
func WithGatewayClock(now func() time.Time) GatewayOption { return func(o *gwOptions) { o.now = now } }

// Gateway is one run's model gateway: an http.Handler served inside the run's gateway netns.
type Gateway struct {
	o       gwOptions
	p       ProviderConfig
	kind    string
	base    *url.URL
	key     string
	agent   Agent
	proxy   *httputil.ReverseProxy
	retries int

	mu    sync.Mutex
	seq   int
	stats GatewayStats
}

// GatewayStats is what the daemon's provider-outage rule reads (GATEWAY.md).
type GatewayStats struct {
	Requests     int           `json:"requests"`
	Refused      int           `json:"refused"`
	Retries      int           `json:"retries"`
	Exhausted    int           `json:"exhausted"`     // requests that failed every try
	ProviderLost time.Duration `json:"provider_lost"` // failed tries and backoff: time the provider cost the run
	Tokens       policy.Tokens `json:"tokens"`        // what the answered requests used
	Cost         float64       `json:"cost"`          // their cost at the run's price (0 without one)
}

// NewGateway makes the gateway of one run for agent through provider p, recording each request in
// the run's audit log log; opts are what is optional.
func NewGateway(p ProviderConfig, agent Agent, log *audit.Log, opts ...GatewayOption) (*Gateway, error) {
	o := gwOptions{log: log, backoffBase: time.Second, backoffMax: time.Minute, maxReq: DefaultMaxRequestBytes, maxResp: DefaultMaxResponseBytes, now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	if err := p.Validate("providers." + p.Name); err != nil {
		return nil, err
	}
	if o.log == nil {
		return nil, errors.New("gateway: no audit log")
	}
	if o.maxCost > 0 && o.price == nil {
		return nil, errors.New("gateway: a cost bound needs the model's price")
	}
	if agent.Provider != p.Name {
		return nil, fmt.Errorf("gateway: agent %s is for provider %q, not %q", agent, agent.Provider, p.Name)
	}
	var key string
	if p.kind() != KindNone && p.KeyFile != NoKey {
		var err error
		if key, err = readKey(p.KeyFile); err != nil {
			return nil, err
		}
	}
	base, _ := url.Parse(strings.TrimSuffix(p.BaseURL, "/"))
	if o.transport == nil {
		o.transport = &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, MaxIdleConns: 16, IdleConnTimeout: 90 * time.Second,
			TLSHandshakeTimeout: 30 * time.Second, ResponseHeaderTimeout: 15 * time.Minute}
	}
	if o.bodiesDir != "" {
		if err := os.MkdirAll(o.bodiesDir, 0o700); err != nil {
			return nil, fmt.Errorf("gateway bodies: %w", err)
		}
	}
	retries := p.Retries
	if retries == 0 {
		retries = DefaultRetries
	}
	g := &Gateway{o: o, p: p, kind: p.kind(), base: base, key: key, agent: agent, retries: retries}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      &retryTransport{g: g},
		FlushInterval:  -1, // server-sent events go through as they come
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.errorHandler,
	}
	return g, nil
}

// Stats are the gateway's counters so far.
func (g *Gateway) Stats() GatewayStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// exchange is one request's state while it is proxied.
type exchange struct {
	rec     audit.Gateway
	body    []byte
	capture *capture
	start   time.Time
}

type exchangeKey struct{}

// ServeHTTP admits, pins and forwards one request, then audits it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.seq++
	seq := g.seq
	g.stats.Requests++
	g.mu.Unlock()
	x := &exchange{start: g.o.now(), rec: audit.Gateway{Request: seq, Method: r.Method, Path: r.URL.Path, Model: g.agent.Model, Effort: g.agent.Effort, Tries: []audit.Try{}}}
	x.rec.Time = x.start.UTC()
	sw := &statusWriter{ResponseWriter: w}
	defer g.finish(x, sw)
	if g.kind == KindNone {
		g.refuse(sw, x, http.StatusForbidden, "this run has no model provider (provider none: its scaffold is scripted); nothing is forwarded")
		return
	}
	if r.Method == http.MethodGet && (r.URL.Path == "/v1/models" || r.URL.Path == "/models" || (g.kind == KindGoogle && r.URL.Path == "/v1beta/models")) {
		g.models(sw)
		return
	}
	suffix, ok := routes[g.kind][r.URL.Path]
	if g.kind == KindGoogle {
		if m := geminiPath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
			if m[2] != g.agent.Model {
				g.refuse(sw, x, http.StatusForbidden, fmt.Sprintf("model %q refused: this run's agent is %s; every request uses model %q (in the path: /v1beta/models/%s:%s)", m[2], g.agent, g.agent.Model, g.agent.Model, m[3]))
				return
			}
			suffix, ok = r.URL.Path, true
		}
	}
	if !ok || r.Method != http.MethodPost {
		g.refuse(sw, x, http.StatusForbidden, fmt.Sprintf("%s %s is not forwarded: this run's gateway serves %s only", r.Method, r.URL.Path, g.allowed()))
		return
	}
	if reason := g.spent(); reason != "" {
		g.refuse(sw, x, http.StatusForbidden, reason)
		return
	}
	if len(r.TransferEncoding) > 0 {
		g.refuse(sw, x, http.StatusLengthRequired, "chunked request bodies are not accepted; send the body with a Content-Length")
		return
	}
	if r.ContentLength > g.o.maxReq {
		g.refuse(sw, x, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is %d bytes; the gateway accepts at most %d", r.ContentLength, g.o.maxReq))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(sw, r.Body, g.o.maxReq))
	if err != nil {
		g.refuse(sw, x, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body could not be read within %d bytes: %v", g.o.maxReq, err))
		return
	}
	pinned, reason := g.pin(r.URL.Path, body)
	if reason != "" {
		g.refuse(sw, x, http.StatusForbidden, reason)
		return
	}
	x.body = pinned
	sum := sha256.Sum256(pinned)
	x.rec.RequestBytes, x.rec.RequestSHA256 = int64(len(pinned)), digest.HexOf(sum[:])
	ctx := context.WithValue(r.Context(), exchangeKey{}, x)
	out := r.Clone(ctx)
	out.URL.Path = suffix
	g.proxy.ServeHTTP(sw, out)
}

// spent says why the run's model budget is spent, or "".
func (g *Gateway) spent() string {
	g.mu.Lock()
	t, cost := g.stats.Tokens, g.stats.Cost
	g.mu.Unlock()
	const tail = "; no more model requests are forwarded in this run: finish with what you have (promote your best submission, runner finalize)"
	switch {
	case g.o.maxTokens > 0 && t.Total() >= g.o.maxTokens:
		return fmt.Sprintf("the run's token budget is spent: %d tokens used (%d in, %d out) of the track's max_tokens %d%s", t.Total(), t.Input, t.Output, g.o.maxTokens, tail)
	case g.o.maxCost > 0 && cost >= g.o.maxCost:
		p := g.o.price
		return fmt.Sprintf("the run's cost budget is spent: %.4f %s used of the track's max_cost %s %s (at the host's price of %s, taken %s)%s",
			cost, p.Currency, strconv.FormatFloat(g.o.maxCost, 'f', -1, 64), p.Currency, g.agent, p.Taken, tail)
	}
	return ""
}

func (g *Gateway) allowed() string {
	if g.kind == KindGoogle {
		return fmt.Sprintf("POST /v1beta/models/%s:generateContent, :streamGenerateContent (?alt=sse) and :countTokens, GET /v1beta/models", g.agent.Model)
	}
	var ps []string
	for p := range routes[g.kind] {
		ps = append(ps, "POST "+p)
	}
	sort.Strings(ps)
	return strings.Join(append(ps, "GET /v1/models"), ", ")
}

// pin checks and fixes the run's model and effort in a request body.
func (g *Gateway) pin(path string, body []byte) ([]byte, string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, "the request body is not a JSON object"
	}
	var model string
	if raw, ok := m["model"]; ok {
		if json.Unmarshal(raw, &model) != nil {
			return nil, "the request's model is not a string"
		}
		if g.kind == KindGoogle {
			model = strings.TrimPrefix(model, "models/")
		}
		if model != g.agent.Model {
			return nil, fmt.Sprintf("model %q refused: this run's agent is %s; every request uses model %q", model, g.agent, g.agent.Model)
		}
	}
	if g.kind == KindGoogle {
		// The Gemini API names the model in the path (checked already); a body model, when
		// there is one, was checked above and is left as it is.
		if g.agent.Effort != "" {
			if reason := pinGeminiEffort(m, g.agent); reason != "" {
				return nil, reason
			}
		}
		out, err := json.Marshal(m)
		if err != nil {
			return nil, "the request body could not be re-encoded"
		}
		return out, ""
	}
	m["model"], _ = json.Marshal(g.agent.Model)
	if g.agent.Effort != "" && g.kind == KindOpenAI {
		switch path {
		case "/v1/chat/completions":
			if raw, ok := m["reasoning_effort"]; ok {
				var e string
				if json.Unmarshal(raw, &e) != nil || e != g.agent.Effort {
					return nil, fmt.Sprintf("reasoning_effort %s refused: this run's agent is %s", raw, g.agent)
				}
			}
			m["reasoning_effort"], _ = json.Marshal(g.agent.Effort)
		case "/v1/responses":
			var reasoning map[string]json.RawMessage
			if raw, ok := m["reasoning"]; ok && json.Unmarshal(raw, &reasoning) != nil {
				return nil, "the request's reasoning is not an object"
			}
			if reasoning == nil {
				reasoning = map[string]json.RawMessage{}
			}
			if raw, ok := reasoning["effort"]; ok {
				var e string
				if json.Unmarshal(raw, &e) != nil || e != g.agent.Effort {
					return nil, fmt.Sprintf("reasoning.effort %s refused: this run's agent is %s", raw, g.agent)
				}
			}
			reasoning["effort"], _ = json.Marshal(g.agent.Effort)
			m["reasoning"], _ = json.Marshal(reasoning)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, "the request body could not be re-encoded"
	}
	return out, ""
}

// rewrite builds the provider request: base URL + route, the allowlisted headers, the key.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	x := pr.In.Context().Value(exchangeKey{}).(*exchange)
	u := *g.base
	u.Path = strings.TrimSuffix(g.base.Path, "/") + pr.In.URL.Path
	u.RawQuery = ""
	if g.kind == KindGoogle && pr.In.URL.Query().Get("alt") == "sse" {
		u.RawQuery = "alt=sse" // the stream's framing; nothing else of the query (a key=) goes on
	}
	pr.Out.URL = &u
	pr.Out.Host = ""
	h := http.Header{}
	for _, k := range forwardHeaders {
		if v := pr.In.Header.Values(k); len(v) > 0 {
			h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	switch g.kind {
	case KindAnthropic:
		if h.Get("Anthropic-Version") == "" {
			h.Set("Anthropic-Version", "2023-06-01")
		}
	}
	switch {
	case g.key == "": // key_file = "none": a model server that takes no key
	case g.kind == KindAnthropic:
		h.Set("X-Api-Key", g.key)
	case g.kind == KindGoogle:
		h.Set("X-Goog-Api-Key", g.key)
	default:
		h.Set("Authorization", "Bearer "+g.key)
	}
	h.Set("Content-Type", "application/json")
	pr.Out.Header = h
	pr.Out.Body = io.NopCloser(bytes.NewReader(x.body))
	pr.Out.ContentLength = int64(len(x.body))
	pr.Out.TransferEncoding = nil
}

// retryTransport tries the provider up to 1+retries times on 429, 5xx, resets and time-outs,
// with jittered exponential backoff (honouring Retry-After within the cap), recording each try.
type retryTransport struct{ g *Gateway }

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := t.g
	x := req.Context().Value(exchangeKey{}).(*exchange)
	var lastErr error
	for attempt := 0; ; attempt++ {
		try := audit.Try{}
		out := req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(x.body))
		t0 := g.o.now()
		resp, err := g.o.transport.RoundTrip(out)
		try.LatencyMS = g.o.now().Sub(t0).Milliseconds()
		retryable := false
		switch {
		case err != nil:
			try.Error = err.Error()
			retryable = req.Context().Err() == nil
			lastErr = err
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			try.Status = resp.StatusCode
			retryable = true
		default:
			try.Status = resp.StatusCode
			x.rec.Tries = append(x.rec.Tries, try)
			return resp, nil
		}
		if !retryable || attempt >= g.retries {
			x.rec.Tries = append(x.rec.Tries, try)
			g.lose(time.Duration(try.LatencyMS) * time.Millisecond)
			g.mu.Lock()
			g.stats.Exhausted++
			g.mu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("the provider failed %d tries; the last: %w", attempt+1, lastErr)
			}
			return resp, nil // the last error response goes back to the scaffold as it is
		}
		wait := g.backoff(attempt, resp)
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		try.WaitMS = wait.Milliseconds()
		x.rec.Tries = append(x.rec.Tries, try)
		g.lose(time.Duration(try.LatencyMS)*time.Millisecond + wait)
		g.mu.Lock()
		g.stats.Retries++
		g.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
}

func (g *Gateway) lose(d time.Duration) {
	g.mu.Lock()
	g.stats.ProviderLost += d
	g.mu.Unlock()
}

// backoff: base·2^attempt, capped, with full jitter; a Retry-After within the cap wins.
func (g *Gateway) backoff(attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			return min(time.Duration(s)*time.Second, g.o.backoffMax)
		}
	}
	d := g.o.backoffBase << min(attempt, 20)
	if d > g.o.backoffMax || d <= 0 {
		d = g.o.backoffMax
	}
	return d/2 + rand.N(d/2+1)
}

// modifyResponse caps, hashes, keeps and reads the usage of the provider's response body.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	x := resp.Request.Context().Value(exchangeKey{}).(*exchange)
	x.rec.Streamed = strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	x.capture = &capture{r: resp.Body, max: g.o.maxResp, h: sha256.New(), usage: newUsageReader(x.rec.Streamed)}
	if g.o.bodiesDir != "" {
		x.capture.file = newBodyFile(g.o.bodiesDir, audit.GatewayBodyName(x.rec.Request, audit.BodyResponse))
	}
	resp.Body = x.capture
	resp.Header.Del("Set-Cookie")
	return nil
}

// errorHandler answers 502 with the reason, in the provider's error shape.
func (g *Gateway) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	x := r.Context().Value(exchangeKey{}).(*exchange)
	x.rec.Error = err.Error()
	writeError(w, http.StatusBadGateway, "sealrun gateway: the model provider could not be reached: "+err.Error())
}

func (g *Gateway) refuse(w http.ResponseWriter, x *exchange, code int, reason string) {
	x.rec.Refused = reason
	g.mu.Lock()
	g.stats.Refused++
	g.mu.Unlock()
	writeError(w, code, "sealrun gateway: "+reason)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": msg, "type": "sealrun_gateway_error"}})
	w.Write(append(b, '\n'))
}

// models answers the model listing locally: the run's one model.
func (g *Gateway) models(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	var v any
	switch g.kind {
	case KindAnthropic:
		v = map[string]any{"data": []map[string]string{{"id": g.agent.Model, "type": "model", "display_name": g.agent.Model}}, "has_more": false}
	case KindGoogle:
		v = map[string]any{"models": []map[string]any{{"name": "models/" + g.agent.Model, "displayName": g.agent.Model,
			"supportedGenerationMethods": []string{"generateContent", "streamGenerateContent", "countTokens"}}}}
	default:
		v = map[string]any{"object": "list", "data": []map[string]string{{"id": g.agent.Model, "object": "model", "owned_by": g.agent.Provider}}}
	}
	json.NewEncoder(w).Encode(v)
}

// finish completes the record, keeps the bodies and appends the record to the audit log. A body
// that could not be kept is the infrastructure's failure: the run is marked invalid, and the
// entry says which body is missing.
func (g *Gateway) finish(x *exchange, sw *statusWriter) {
	x.rec.Status = sw.code()
	x.rec.LatencyMS = g.o.now().Sub(x.start).Milliseconds()
	for _, t := range x.rec.Tries {
		if t.Status == 0 || t.Status == http.StatusTooManyRequests || t.Status >= 500 {
			x.rec.ProviderLostMS += t.LatencyMS + t.WaitMS
		}
	}
	var kept []string
	if x.body != nil && g.o.bodiesDir != "" {
		f := newBodyFile(g.o.bodiesDir, audit.GatewayBodyName(x.rec.Request, audit.BodyRequest))
		f.Write(x.body)
		if err := f.Commit(); err != nil {
			kept = append(kept, "the request body: "+err.Error())
		}
	}
	if c := x.capture; c != nil {
		x.rec.ResponseBytes, x.rec.ResponseSHA256 = c.n, digest.HexOf(c.h.Sum(nil))
		x.rec.Usage = c.usage.result()
		g.mu.Lock()
		g.stats.Tokens.Add(x.rec.Usage.Tokens())
		if g.o.price != nil {
			g.stats.Cost = g.o.price.Cost(g.stats.Tokens)
		}
		g.mu.Unlock()
		if c.err != nil && x.rec.Error == "" {
			x.rec.Error = c.err.Error()
		}
		if c.file != nil {
			if err := c.file.Commit(); err != nil {
				kept = append(kept, "the response body: "+err.Error())
			}
		}
	}
	if len(kept) > 0 {
		x.rec.BodyError = strings.Join(kept, "; ")
		if g.o.onInfra != nil {
			g.o.onInfra(fmt.Errorf("gateway request %d: a body could not be kept (%s); the audit log hashes it and nothing holds it", x.rec.Request, x.rec.BodyError))
		}
	}
	if _, _, err := g.o.log.Append(audit.KindGateway, x.rec); err != nil && g.o.onInfra != nil {
		// The request is already answered; the missing entry is the infrastructure's failure.
		g.o.onInfra(fmt.Errorf("gateway request %d: %w", x.rec.Request, err))
	}
}

// capture passes a response body through: counts, hashes, keeps it whole (gzip-compressed, in
// the bodies directory), reads its token usage as it passes, and fails the copy past the cap.
type capture struct {
	r   io.ReadCloser
	n   int64
	max int64
	h   interface {
		io.Writer
		Sum([]byte) []byte
	}
	file  *bodyFile // nil: bodies are not kept
	usage *usageReader
	err   error
}

func (c *capture) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.h.Write(p[:n])
		if c.file != nil {
			c.file.Write(p[:n])
		}
		c.usage.Write(p[:n])
		if c.n > c.max {
			c.err = fmt.Errorf("the provider's response passed the gateway's cap of %d bytes; it was cut", c.max)
			return n, c.err
		}
	}
	return n, err
}

func (c *capture) Close() error { return c.r.Close() }

// statusWriter records the status code; Unwrap lets the proxy flush through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// pinGeminiEffort pins a Gemini request's thinking to the agent's effort: a number is its
// thinkingBudget (tokens), a word its thinkingLevel ("low", "high"), both in
// generationConfig.thinkingConfig. A request asking for another is refused.
func pinGeminiEffort(m map[string]json.RawMessage, a Agent) string {
	var gen map[string]json.RawMessage
	if raw, ok := m["generationConfig"]; ok && json.Unmarshal(raw, &gen) != nil {
		return "the request's generationConfig is not an object"
	}
	if gen == nil {
		gen = map[string]json.RawMessage{}
	}
	var thinking map[string]json.RawMessage
	if raw, ok := gen["thinkingConfig"]; ok && json.Unmarshal(raw, &thinking) != nil {
		return "the request's generationConfig.thinkingConfig is not an object"
	}
	if thinking == nil {
		thinking = map[string]json.RawMessage{}
	}
	key, want := "thinkingLevel", json.RawMessage(strconv.Quote(a.Effort))
	if n, err := strconv.Atoi(a.Effort); err == nil {
		key, want = "thinkingBudget", json.RawMessage(strconv.Itoa(n))
	}
	if raw, ok := thinking[key]; ok && string(raw) != string(want) {
		return fmt.Sprintf("generationConfig.thinkingConfig.%s %s refused: this run's agent is %s", key, raw, a)
	}
	thinking[key] = want
	gen["thinkingConfig"], _ = json.Marshal(thinking)
	m["generationConfig"], _ = json.Marshal(gen)
	return ""
}
