// Package view is sealrun view: a read-only web viewer of the host's runs, served on loopback
// over sealrund's admin API as the user who starts it — so that only users who may use sealrun
// see it. It lists the runs (filtered by track, agent and state) and shows each run's transcript
// (the transcript package's page), following a running run as it happens. A random token in the
// first URL, kept in a cookie, keeps the host's other users out of the port; every answer
// carries a strict Content-Security-Policy, and the Host header is checked so that no other site
// can reach the viewer through a browser (DNS rebinding).
package view

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/transcript"
)

// Source is sealrund's admin API as the viewer reads it (client.Client is one): GET a path under
// /v1, the answer as it comes.
type Source interface {
	Get(ctx context.Context, path string) (*http.Response, error)
}

// CookieName is the cookie that carries the viewer's token.
const CookieName = "sealrun_view"

//go:embed runs.html
var runsPage string

//go:embed runs.js
var runsJS string

// Server is the viewer.
type Server struct {
	client Source
	token  string
	hosts  map[string]bool // the Host headers answered
}

// New makes a viewer that reads sealrund through client and answers requests for the listener
// address addr (host:port): on a loopback address, also as localhost and the other loopback
// spellings.
func New(client Source, addr string) (*Server, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %s: %w", addr, err)
	}
	var tok [24]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	s := &Server{client: client, token: hex.EncodeToString(tok[:]), hosts: map[string]bool{net.JoinHostPort(host, port): true}}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			s.hosts[net.JoinHostPort(h, port)] = true
		}
	}
	return s, nil
}

// Token is the viewer's token: the URL New's caller prints carries it once.
func (s *Server) Token() string { return s.token }

// URL is the first URL to open: the viewer at addr, with the token.
func (s *Server) URL(addr string) string {
	return "http://" + addr + "/?token=" + url.QueryEscape(s.token)
}

func hashCSP(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// runsCSP is the runs list's policy: its own script and style, and requests to itself.
var runsCSP = func() string {
	style := runsPage[strings.Index(runsPage, "<style>")+len("<style>") : strings.Index(runsPage, "</style>")]
	return "default-src 'none'; script-src " + hashCSP(runsJS) + "; style-src " + hashCSP(style) + "; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// Handler is the viewer's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.runs)
	mux.HandleFunc("GET /runs/{id}", s.run)
	mux.HandleFunc("GET /api/runs", s.proxy(func(r *http.Request) string { return "/runs" }))
	mux.HandleFunc("GET /api/runs/{id}/transcript", s.proxy(func(r *http.Request) string {
		q := url.Values{}
		for _, k := range []string{"from", "wait"} {
			if v := r.URL.Query().Get(k); v != "" {
				q.Set(k, v)
			}
		}
		return "/runs/" + r.PathValue("id") + "/transcript?" + q.Encode()
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		if !s.hosts[r.Host] {
			http.Error(w, fmt.Sprintf("sealrun view answers requests for %s only (this one is for %q)", firstHost(s.hosts), r.Host), http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "sealrun view is read-only: GET only", http.StatusMethodNotAllowed)
			return
		}
		if !s.authorized(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func firstHost(m map[string]bool) string {
	for h := range m {
		if !strings.HasPrefix(h, "localhost") && !strings.HasPrefix(h, "[::1]") {
			return h
		}
	}
	return "this address"
}

// authorized lets a request in that carries the token: in its cookie, or once in the URL of the
// first page (which sets the cookie and sends the browser on without it).
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if t := r.URL.Query().Get("token"); t != "" {
		if subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) != 1 {
			http.Error(w, "wrong token: open the URL sealrun view printed", http.StatusForbidden)
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		u := *r.URL
		q := u.Query()
		q.Del("token")
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	c, err := r.Cookie(CookieName)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.token)) != 1 {
		http.Error(w, "sealrun view needs its token: open the URL sealrun view printed (it carries ?token=...)", http.StatusUnauthorized)
		return false
	}
	return true
}

func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", runsCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, strings.Replace(runsPage, "<script></script>", "<script>"+runsJS+"</script>", 1))
}

// run serves a run's page: its transcript so far, drawn at once, then followed.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !attest.ValidRunID(id) {
		http.Error(w, fmt.Sprintf("%q is not a run id", id), http.StatusNotFound)
		return
	}
	resp, err := s.client.Get(r.Context(), "/runs/"+id+"/transcript?from=0")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.Unmarshal(raw, &e)
		http.Error(w, fmt.Sprintf("sealrund answered %s: %s", resp.Status, e.Error), resp.StatusCode)
		return
	}
	var t transcript.Transcript
	if err := json.Unmarshal(raw, &t); err != nil {
		http.Error(w, "sealrund's transcript could not be read: "+err.Error(), http.StatusBadGateway)
		return
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, &t, transcript.PageOptions{Live: "/api/runs/" + id + "/transcript", Back: "/"}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Security-Policy", transcript.PageCSP()+"; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(page.Bytes())
}

// proxy answers with sealrund's answer to the path to(r), as it comes.
func (s *Server) proxy(to func(*http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); id != "" && !attest.ValidRunID(id) {
			http.Error(w, fmt.Sprintf("%q is not a run id", id), http.StatusNotFound)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 45*time.Second)
		defer cancel()
		resp, err := s.client.Get(ctx, to(r))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}
}
