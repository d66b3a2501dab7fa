package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
)

// FuzzAdminAPI feeds the admin API arbitrary requests (method, path, body) against a daemon
// with one finished run: nothing panics, every answer is JSON (or the run's own file), every
// error is {"error": "...", "code": "..."} with a 4xx status, and nothing is queued from a request the daemon
// could not check (no image, exam or kit is in this daemon's store).
func FuzzAdminAPI(f *testing.F) {
	demo, err := os.ReadFile("../tracks/demo.toml")
	if err != nil {
		f.Fatal(err)
	}
	req := func(track, agent string, seed int64) string {
		b, _ := json.Marshal(api.RunRequest{Track: track, TrackName: "demo.toml", Agent: agent, Seed: seed})
		return string(b)
	}
	for _, s := range []struct{ method, path, body string }{
		{"POST", "/v1/runs", req(string(demo), "openai/gpt-x@high", 1)},
		{"POST", "/v1/runs", req(string(demo), "none/scripted", -1)},
		{"POST", "/v1/runs", req("[track]\nname = \"x\"", "a/b", 0)},
		{"POST", "/v1/runs", `{"track": 1}`},
		{"POST", "/v1/runs", `{"track":"x","agent":"y","extra":true}`},
		{"POST", "/v1/runs", `{"track":"x"}{"agent":"y"}`},
		{"POST", "/v1/runs", strings.Repeat("[", 10000)},
		{"GET", "/v1/runs?active=1&limit=-3", ""},
		{"GET", "/v1/runs?limit=99999999999999999999", ""},
		{"GET", "/v1/runs/r-1", ""},
		{"GET", "/v1/runs/..%2f..%2fetc%2fpasswd", ""},
		{"GET", "/v1/runs/r-1/files/transcript", ""},
		{"GET", "/v1/runs/r-1/files/call-0", ""},
		{"GET", "/v1/runs/r-1/files/call-..%2f..%2fjournal", ""},
		{"GET", "/v1/runs/r-1/files/journal", ""},
		{"GET", "/v1/runs/r-1/events?follow=0", ""},
		{"POST", "/v1/runs/r-1/cancel", ""},
		{"POST", "/v1/runs/nope/cancel", ""},
		{"DELETE", "/v1/runs", ""},
		{"GET", "/../../etc/passwd", ""},
	} {
		f.Add(s.method, s.path, []byte(s.body))
	}
	state := f.TempDir()
	os.MkdirAll(filepath.Join(state, "runs", "r-1"), 0o711)
	os.WriteFile(filepath.Join(state, "runs", "r-1", "transcript.log"), []byte("the run's transcript\n"), 0o644)
	os.WriteFile(filepath.Join(state, "secret"), []byte("not for the API\n"), 0o600)
	j, err := OpenJournal(filepath.Join(state, "journal.jsonl"), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer j.Close()
	store, err := images.OpenStore(state)
	if err != nil {
		f.Fatal(err)
	}
	cfg := &hostconfig.Config{StateDir: state, File: "fuzz.toml"}
	d := &Daemon{cfg: cfg, x: &Executor{Cfg: cfg, Store: store, Journal: j}, j: j, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		runs: map[string]*api.Record{}, spec: map[string]RunSpec{}, cancel: map[string]context.CancelFunc{}, wake: make(chan struct{}, 1), subs: map[chan api.Event]string{}}
	d.metrics = newMetrics(d)
	d.runs["r-1"] = &api.Record{ID: "r-1", State: api.StateGraded, Dir: filepath.Join(state, "runs", "r-1"), Queued: time.Unix(1, 0)}
	h := d.Handler()
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r, err := http.NewRequest(method, "http://sealrun"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if strings.Contains(r.URL.RawQuery, "follow") {
			r.URL.RawQuery = "follow=0" // a follower waits for the run's end
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		out, _ := io.ReadAll(res.Body)
		if bytes.Contains(out, []byte("not for the API")) {
			t.Fatalf("%s %s served a file outside the run: %q", method, path, out)
		}
		if res.StatusCode >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, out)
		}
		if res.StatusCode >= 400 {
			var e api.APIError
			if res.StatusCode != http.StatusMethodNotAllowed && (json.Unmarshal(out, &e) != nil || e.Error == "" || e.Code == "") {
				t.Fatalf("%s %s: %d with a body that is not {\"error\": ..., \"code\": ...}: %q", method, path, res.StatusCode, out)
			}
		}
		d.mu.Lock()
		n := len(d.runs)
		d.mu.Unlock()
		if n != 1 {
			t.Fatalf("%s %s queued a run the daemon cannot have checked", method, path)
		}
	})
}
