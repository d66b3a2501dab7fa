package controller

// A human run's terminal recording: an asciicast v2 stream (asciinema's format: a header line,
// then one JSON array per event, [seconds, code, data]) of everything the person typed ("i"),
// everything the terminal showed ("o"), each window size ("r", "COLSxROWS") and each attach and
// detach (a marker, "m"). It is kept in segments as it is written: each segment is a body file
// (gzip, renamed into place once whole and synced) and an audit entry hashing it
// (audit.Terminal), so that the recording is bound by the audit chain as it grows, and a crash
// loses at most the segment under way.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
)

// Recording limits.
const (
	// SegmentBytes is the size at which a segment is closed (one is also closed every
	// FlushInterval while events come).
	SegmentBytes = 256 << 10
	// DefaultRecordingCap bounds a run's recording; past it the terminal's output is still
	// shown, counted and not kept (the recording says so).
	DefaultRecordingCap = 1 << 30
	// DefaultInputCap bounds what a recording keeps of what the person typed (the typing
	// allowance, 64 KiB a second, would fill its 1 GiB in four and a half hours); past it what is
	// typed still reaches the shell, counted and not kept (the recording says so). Input within it
	// is kept even past the recording's cap: it is the record of what the person did.
	DefaultInputCap = 64 << 20
)

// CastHeader is the asciicast v2 header of a recording.
type CastHeader struct {
	Version   int               `json:"version"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Timestamp int64             `json:"timestamp"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// Recording writes one run's terminal recording into its run directory's TerminalDir and its
// audit log.
type Recording struct {
	dir   string // the run directory
	log   *audit.Log
	start time.Time
	cap   int64
	inCap int64 // DefaultInputCap (a test's own)

	mu                 sync.Mutex
	inKept             int64 // input kept, the whole recording's
	inCapped           bool
	notRecordedIn      int64
	seg                bytes.Buffer
	segN               int
	from, to           float64
	events             int
	in, out, total     int64
	notRecorded        int64
	capped             bool
	pendingIn, pending []byte // an incomplete UTF-8 sequence at the end of the last input, output
	err                error
}

// NewRecording begins a recording at start, of a cols x rows terminal; cap bounds what it
// keeps (0: DefaultRecordingCap). Its header is the first segment's first line.
func NewRecording(runDir string, log *audit.Log, start time.Time, cols, rows int, title string, cap int64) (*Recording, error) {
	if cap <= 0 {
		cap = DefaultRecordingCap
	}
	if err := os.MkdirAll(filepath.Join(runDir, audit.TerminalDir), 0o700); err != nil {
		return nil, fmt.Errorf("terminal recording: %w", err)
	}
	r := &Recording{dir: runDir, log: log, start: start, cap: cap, inCap: DefaultInputCap}
	h, _ := json.Marshal(CastHeader{Version: 2, Width: cols, Height: rows, Timestamp: start.Unix(), Title: title,
		Env: map[string]string{"TERM": TerminalType, "SHELL": HumanShell}})
	r.seg.Write(h)
	r.seg.WriteByte('\n')
	return r, nil
}

// Output records what the terminal showed at t.
func (r *Recording) Output(p []byte, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.total >= r.cap {
		r.notRecorded += int64(len(p))
		if !r.capped {
			r.capped = true
			r.event(t, "m", fmt.Sprintf("sealrun: the recording keeps its first %d bytes; the terminal's output from here on is shown, not kept", r.cap))
		}
		return
	}
	r.out += int64(len(p))
	if s := decodeUTF8(&r.pending, p, false); s != "" {
		r.event(t, "o", s)
	}
}

// Input records what the person typed at t.
func (r *Recording) Input(p []byte, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inKept >= r.inCap {
		r.notRecordedIn += int64(len(p))
		if !r.inCapped {
			r.inCapped = true
			r.event(t, "m", fmt.Sprintf("sealrun: the recording keeps the first %d bytes typed; what is typed from here on reaches the shell, counted and not kept", r.inCap))
		}
		return
	}
	r.in += int64(len(p))
	r.inKept += int64(len(p))
	if s := decodeUTF8(&r.pendingIn, p, false); s != "" {
		r.event(t, "i", s)
	}
}

// Resize records a window size.
func (r *Recording) Resize(cols, rows int, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event(t, "r", strconv.Itoa(cols)+"x"+strconv.Itoa(rows))
}

// Marker records a marker (an attach, a detach).
func (r *Recording) Marker(label string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.event(t, "m", label)
}

// event appends one event line; the segment is committed once it is SegmentBytes.
func (r *Recording) event(t time.Time, code, data string) {
	sec := max(t.Sub(r.start).Seconds(), r.to) // never backwards
	js, _ := json.Marshal(data)                // valid UTF-8 (decodeUTF8); <, >, & escaped
	line := make([]byte, 0, len(js)+32)
	line = append(line, '[')
	line = strconv.AppendFloat(line, sec, 'f', 6, 64)
	line = append(line, ", \""...)
	line = append(line, code...)
	line = append(line, "\", "...)
	line = append(line, js...)
	line = append(line, "]\n"...)
	if r.events == 0 {
		r.from = sec
	}
	r.to = sec
	r.events++
	r.total += int64(len(line))
	r.seg.Write(line)
	if r.seg.Len() >= SegmentBytes {
		r.commit()
	}
}

// FlushEvery commits the segment under way every d while events come, until stop is called:
// what was typed and shown is in the audit chain within d.
func (r *Recording) FlushEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				r.Flush()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// Flush commits the segment under way, if it holds events.
func (r *Recording) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commit()
	return r.err
}

