package api

// Attaching to a human run's terminal (daemon/API.md, "Attach"): POST /v1/runs/{id}/attach
// (?watch=1 for a proctor) upgraded to the protocol AttachProtocol, then frames both ways on the
// admin socket's connection. A frame is one byte of type, four of payload length (big-endian)
// and the payload, at most MaxFrame bytes.

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
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

// Attachment is a client's side of an attach: Output is what the terminal shows; Input, Resize
// and Detach go to sealrund.
type Attachment struct {
	conn net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
}

// Attach attaches to run id's terminal: a person's (watch false) or a proctor's, read-only.
func (c *Client) Attach(ctx context.Context, id string, watch bool, cols, rows int) (*Attachment, error) {
	return c.AttachWith(ctx, id, AttachOptions{Watch: watch, Cols: cols, Rows: rows})
}

// AttachOptions are an attach's: read-only (a proctor's view), the window's size, the ssh key the
// person authenticated with (its SHA256 fingerprint; sshd's ExposeAuthInfo gives it to the
// ForceCommand), and an operator's reason for taking the terminal over.
type AttachOptions struct {
	Watch      bool
	Cols, Rows int
	Key        string
	Takeover   string
}

// AttachWith is Attach with every option.
func (c *Client) AttachWith(ctx context.Context, id string, o AttachOptions) (*Attachment, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, c.dialError(err)
	}
	q := url.Values{}
	if o.Cols > 0 && o.Rows > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	if o.Watch {
		q.Set("watch", "1")
	}
	if o.Key != "" {
		q.Set("key", o.Key)
	}
	if o.Takeover != "" {
		q.Set("takeover", o.Takeover)
	}
	query := ""
	if len(q) > 0 {
		query = "?" + q.Encode()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://sealrund/v1/runs/"+url.PathEscape(id)+"/attach"+query, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", AttachProtocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, MaxFrame+5)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("attach to %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, answerError(resp.StatusCode, resp.Status, data, "attach to "+id+": ")
	}
	return &Attachment{conn: conn, br: br}, nil
}

// Next returns the next output of the terminal, or (nil, reason, nil) once the attachment has
// ended, with sealrund's reason.
func (a *Attachment) Next() (out []byte, ended string, err error) {
	for {
		typ, p, err := ReadFrame(a.br)
		if err != nil {
			return nil, "", err
		}
		switch typ {
		case FrameOutput:
			return p, "", nil
		case FrameEnd:
			return nil, string(p), nil
		}
	}
}

func (a *Attachment) send(typ byte, p []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return WriteFrame(a.conn, typ, p)
}

// Input sends what the person typed, in frames of at most MaxFrame.
func (a *Attachment) Input(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxFrame)
		if err := a.send(FrameInput, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sends the window's size.
func (a *Attachment) Resize(cols, rows int) error { return a.send(FrameResize, FormatSize(cols, rows)) }

// Detach leaves the terminal (the shell goes on); Next then returns the end.
func (a *Attachment) Detach() error { return a.send(FrameDetach, nil) }

// Close closes the connection (a dropped connection detaches too).
func (a *Attachment) Close() error { return a.conn.Close() }
