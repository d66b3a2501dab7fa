package client

// A client's side of an attach (api/attach.go has the protocol and its frames).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/sealrun/sealrun/api"
)

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
	req.Header.Set("Upgrade", api.AttachProtocol)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, api.MaxFrame+5)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("attach to %s: %w", id, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, api.AnswerError(resp.StatusCode, resp.Status, data, "attach to "+id+": ")
	}
	return &Attachment{conn: conn, br: br}, nil
}

// Next returns the next output of the terminal, or (nil, reason, nil) once the attachment has
// ended, with sealrund's reason.
func (a *Attachment) Next() (out []byte, ended string, err error) {
	for {
		typ, p, err := api.ReadFrame(a.br)
		if err != nil {
			return nil, "", err
		}
		switch typ {
		case api.FrameOutput:
			return p, "", nil
		case api.FrameEnd:
			return nil, string(p), nil
		}
	}
}

func (a *Attachment) send(typ byte, p []byte) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return api.WriteFrame(a.conn, typ, p)
}

// Input sends what the person typed, in frames of at most api.MaxFrame.
func (a *Attachment) Input(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), api.MaxFrame)
		if err := a.send(api.FrameInput, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sends the window's size.
func (a *Attachment) Resize(cols, rows int) error {
	return a.send(api.FrameResize, api.FormatSize(cols, rows))
}

// Detach leaves the terminal (the shell goes on); Next then returns the end.
func (a *Attachment) Detach() error { return a.send(api.FrameDetach, nil) }

// Close closes the connection (a dropped connection detaches too).
func (a *Attachment) Close() error { return a.conn.Close() }
