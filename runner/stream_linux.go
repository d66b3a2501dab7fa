package runner

// The socket protocol's responses: framed stdout, stderr and exit (protocol.go), and requests'
// decoding.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// stream is a response being written as frames. Writes are serialised; a client that went away
// makes later writes no-ops (the call goes on until it is killed; nothing blocks on the client).
type stream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	f    http.Flusher
	gone bool
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/vnd.sealrun.frames")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &stream{w: w, f: f}
}

func (st *stream) frame(kind byte, p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.gone {
		return
	}
	for len(p) > 0 || kind == FrameExit {
		n := min(len(p), MaxFrame)
		if err := WriteFrame(st.w, kind, p[:n]); err != nil {
			st.gone = true
			return
		}
		p = p[n:]
		if kind == FrameExit {
			break
		}
	}
	if st.f != nil {
		st.f.Flush()
	}
}

func (st *stream) stderrf(format string, args ...any) {
	st.frame(FrameStderr, []byte(fmt.Sprintf(format, args...)+"\n"))
}

func (st *stream) exit(code int) { st.frame(FrameExit, []byte(strconv.Itoa(code))) }

// badRequest answers a malformed request: 400, the time line and the reason as plain text.
func (s *Service) badRequest(w http.ResponseWriter, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, "%s\nrefused: %s\n", s.timeLine(), fmt.Sprintf(format, args...))
}

// decode reads one JSON object with no unknown fields and nothing after it.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("the request is over %d bytes", MaxBodyBytes)
		}
		return fmt.Errorf("the request is not the JSON this verb takes (%v)", err)
	}
	if dec.More() {
		return errors.New("the request has data after its JSON object")
	}
	return nil
}

// begin reads a verb's empty request and opens its response with the time line (nil after a
// bad request, already answered).
func (s *Service) begin(w http.ResponseWriter, r *http.Request) *stream {
	var req struct{}
	if err := decode(r, &req); err != nil {
		s.badRequest(w, "%v", err)
		return nil
	}
	st := newStream(w)
	st.stderrf("%s", s.timeLine())
	return st
}
