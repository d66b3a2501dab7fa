package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

// ConflictError: the witness holds another size of the log than the request's old size (409
// with text/x.tlog.size). Size is the one it holds: resend with a proof from there.
type ConflictError struct {
	Witness string
	Size    uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness %s holds size %d of the log", e.Witness, e.Size)
}

// StatusError is any other refusal: the witness's status and its words.
type StatusError struct {
	Witness    string
	Status     int
	Text       string
	Location   string        // a redirect's, which is not followed
	RetryAfter time.Duration // a 429's Retry-After (seconds), 0 when absent
}

func (e *StatusError) Error() string {
	if e.Location != "" {
		return fmt.Sprintf("witness %s answered %d, a redirect to %s, which is not followed: give the witness's own URL (heads go to that address and nowhere else)", e.Witness, e.Status, trim(e.Location))
	}
	return fmt.Sprintf("witness %s answered %d: %s", e.Witness, e.Status, e.Text)
}

// NewClient is the HTTP client a log sends its heads with: it follows no redirect (a witness's
// URL cannot send the host's requests elsewhere), keeps no cookies and sends no credentials.
func NewClient() *http.Client {
	return &http.Client{
		Timeout:       20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RequestBody is an add-checkpoint request body: the old size, the proof, the signed checkpoint.
func RequestBody(old uint64, proof [][]byte, signed string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	b.WriteString("\n")
	b.WriteString(signed)
	return b.Bytes()
}

// Submit sends a signed checkpoint to the witness at url (its submission prefix) with a
// consistency proof from old, and returns the witness's cosignature line, checked with v. hc
// should be NewClient's: one that follows redirects would send the head where the answer says.
func Submit(ctx context.Context, hc *http.Client, url string, v *Verifier, old uint64, proof [][]byte, signed string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(url, "/")+"/add-checkpoint", bytes.NewReader(RequestBody(old, proof, signed)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "sealrun-witness-follower")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("witness %s: reading its answer: %w", v.Name(), err)
	}
	switch {
	case resp.StatusCode == http.StatusConflict && resp.Header.Get("Content-Type") == "text/x.tlog.size":
		n, err := strconv.ParseUint(strings.TrimSuffix(string(body), "\n"), 10, 64)
		if err != nil {
			return "", fmt.Errorf("witness %s: a 409 whose size %q is not a number", v.Name(), trim(string(body)))
		}
		return "", &ConflictError{Witness: v.Name(), Size: n}
	case resp.StatusCode != http.StatusOK:
		e := &StatusError{Witness: v.Name(), Status: resp.StatusCode, Text: trim(strings.TrimSpace(string(body)))}
		if resp.StatusCode/100 == 3 {
			e.Location = resp.Header.Get("Location")
			if e.Location == "" {
				e.Location = "(no Location)"
			}
		}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			e.RetryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		return "", e
	}
	line, err := Pick(signed, string(body), v)
	if err != nil {
		return "", fmt.Errorf("witness %s answered 200 but %w", v.Name(), err)
	}
	return line, nil
}

// Pick finds, among signature lines (a witness's answer, or the signatures of a cosigned
// checkpoint), the one of v over the signed checkpoint, and checks it.
func Pick(signed, lines string, v *Verifier) (string, error) {
	for _, l := range strings.SplitAfter(lines, "\n") {
		if !strings.HasPrefix(l, "— "+v.Name()+" ") || !strings.HasSuffix(l, "\n") {
			continue
		}
		if _, err := note.Open([]byte(signed+l), note.VerifierList(v)); err == nil {
			return l, nil
		}
	}
	return "", errors.New("no cosignature of its key over the checkpoint")
}
