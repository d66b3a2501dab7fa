package runner

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"
)

// The agent socket's paths (POST, JSON body) — PROTOCOL.md.
const (
	PathCall     = "/v1/call"
	PathTimeLeft = "/v1/time_left"
	PathStatus   = "/v1/status"
	PathSubmit   = "/v1/submit"
	PathPromote  = "/v1/promote"
	PathFinalize = "/v1/finalize"
	PathHistory  = "/v1/history"
)

// SocketPath is where the agent socket is mounted in the controller.
const SocketPath = "/run/sealrun/agent.sock"

// Bounds of agent requests.
const (
	MaxBodyBytes = 1 << 20   // request body
	MaxArgs      = 256       // argv entries
	MaxArgvBytes = 128 << 10 // argv bytes in all
	MaxEnv       = 64        // --env entries
	MaxEnvBytes  = 32 << 10  // env bytes in all
)

// Exit statuses the client returns besides the command's own.
const (
	ExitLimit   = 124 // the call limit killed the command
	ExitRefused = 125 // refused (reserve window, another call, run over, bad request) or an infrastructure error
)

// CallRequest is POST /v1/call.
type CallRequest struct {
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"` // the caller's cwd when inside /workspace
	Env  []string `json:"env,omitempty"` // KEY=VALUE from runner --env
}

// ArgRequest is the body of submit (Arg: a directory; Cwd to resolve it), promote and finalize
// (Arg: a candidate id or unique prefix; finalize's may be empty).
type ArgRequest struct {
	Arg string `json:"arg,omitempty"`
	Cwd string `json:"cwd,omitempty"`
}

// Frames of a response body: one kind byte, a 4-byte big-endian length, the payload.
const (
	FrameStdout = 'o' // bytes for the client's stdout (a call's output, a verb's result)
	FrameStderr = 'e' // sealrun's own lines for the client's stderr (time left, notes, reasons)
	FrameExit   = 'x' // the exit status, decimal ASCII; always the last frame
	MaxFrame    = 1 << 20
)

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, kind byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame (payload at most MaxFrame bytes).
func ReadFrame(r io.Reader, buf []byte) (kind byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes; at most %d", n, MaxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return hdr[0], buf, nil
}

// FormatDuration renders a duration as 41m07s, 1h02m03s or 9s (whole seconds, rounded down).
func FormatDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	h, m, sec := s/3600, s/60%60, s%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, sec)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}

// TimeLine is the first line of every response.
func TimeLine(left time.Duration, reserve, over bool) string {
	switch {
	case over:
		return "[time left 0s — the run is over]"
	case reserve:
		return "[time left " + FormatDuration(left) + " — reserve window: submit/promote/finalize only]"
	}
	return "[time left " + FormatDuration(left) + "]"
}

// shellQuote renders argv for messages and status (not for execution).
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	s := strings.Join(out, " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// EncodeCall is a call as the shim of a runner container started before it (`ShimPath _await`,
// warm_linux.go) reads it from stdin: fields each ended by a NUL, "C" and the directory, "E" and
// KEY=VALUE for each variable the call adds to the container's environment (in order: the shim
// sets each, a later one replacing an earlier, as the runtime sets a spec's), "A" and each
// argument. A valid call (validateCall) holds no NUL, so every field ends where its NUL is. The
// shims (cmd/runner-exec, cmd/runner) refuse any other form, or one over MaxBodyBytes or
// MaxArgs arguments.
func EncodeCall(cwd string, env, argv []string) []byte {
	n := len(cwd) + 2
	for _, f := range env {
		n += len(f) + 2
	}
	for _, f := range argv {
		n += len(f) + 2
	}
	b := make([]byte, 0, n)
	field := func(kind byte, v string) {
		b = append(append(append(b, kind), v...), 0)
	}
	field('C', cwd)
	for _, e := range env {
		field('E', e)
	}
	for _, a := range argv {
		field('A', a)
	}
	return b
}
