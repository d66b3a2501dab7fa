package controller

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
)

type gw struct {
	t    testing.TB
	g    *Gateway
	prov *scriptedmodel.Provider
	srv  *httptest.Server
	log  *audit.Log
	dir  string
}

func keyFile(t testing.TB, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newGW(t testing.TB, kind, agent string, retries int, opts ...GatewayOption) *gw {
	t.Helper()
	prov := scriptedmodel.New()
	t.Cleanup(prov.Close)
	dir := t.TempDir()
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	base := prov.URL
	if kind == KindOpenAI {
		base += "/v1"
	}
	a, err := ParseAgent(agent)
	if err != nil {
		t.Fatal(err)
	}
	p := ProviderConfig{Name: a.Provider, Kind: kind, BaseURL: base, KeyFile: keyFile(t, "real-provider-key"), Retries: retries}
	all := append([]GatewayOption{WithBodiesDir(filepath.Join(dir, "bodies")), WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)
	g, err := NewGateway(p, a, log, all...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return &gw{t: t, g: g, prov: prov, srv: srv, log: log, dir: dir}
}

func (x *gw) do(method, path string, body string, hdr map[string]string) (*http.Response, string) {
	x.t.Helper()
	req, _ := http.NewRequest(method, x.srv.URL+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		x.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// records waits until the audit log has at least as many entries as requests answered (the
// entry is appended as the handler returns, just after the client has its response).
func (x *gw) records() []audit.Gateway {
	x.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, n := x.log.Head(); n >= x.g.Stats().Requests {
			break
		}
	}
	data, _ := os.ReadFile(x.log.Path())
	var out []audit.Gateway
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r audit.Gateway
		if err := json.Unmarshal(line, &r); err != nil {
			x.t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestGatewayForwardsWithKeyAndPins(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x@high", 3)
	resp, body := x.do("POST", "/v1/chat/completions", `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer agent-made-this-up", "X-Api-Key": "agent", "Cookie": "c=1", "X-Forwarded-For": "1.2.3.4", "Content-Type": "application/json"})
	if resp.StatusCode != 200 || !strings.Contains(body, "hello from the fake provider") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := x.prov.Requests()[0]
	if got.Path != "/v1/chat/completions" || got.Header.Get("Authorization") != "Bearer real-provider-key" || got.Header.Get("X-Api-Key") != "" ||
		got.Header.Get("Cookie") != "" || got.Header.Get("X-Forwarded-For") != "" {
		t.Errorf("provider saw %s with headers %v", got.Path, got.Header)
	}
	var sent map[string]any
	json.Unmarshal(got.Body, &sent)
	if sent["model"] != "gpt-x" || sent["reasoning_effort"] != "high" {
		t.Errorf("pinned body: %s", got.Body)
	}
	// A missing model is filled in.
	x.do("POST", "/v1/chat/completions", `{"messages":[]}`, nil)
	json.Unmarshal(x.prov.Requests()[1].Body, &sent)
	if sent["model"] != "gpt-x" {
		t.Errorf("model not filled in: %s", x.prov.Requests()[1].Body)
	}
	rs := x.records()
	if len(rs) != 2 || rs[0].Status != 200 || len(rs[0].Tries) != 1 || rs[0].Usage != (audit.Usage{Prompt: 10, Completion: 5, Reasoning: 2}) || rs[0].RequestSHA256 == "" || rs[0].ResponseBytes == 0 {
		t.Errorf("audit: %+v", rs)
	}
	// Bodies are kept compressed, never in any container.
	f, err := os.Open(filepath.Join(x.dir, "bodies", "000001.response.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, _ := gzip.NewReader(f)
	kept, _ := io.ReadAll(zr)
	f.Close()
	if !strings.Contains(string(kept), "hello from the fake provider") {
		t.Errorf("kept response %q", kept)
	}
	fh, _ := os.Open(x.log.Path())
	head, n, err := audit.Head(fh)
	fh.Close()
	if h, c := x.log.Head(); err != nil || head != h || n != c {
		t.Errorf("audit chain %s %d %v", head, n, err)
	}
}

func TestGatewayRefusals(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x@high", 3)
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1/chat/completions", `{"model":"gpt-bigger"}`, 403, `gpt-bigger\" refused: this run's agent is openai/gpt-x@high`},
		{"POST", "/v1/chat/completions", `{"model":"gpt-x","reasoning_effort":"low"}`, 403, "reasoning_effort"},
		{"POST", "/v1/responses", `{"reasoning":{"effort":"minimal"}}`, 403, "reasoning.effort"},
		{"POST", "/v1/embeddings", `{}`, 403, "is not forwarded"},
		{"POST", "/v1/files", `{}`, 403, "is not forwarded"},
		{"GET", "/v1/chat/completions", ``, 403, "is not forwarded"},
		{"POST", "/v1/chat/completions", `not json`, 403, "not a JSON object"},
		{"POST", "/v1/chat/completions", `{"model":"gpt-x","x":"` + strings.Repeat("a", 10<<20) + `"}`, 413, "at most 8388608"},
	} {
		resp, body := x.do(tc.method, tc.path, tc.body, nil)
		if resp.StatusCode != tc.code || !strings.Contains(body, tc.want) || !strings.Contains(body, "sealrun gateway") {
			t.Errorf("%s %s: %d %.200s; want %d ~%q", tc.method, tc.path, resp.StatusCode, body, tc.code, tc.want)
		}
	}
	if n := len(x.prov.Requests()); n != 0 {
		t.Errorf("the provider received %d refused requests", n)
	}
	rs := x.records()
	if len(rs) != 8 || rs[0].Refused == "" || x.g.Stats().Refused != 8 {
		t.Errorf("refusals not audited: %d records, stats %+v", len(rs), x.g.Stats())
	}
	// The model listing is answered locally with the run's one model.
	_, body := x.do("GET", "/v1/models", "", nil)
	if !strings.Contains(body, `"id":"gpt-x"`) || strings.Count(body, `"id"`) != 1 {
		t.Errorf("models: %s", body)
	}
}

// Smuggling: a request with both Content-Length and Transfer-Encoding, or a chunked body, never
// reaches the provider.
func TestGatewayRefusesAmbiguousFraming(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x", 3)
	addr := strings.TrimPrefix(x.srv.URL, "http://")
	for _, raw := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nPOST /v1/files HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\n\r\n{}",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(raw))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		status, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(status, " 4") {
			t.Errorf("%.60q answered %q; want a 4xx", raw, status)
		}
	}
	if n := len(x.prov.Requests()); n != 0 {
		t.Errorf("the provider received %d smuggled requests", n)
	}
}

func TestGatewayRetries(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x", 30)
	x.prov.Queue(scriptedmodel.Response{Status: 429, Body: `{"error":"slow down"}`}, scriptedmodel.Response{Status: 429, Headers: map[string]string{"Retry-After": "0"}},
		scriptedmodel.Response{Status: 503}, scriptedmodel.Response{Body: scriptedmodel.ChatCompletion("finally", 1, 1)})
	resp, body := x.do("POST", "/v1/chat/completions", `{"model":"gpt-x"}`, nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "finally") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	r := x.records()[0]
	if len(r.Tries) != 4 || r.Tries[0].Status != 429 || r.Tries[2].Status != 503 || r.Tries[3].Status != 200 || x.g.Stats().Retries != 3 {
		t.Errorf("tries %+v stats %+v", r.Tries, x.g.Stats())
	}
	// A provider that drops connections every time: the scaffold gets a 502 with the reason.
	y := newGW(t, KindOpenAI, "openai/gpt-x", 2)
	y.prov.Default = scriptedmodel.Response{Drop: true}
	resp, body = y.do("POST", "/v1/chat/completions", `{}`, nil)
	if resp.StatusCode != 502 || !strings.Contains(body, "failed 3 tries") {
		t.Errorf("dropped: %d %s", resp.StatusCode, body)
	}
	if rs := y.records(); len(rs[0].Tries) != 3 || y.g.Stats().Exhausted != 1 || y.g.Stats().ProviderLost <= 0 {
		t.Errorf("dropped: %+v %+v", rs[0].Tries, y.g.Stats())
	}
	// One that never answers (a short header time-out here) and one that answers garbage.
	z := newGW(t, KindOpenAI, "openai/gpt-x", 1, WithTransport(&http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond}))
	z.prov.Default = scriptedmodel.Response{Delay: 2 * time.Second}
	resp, body = z.do("POST", "/v1/chat/completions", `{}`, nil)
	if resp.StatusCode != 502 || !strings.Contains(body, "timeout awaiting response headers") {
		t.Errorf("slow: %d %s", resp.StatusCode, body)
	}
	garbage, _ := net.Listen("tcp", "127.0.0.1:0")
	defer garbage.Close()
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			// Answer only after the request arrived: garbage written first reaches the client
			// as an unsolicited response on an idle connection, a different error.
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					l, err := br.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				c.Write([]byte("this is not HTTP\r\n\r\n"))
			}()
		}
	}()
	w := newGW(t, KindOpenAI, "openai/gpt-x", 1)
	w.g.base.Host = garbage.Addr().String()
	resp, body = w.do("POST", "/v1/chat/completions", `{}`, nil)
	if resp.StatusCode != 502 || !strings.Contains(body, "malformed HTTP") {
		t.Errorf("garbage: %d %s", resp.StatusCode, body)
	}
}

