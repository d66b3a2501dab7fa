package inflight

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// Close waits for a handler in flight (here one that appends its record after its client has
// gone) and lets no new request in; a handler that outlives the bound is counted.
func TestCloseWaitsForHandlers(t *testing.T) {
	tr := New()
	release := make(chan struct{})
	started := make(chan struct{})
	appended := make(chan struct{})
	srv := httptest.NewServer(tr.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		time.Sleep(50 * time.Millisecond) // the record of a call cut short, written late
		close(appended)
	})))
	defer srv.Close()
	go http.Get(srv.URL)
	<-started
	done := make(chan int)
	go func() { done <- tr.Close(10 * time.Second) }()
	select {
	case <-done:
		t.Fatal("Close returned with a handler in flight")
	case <-time.After(100 * time.Millisecond):
	}
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request after Close: %d %q; want 503", resp.StatusCode, body)
	}
	close(release)
	if left := <-done; left != 0 {
		t.Errorf("Close: %d left", left)
	}
	select {
	case <-appended:
	default:
		t.Error("Close returned before the handler had written its record")
	}

	stuck := New()
	hold := make(chan struct{})
	in := make(chan struct{})
	srv2 := httptest.NewServer(stuck.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { close(in); <-hold })))
	defer func() { close(hold); srv2.Close() }()
	go http.Get(srv2.URL)
	<-in
	if left := stuck.Close(100 * time.Millisecond); left != 1 {
		t.Errorf("Close of a stuck handler: %d left; want 1", left)
	}
	if left := New().Close(time.Second); left != 0 {
		t.Errorf("Close of an idle tracker: %d left", left)
	}
}
