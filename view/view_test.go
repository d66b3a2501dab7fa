package view

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// fakeSource answers the admin API's paths from a map (path with query -> body).
type fakeSource map[string]string

func (f fakeSource) Get(_ context.Context, path string) (*http.Response, error) {
	body, ok := f[path]
	code := http.StatusOK
	if !ok {
		code, body = http.StatusNotFound, `{"error":"no such path in the fake: `+path+`"}`
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}, nil
}

const oneRun = `{"format":"sealrun-transcript/v1","run":{"id":"r-1","track":"t","agent":"a","seed":1,"state":"running","live":true},"totals":{},"bodies":{},"through":0,"events":[]}`

func serve(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	src := fakeSource{"/runs": `[{"id":"r-1","state":"running"}]`, "/runs/r-1/transcript?from=0": oneRun, "/runs/r-1/transcript?from=3&wait=25": oneRun}
	srv := httptest.NewUnstartedServer(nil)
	v, err := New(src, srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = v.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return v, srv
}

// Nothing is served without the token; the token in the first URL sets the cookie and sends the
// browser on without it; a wrong token, another Host (DNS rebinding), a write, or a path that
// is not a run id are refused. Every answer carries a Content-Security-Policy and no-sniff.
func TestViewGuards(t *testing.T) {
	v, srv := serve(t)
	get := func(c *http.Client, method, path, host string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: no CSP or nosniff: %v", method, path, resp.Header)
		}
		return resp, string(b)
	}
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path, host string
		code               int
		want               string
	}{
		{"GET", "/", "", 401, "needs its token"},
		{"GET", "/api/runs", "", 401, "needs its token"},
		{"GET", "/runs/r-1", "", 401, "needs its token"},
		{"GET", "/?token=wrong", "", 403, "wrong token"},
		{"GET", "/?token=" + v.Token(), "evil.example:80", 421, "answers requests for"},
		{"POST", "/?token=" + v.Token(), "", 405, "read-only"},
	} {
		resp, body := get(plain, c.method, c.path, c.host)
		if resp.StatusCode != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s %s (Host %q): %d %q; want %d ~%q", c.method, c.path, c.host, resp.StatusCode, body, c.code, c.want)
		}
	}
	resp, _ := get(plain, "GET", "/?token="+url.QueryEscape(v.Token()), "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || !strings.Contains(resp.Header.Get("Set-Cookie"), "HttpOnly") || !strings.Contains(resp.Header.Get("Set-Cookie"), "SameSite=Strict") {
		t.Errorf("the token's first page: %d %v", resp.StatusCode, resp.Header)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/?token=" + v.Token(), 200, "sealrun view"},
		{"/api/runs", 200, `"r-1"`},
		{"/runs/r-1", 200, `data-live="/api/runs/r-1/transcript"`},
		{"/api/runs/r-1/transcript?from=3&wait=25&extra=x", 200, `"r-1"`},
		{"/runs/..%2fetc", 404, "is not a run id"},
		{"/api/runs/R-1/transcript", 404, "is not a run id"},
		{"/nothing", 404, "404"},
	} {
		resp, body := get(browser, "GET", c.path, "")
		if resp.StatusCode != c.code || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %.200q; want %d ~%q", c.path, resp.StatusCode, body, c.code, c.want)
		}
	}
	// The loopback address's other names are answered (the cookie is the browser's per name).
	port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":")+1:]
	if resp, _ := get(plain, "GET", "/", "localhost:"+port); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("as localhost: %d; want the token asked for", resp.StatusCode)
	}
}