// Server-sent events arrive at the scaffold as the provider sends them; usage is read from the
// stream.
func TestGatewayStreams(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x", 3)
	x.prov.Queue(scriptedmodel.Response{EventGap: 300 * time.Millisecond, Events: []string{
		`{"choices":[{"delta":{"content":"one"}}]}`, `{"choices":[{"delta":{"content":"two"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`}})
	req, _ := http.NewRequest("POST", x.srv.URL+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	start := time.Now()
	var times []time.Duration
	for {
		line, err := br.ReadString('\n')
		if strings.HasPrefix(line, "data:") {
			times = append(times, time.Since(start))
		}
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	if len(times) != 4 || times[0] > 250*time.Millisecond || times[2] < 500*time.Millisecond {
		t.Errorf("events at %v; want the first at once and the third after two gaps", times)
	}
	if r := x.records()[0]; !r.Streamed || r.Usage.Prompt != 7 || r.Usage.Completion != 3 {
		t.Errorf("audit %+v", r)
	}
}

func TestGatewayAnthropic(t *testing.T) {
	x := newGW(t, KindAnthropic, "anthropic/claude-x@high", 3)
	x.prov.Default = scriptedmodel.Response{Body: scriptedmodel.Message("hi", 12, 4)}
	resp, _ := x.do("POST", "/v1/messages", `{"model":"claude-x","max_tokens":10}`, map[string]string{"x-api-key": "agent", "anthropic-version": "2023-06-01", "Authorization": "Bearer x"})
	got := x.prov.Requests()[0]
	if resp.StatusCode != 200 || got.Path != "/v1/messages" || got.Header.Get("X-Api-Key") != "real-provider-key" || got.Header.Get("Authorization") != "" || got.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("%d %s %v", resp.StatusCode, got.Path, got.Header)
	}
	if r := x.records()[0]; r.Usage.Prompt != 12 || r.Usage.Completion != 4 {
		t.Errorf("usage %+v", r.Usage)
	}
	if resp, _ := x.do("POST", "/v1/chat/completions", `{}`, nil); resp.StatusCode != 403 {
		t.Errorf("an OpenAI path on an Anthropic gateway: %d", resp.StatusCode)
	}
}

func TestProviderConfigValidate(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("k\n"), 0o644)
	good := keyFile(t, "k")
	for _, tc := range []struct {
		p    ProviderConfig
		want []string
	}{
		{ProviderConfig{Name: "openai", BaseURL: "https://api.example.com/v1", KeyFile: good}, nil},
		{ProviderConfig{Name: "mine", BaseURL: "api.example.com/v1", KeyFile: filepath.Join(dir, "missing"), Retries: -1},
			[]string{`providers.mine.kind: "" is not a provider kind`, "providers.mine.base_url", "providers.mine.key_file", "install -m 0600", "providers.mine.retries"}},
		{ProviderConfig{Name: "openai", BaseURL: "https://user:pw@api.example.com", KeyFile: open}, []string{"user info", "chmod 0600"}},
	} {
		err := tc.p.Validate("providers." + tc.p.Name)
		if len(tc.want) == 0 && err != nil {
			t.Errorf("%+v: %v", tc.p, err)
		}
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v; want ~%q", tc.p, err, w)
			}
		}
	}
	empty := keyFile(t, "")
	if _, err := NewGateway(ProviderConfig{Name: "openai", BaseURL: "https://x/v1", KeyFile: empty}, Agent{Provider: "openai", Model: "m"}, &audit.Log{}); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty key: %v", err)
	}
	for _, bad := range []string{"gpt-x", "openai/", "/gpt", "openai/gpt x", "openai/gpt@"} {
		if _, err := ParseAgent(bad); err == nil || !strings.Contains(err.Error(), "PROVIDER/MODEL[@EFFORT]") {
			t.Errorf("ParseAgent(%q) = %v", bad, err)
		}
	}
	if a, err := ParseAgent("openai/gpt-x@high"); err != nil || a != (Agent{"openai", "gpt-x", "high"}) {
		t.Errorf("ParseAgent: %+v %v", a, err)
	}
}

