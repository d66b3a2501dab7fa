package runner

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCallRequest feeds the agent socket's call verb arbitrary bodies: decoding (one JSON object,
// no unknown fields, nothing after it) and validation (argv, env, cwd resolved on the host
// without following links) never panic, and what is accepted is within every bound.
func FuzzCallRequest(f *testing.F) {
	for _, s := range []string{
		`{"argv":["python3","train.py"],"cwd":"/workspace/a","env":["K=V"]}`,
		`{"argv":["x"],"cwd":"/workspace/link"}`,
		`{"argv":["x"],"cwd":"/workspace/../etc"}`,
		`{"argv":["x"],"env":["LD_PRELOAD=/x"]}`,
		`{"argv":[]}`, `{"argv":["a\u0000b"]}`, `{}{}`, `[]`, `{"argv":["x"],"extra":1}`, ``,
	} {
		f.Add([]byte(s))
	}
	ws := f.TempDir()
	os.MkdirAll(filepath.Join(ws, "a", "b"), 0o755)
	os.Symlink("/etc", filepath.Join(ws, "link"))
	root, err := os.OpenRoot(ws)
	if err != nil {
		f.Fatal(err)
	}
	defer root.Close()
	s := &Service{ws: root}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req CallRequest
		if err := decode(httptest.NewRequest("POST", "/v1/call", bytes.NewReader(body)), &req); err != nil {
			return
		}
		cwd, err := s.validateCall(&req)
		if err != nil {
			return
		}
		if len(req.Argv) == 0 || len(req.Argv) > MaxArgs || req.Argv[0] == "" {
			t.Fatalf("accepted argv %q", req.Argv)
		}
		if cwd != "/workspace" && !strings.HasPrefix(cwd, "/workspace/") || strings.Contains(cwd, "..") || strings.HasPrefix(cwd, "/workspace/link") {
			t.Fatalf("accepted cwd %q from %q", cwd, req.Cwd)
		}
		for _, e := range req.Env {
			if strings.HasPrefix(e, "LD_") || strings.Contains(strings.ToUpper(strings.SplitN(e, "=", 2)[0]), "PROXY") {
				t.Fatalf("accepted env %q", e)
			}
		}
	})
}

// FuzzReadFrame: the response framing the runner client reads never panics, never returns a
// payload over the frame limit, and what WriteFrame writes reads back the same.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	WriteFrame(&b, FrameStdout, []byte("hello"))
	f.Add(b.Bytes())
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		buf := make([]byte, 0, 64)
		kind, p, err := ReadFrame(bytes.NewReader(data), buf)
		if err != nil {
			return
		}
		if len(p) > MaxFrame {
			t.Fatalf("a payload of %d bytes, over the %d limit", len(p), MaxFrame)
		}
		var out bytes.Buffer
		if err := WriteFrame(&out, kind, p); err != nil {
			t.Fatalf("a frame read back cannot be written: %v", err)
		}
		if !bytes.HasPrefix(data, out.Bytes()) {
			t.Fatalf("frame round trip: %x -> %x", data, out.Bytes())
		}
	})
}
