package api

// Attaching to a human run's terminal (daemon/API.md, "Attach"): POST /v1/runs/{id}/attach
// (?watch=1 for a proctor) upgraded to the protocol AttachProtocol, then frames both ways on the
// admin socket's connection. A frame is one byte of type, four of payload length (big-endian)
// and the payload, at most MaxFrame bytes.

import (
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// AttachProtocol is the Upgrade token of an attach.
const AttachProtocol = "sealrun-attach/1"

// MaxFrame is the largest frame payload either side sends or takes.
const MaxFrame = 64 << 10

// Frame types. From the client: FrameInput (what the person typed), FrameResize ("COLSxROWS"),
// FrameDetach (leaving; the shell goes on). From sealrund: FrameOutput (what the terminal
// showed), FrameEnd (the attachment ended; the payload says why).
const (
	FrameInput  byte = 'i'
	FrameResize byte = 'r'
	FrameDetach byte = 'd'
	FrameOutput byte = 'o'
	FrameEnd    byte = 'e'
)

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("attach frame %q: %d bytes, at most %d", typ, len(payload), MaxFrame)
	}
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ReadFrame reads one frame; a length over MaxFrame is refused before anything of it is read.
func ReadFrame(r io.Reader) (typ byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("attach frame %q of %d bytes: at most %d", h[0], n, MaxFrame)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, fmt.Errorf("attach frame %q cut short: %w", h[0], err)
	}
	return h[0], payload, nil
}

// FormatSize and ParseSize are a FrameResize's payload.
func FormatSize(cols, rows int) []byte { return []byte(strconv.Itoa(cols) + "x" + strconv.Itoa(rows)) }

// ParseSize reads "COLSxROWS" (each 1 to 4096).
func ParseSize(b []byte) (cols, rows int, err error) {
	c, r, ok := strings.Cut(string(b), "x")
	cols, err1 := strconv.Atoi(c)
	rows, err2 := strconv.Atoi(r)
	if !ok || err1 != nil || err2 != nil || cols < 1 || rows < 1 || cols > 4096 || rows > 4096 {
		return 0, 0, fmt.Errorf("window size %.40q: write COLSxROWS, each 1 to 4096", b)
	}
	return cols, rows, nil
}