// An audit entry that cannot be written is reported to the daemon (the run becomes invalid).
func TestGatewayAuditFailureReported(t *testing.T) {
	heard := make(chan error, 1)
	x := newGW(t, KindOpenAI, "openai/gpt-x", 1, WithGatewayInfraHandler(func(err error) { heard <- err }))
	x.log.Close()
	if resp, _ := x.do("POST", "/v1/chat/completions", `{}`, nil); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	select {
	case err := <-heard:
		if !strings.Contains(err.Error(), "gateway request 1") || !strings.Contains(err.Error(), "closed") {
			t.Errorf("heard %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("the audit failure was not reported")
	}
}

// A run with no model (provider none, the scripted demo agent) has a gateway that forwards
// nothing: every request is refused, audited, and nothing reaches any provider.
func TestGatewayNoProvider(t *testing.T) {
	dir := t.TempDir()
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := (ProviderConfig{Name: "none", Kind: KindNone, BaseURL: "https://x"}).Validate("providers.none"); err == nil {
		t.Error("a provider of kind none with a base_url was accepted")
	}
	g, err := NewGateway(NoProvider, Agent{Provider: "none", Model: "none"}, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	for _, c := range []struct{ method, path string }{{"POST", "/v1/chat/completions"}, {"GET", "/v1/models"}, {"POST", "/v1/messages"}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(`{"model":"x"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "no model provider") {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, n := log.Head(); n >= 3 {
			break
		}
	}
	if _, n := log.Head(); n != 3 {
		t.Errorf("%d audit entries; want one per refused request", n)
	}
}

// readBody reads a kept body (gzip) from the bodies directory.
func (x *gw) readBody(n int, part string) []byte {
	x.t.Helper()
	f, err := os.Open(filepath.Join(x.dir, "bodies", audit.GatewayBodyName(n, part)))
	if err != nil {
		x.t.Fatalf("body %d %s: %v", n, part, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		x.t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		x.t.Fatal(err)
	}
	return b
}

// Bodies are kept whole, whatever their size, and the hashes the audit entry carries are of
// exactly what is kept: a 40 MiB response (past the old 16 MiB cut) and a 7 MiB request, a
// streamed response whose usage comes after a 3 MiB event line. Nothing temporary is left.
func TestGatewayKeepsBodiesWhole(t *testing.T) {
	x := newGW(t, KindOpenAI, "openai/gpt-x", 1)
	big := strings.Repeat("0123456789abcdef", 40<<20/16)
	x.prov.Queue(scriptedmodel.Response{Body: `{"choices":[{"message":{"role":"assistant","content":"` + big + `"}}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`},
		scriptedmodel.Response{Events: []string{`{"choices":[{"delta":{"content":"` + strings.Repeat("x", 3<<20) + `"}}]}`, `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":6}}`}})
	if resp, body := x.do("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("q", 7<<20)+`"}]}`, nil); resp.StatusCode != 200 || len(body) < 40<<20 {
		t.Fatalf("%d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, _ := x.do("POST", "/v1/chat/completions", `{"stream":true}`, nil); resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	rs := x.records()
	if len(rs) != 2 {
		t.Fatalf("%d records", len(rs))
	}
	for _, r := range rs {
		for _, b := range []struct {
			part string
			n    int64
			sum  string
		}{{audit.BodyRequest, r.RequestBytes, string(r.RequestSHA256)}, {audit.BodyResponse, r.ResponseBytes, string(r.ResponseSHA256)}} {
			kept := x.readBody(r.Request, b.part)
			got := sha256.Sum256(kept)
			if int64(len(kept)) != b.n || hex.EncodeToString(got[:]) != b.sum {
				t.Errorf("request %d %s: kept %d bytes, sha256 %x; the entry says %d bytes, %s", r.Request, b.part, len(kept), got, b.n, b.sum)
			}
		}
		if r.BodyError != "" {
			t.Errorf("request %d: body_error %q", r.Request, r.BodyError)
		}
	}
	if rs[0].Usage.Prompt != 3 || rs[0].Usage.Completion != 9 || rs[1].Usage.Prompt != 5 || rs[1].Usage.Completion != 6 {
		t.Errorf("usage %+v %+v", rs[0].Usage, rs[1].Usage)
	}
	if left, _ := filepath.Glob(filepath.Join(x.dir, "bodies", ".*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A body that cannot be kept is never silently missing: the infrastructure handler hears it
// (the daemon marks the run invalid), the entry says so, and the scaffold still has its answer.
func TestGatewayBodyFailureReported(t *testing.T) {
	heard := make(chan error, 4)
	x := newGW(t, KindOpenAI, "openai/gpt-x", 1, WithGatewayInfraHandler(func(err error) { heard <- err }))
	bodies := filepath.Join(x.dir, "bodies")
	os.RemoveAll(bodies)
	os.WriteFile(bodies, []byte("not a directory"), 0o600) // every create under it fails, even as root
	if resp, body := x.do("POST", "/v1/chat/completions", `{}`, nil); resp.StatusCode != 200 || !strings.Contains(body, "hello") {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	select {
	case err := <-heard:
		if !strings.Contains(err.Error(), "gateway request 1") || !strings.Contains(err.Error(), "request body") || !strings.Contains(err.Error(), "response body") {
			t.Errorf("heard %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the lost body was not reported")
	}
	if r := x.records()[0]; !strings.Contains(r.BodyError, "request body") || r.RequestSHA256 == "" {
		t.Errorf("entry: body_error %q", r.BodyError)
	}
}

func TestUsageReaderSplitsLines(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n" +
		"data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"" + strings.Repeat("y", maxUsageLine) + "\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}"
	for _, step := range []int{1, 7, 4096, len(stream)} {
		r := newUsageReader(true)
		for i := 0; i < len(stream); i += step {
			r.Write([]byte(stream[i:min(i+step, len(stream))]))
		}
		if u := r.result(); u.Prompt != 11 || u.Completion != 42 {
			t.Errorf("written %d bytes at a time: %+v", step, u)
		}
	}
}

// Google's Gemini API: the model is the path's and must be the run's; of the query only alt=sse
// (a stream's framing) goes on, never a key=; the key goes in x-goog-api-key; the body's model,
// when sent, must be the run's; countTokens passes and other methods do not; usage is read from
// usageMetadata, streamed or not; the effort is pinned in the thinking config.
func TestGatewayGoogle(t *testing.T) {
	x := newGW(t, KindGoogle, "google/gemini-x@high", 1)
	x.prov.Default = scriptedmodel.Response{Body: scriptedmodel.GeminiContent("hi from gemini", 21, 7)}
	resp, body := x.do("POST", "/v1beta/models/gemini-x:generateContent?key=agent-key&other=1", `{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`,
		map[string]string{"x-goog-api-key": "agent", "Authorization": "Bearer x", "Content-Type": "application/json"})
	if resp.StatusCode != 200 || !strings.Contains(body, "hi from gemini") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := x.prov.Requests()[0]
	if got.Path != "/v1beta/models/gemini-x:generateContent" || got.Query != "" || got.Header.Get("X-Goog-Api-Key") != "real-provider-key" || got.Header.Get("Authorization") != "" {
		t.Errorf("provider saw %s ?%s with %v", got.Path, got.Query, got.Header)
	}
	if !strings.Contains(string(got.Body), `"thinkingLevel":"high"`) {
		t.Errorf("effort not pinned: %s", got.Body)
	}
	x.prov.Queue(scriptedmodel.Response{Events: []string{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"one "}]},"index":0}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":1}}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"two"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":2,"thoughtsTokenCount":5}}`},
		NoDone: true})
	if resp, _ := x.do("POST", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"contents":[]}`, nil); resp.StatusCode != 200 {
		t.Errorf("stream: %d", resp.StatusCode)
	}
	if q := x.prov.Requests()[1].Query; q != "alt=sse" {
		t.Errorf("the stream's query reached the provider as %q", q)
	}
	if resp, _ := x.do("POST", "/v1beta/models/gemini-x:countTokens", `{"contents":[]}`, nil); resp.StatusCode != 200 {
		t.Errorf("countTokens: %d", resp.StatusCode)
	}
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/v1beta/models/gemini-bigger:generateContent", `{}`, 403, `gemini-bigger\" refused`},
		{"POST", "/v1beta/models/gemini-x:generateContent", `{"model":"models/gemini-other"}`, 403, `gemini-other\" refused`},
		{"POST", "/v1beta/models/gemini-x:embedContent", `{}`, 403, "is not forwarded"},
		{"POST", "/v1beta/models/gemini-x:generateContent", `{"generationConfig":{"thinkingConfig":{"thinkingLevel":"low"}}}`, 403, "thinkingLevel"},
		{"POST", "/v1beta/models/../x:generateContent", `{}`, 403, "is not forwarded"},
		{"POST", "/v1/chat/completions", `{}`, 403, "is not forwarded"},
	} {
		resp, body := x.do(c.method, c.path, c.body, nil)
		if resp.StatusCode != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s; want %d ~%q", c.method, c.path, resp.StatusCode, body, c.code, c.want)
		}
	}
	if resp, body := x.do("GET", "/v1beta/models", "", nil); resp.StatusCode != 200 || !strings.Contains(body, `"models/gemini-x"`) {
		t.Errorf("models: %d %s", resp.StatusCode, body)
	}
	rs := x.records()
	if rs[0].Usage != (audit.Usage{Prompt: 21, Completion: 7}) || rs[1].Usage != (audit.Usage{Prompt: 30, Completion: 7, Reasoning: 5}) || !rs[1].Streamed {
		t.Errorf("usage %+v, %+v (streamed %v)", rs[0].Usage, rs[1].Usage, rs[1].Streamed)
	}
	if n := len(x.prov.Requests()); n != 3 {
		t.Errorf("the provider saw %d requests; want the three forwarded", n)
	}
	// A number is a thinking budget.
	y := newGW(t, KindGoogle, "google/gemini-x@2048", 1)
	y.do("POST", "/v1beta/models/gemini-x:generateContent", `{"contents":[]}`, nil)
	if b := string(y.prov.Requests()[0].Body); !strings.Contains(b, `"thinkingBudget":2048`) {
		t.Errorf("budget not pinned: %s", b)
	}
}