// Close records what is left of an incomplete character and commits the last segment. It
// returns the first error keeping a segment met.
func (r *Recording) Close(t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := decodeUTF8(&r.pending, nil, true); s != "" {
		r.event(t, "o", s)
	}
	if s := decodeUTF8(&r.pendingIn, nil, true); s != "" {
		r.event(t, "i", s)
	}
	r.commit()
	return r.err
}

// Err is the first error keeping a segment met.
func (r *Recording) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// commit keeps the segment under way (a body file, then its audit entry) and begins the next.
func (r *Recording) commit() {
	if r.events == 0 {
		return
	}
	r.segN++
	rec := audit.Terminal{Segment: r.segN, From: r.from, To: r.to, Events: r.events, InputBytes: r.in, OutputBytes: r.out,
		Bytes: int64(r.seg.Len()), SHA256: digest.Hex(sha256Hex(r.seg.Bytes())), NotRecorded: r.notRecorded, NotRecordedInput: r.notRecordedIn}
	rel := audit.TerminalSegmentPath(r.segN)
	bf := newBodyFile(filepath.Join(r.dir, filepath.Dir(rel)), filepath.Base(rel))
	bf.Write(r.seg.Bytes())
	if err := bf.Commit(); err != nil {
		rec.BodyError = err.Error()
		r.err = errors.Join(r.err, err)
	}
	if _, _, err := r.log.Append(audit.KindTerminal, rec); err != nil {
		r.err = errors.Join(r.err, err)
	}
	r.seg.Reset()
	r.events, r.in, r.out, r.notRecorded, r.notRecordedIn = 0, 0, 0, 0, 0
}

// decodeUTF8 turns p, after the bytes held back from before, into valid UTF-8: an incomplete
// character at the end is held back for the next call (unless final), and invalid bytes become
// U+FFFD, as asciinema's recorder does.
func decodeUTF8(pending *[]byte, p []byte, final bool) string {
	b := append(*pending, p...)
	cut := len(b)
	if !final {
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					cut = i
				}
				break
			}
		}
	}
	s := strings.ToValidUTF8(string(b[:cut]), "\uFFFD")
	*pending = append((*pending)[:0], b[cut:]...)
	return s
}
