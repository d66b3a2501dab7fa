package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/api"
)

// sealrund's error answers come back typed: status, code and message. A client branches on the
// code, which an answer from before codes (no "code") or one that is not JSON still has, by its
// status.
func TestErrorAnswersAreTyped(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string]struct {
		status int
		body   string
	}{
		"/v1/runs/coded":    {409, `{"error":"run r-1 is preparing: its terminal opens once it is running; attach again in a moment","code":"not_yet_running"}`},
		"/v1/runs/uncoded":  {404, `{"error":"no run r-2 (sealrun ps -a lists them)"}`},
		"/v1/runs/notjson":  {502, `<html>bad gateway</html>`},
		"/v1/runs/hostile":  {409, `{"error":"x","code":"not_yet_running","extra":` + strings.Repeat("[", 100000)},
		"/v1/runs/r/attach": {409, `{"error":"run r has ended (graded): there is no terminal to attach to; sealrun view shows its recording","code":"run_ended"}`},
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := New(sock)
	ctx := context.Background()
	for _, tc := range []struct {
		path, code, msg string
		status          int
	}{
		{"/runs/coded", api.CodeNotYetRunning, "its terminal opens once it is running", 409},
		{"/runs/uncoded", api.CodeNotFound, "no run r-2", 404},
		{"/runs/notjson", api.CodeInternal, "sealrund answered 502 Bad Gateway", 502},
		{"/runs/hostile", api.CodeConflict, "sealrund answered 409 Conflict", 409}, // not JSON: its code is not believed
	} {
		err := c.Do(ctx, "GET", tc.path, nil, nil)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Status != tc.status || !strings.Contains(e.Message, tc.msg) || !api.IsCode(err, tc.code) {
			t.Errorf("%s: %#v, want %s %d %q", tc.path, err, tc.code, tc.status, tc.msg)
		}
	}
	_, err = c.Attach(ctx, "r", false, 0, 0)
	if !api.IsCode(err, api.CodeRunEnded) || api.IsCode(err, api.CodeNotYetRunning) || !strings.Contains(err.Error(), "there is no terminal") {
		t.Errorf("attach: %#v", err)
	}
	if api.IsCode(errors.New("its terminal opens once it is running"), api.CodeNotYetRunning) {
		t.Error("a message alone was taken for a code")
	}
}
