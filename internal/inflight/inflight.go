// Package inflight counts the requests an HTTP server is serving, so that its owner can wait,
// after closing it, until every handler has returned. http.Server.Close does not wait for
// handlers: a run's agent socket or gateway closed at the run's end could otherwise append a
// cut-short call's or model request's audit entry after the run's end has read the log and
// signed its head.
package inflight

import (
	"net/http"
	"sync"
	"time"
)

// Tracker counts the handlers running under Wrap.
type Tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // closed once closed and no handler runs
}

// New returns a Tracker with nothing in flight.
func New() *Tracker { return &Tracker{idle: make(chan struct{})} }

// Wrap serves h's requests counted. Once the Tracker is closed, a request that starts is
// answered 503 without reaching h.
func (t *Tracker) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !t.enter() {
			http.Error(w, "the run is over: nothing more is served", http.StatusServiceUnavailable)
			return
		}
		defer t.leave()
		h.ServeHTTP(w, r)
	})
}

func (t *Tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *Tracker) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.closed && t.n == 0 {
		close(t.idle)
	}
}

// Close lets no more requests in and waits up to d for those in flight to return. It reports
// how many had not returned by then (0: all done).
func (t *Tracker) Close(d time.Duration) int {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		if t.n == 0 {
			close(t.idle)
		}
	}
	t.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.idle:
		return 0
	case <-timer.C:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.n
	}
}
