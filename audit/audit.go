// Package audit owns the audit log of a run: an append-only file of JSON Lines, one entry per
// runner call, gateway request and submission, hash-chained so that the head hash recorded in
// the attestation binds every entry in order. It has the chain primitive (also used for the
// submission history), the writer (append + fsync, one goroutine-safe Append per entry) and the
// reader that recomputes a head. It imports no sibling package and builds for every OS: the
// verify path (attest) recomputes heads with it.
//
// The chain: head_0 = 64 zeros; head_i = lowercase hex SHA-256(head_{i-1} || "\n" || line_i),
// where line_i is the entry's bytes without its newline. attest/VERIFY.md has a shell recipe.
package audit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/sealrun/sealrun/internal/fileio"
)

// ZeroHead is the head of an empty hash chain.
var ZeroHead = strings.Repeat("0", 64)

// ChainNext extends a hash chain: lowercase hex SHA-256 of prev (64 hex characters), a newline,
// and the entry's bytes.
func ChainNext(prev string, entry []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	h.Write(entry)
	return hex.EncodeToString(h.Sum(nil))
}

// MaxLineBytes bounds one audit log entry.
const MaxLineBytes = 1 << 20

// Head reads an audit log (JSON Lines, each line one entry, every line ended by "\n") and
// returns the head of its chain and the entry count.
func Head(r io.Reader) (head string, entries int, err error) { return Scan(r, nil) }

// scanReaders are Scan's line buffers (one line's bound each): a reader checking a thousand runs
// scans each run's log more than once, and a fresh megabyte per scan was a tenth of its time,
// zeroing memory.
var scanReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, MaxLineBytes+1) }}

// Scan reads an audit log as Head does, and hands each entry (its JSON line, without the
// newline, valid until the next call) to each, when each is not nil.
func Scan(r io.Reader, each func(line []byte)) (head string, entries int, err error) {
	br := scanReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		scanReaders.Put(br)
	}()
	head = ZeroHead
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", 0, fmt.Errorf("audit log line %d is longer than %d bytes", entries+1, MaxLineBytes)
		}
		if err == io.EOF {
			if len(line) > 0 {
				return "", 0, fmt.Errorf("audit log line %d does not end with a newline (truncated log?)", entries+1)
			}
			return head, entries, nil
		}
		if err != nil {
			return "", 0, fmt.Errorf("read audit log: %w", err)
		}
		line = line[:len(line)-1]
		if len(line) == 0 || !json.Valid(line) {
			return "", 0, fmt.Errorf("audit log line %d is not a JSON entry", entries+1)
		}
		head = ChainNext(head, line)
		entries++
		if each != nil {
			each(line)
		}
	}
}

// Log is an open audit log. Append writes one entry and fsyncs before it returns: an entry
// Append acknowledged survives a crash. Entries carry their sequence number and the previous
// head, so each line can be checked on its own too.
type Log struct {
	mu       sync.Mutex
	f        *os.File
	path     string
	head     string
	entries  int
	end      int64 // the file's size: just past the last whole entry (fileio.AppendSync)
	broken   error // an append whose part written could not be taken back: no more entries
	onAppend func(kind string, line []byte)
}

// OnAppend calls f with every entry once it is durable (after the fsync), outside the log's
// lock: the daemon shows a run's activity live with it. f must not block.
func (l *Log) OnAppend(f func(kind string, line []byte)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onAppend = f
}

// Open opens (creating it if needed) the audit log at path and recomputes its head. A log whose
// last line was cut by a crash (no newline) is refused: it is evidence, never repaired silently.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	head, n, err := Head(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	return &Log{f: f, path: path, head: head, entries: n, end: end}, nil
}

// Entry is the envelope every audit line has; Append fills Seq and Prev and adds the body's
// fields beside them.
type Entry struct {
	Seq  int    `json:"seq"`
	Prev string `json:"prev"` // the head before this entry
	Kind string `json:"kind"` // "call", "gateway", "submit", ...
}

// Append adds one entry of kind with the fields of body (a struct or map, marshalled to a JSON
// object) and returns its sequence number (1-based) and the new head.
func (l *Log) Append(kind string, body any) (seq int, head string, err error) {
	b, err := json.Marshal(body)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return 0, "", fmt.Errorf("audit entry %s: the body must be a JSON object (%v)", kind, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, "", errors.New("audit log is closed")
	}
	env, _ := json.Marshal(Entry{Seq: l.entries + 1, Prev: l.head, Kind: kind})
	line := make([]byte, 0, len(env)+len(b)+1)
	line = append(line, env[:len(env)-1]...)
	if len(b) > 2 {
		line = append(line, ',')
		line = append(line, b[1:]...)
	} else {
		line = append(line, '}')
	}
	if len(line) > MaxLineBytes {
		return 0, "", fmt.Errorf("audit entry %s is %d bytes; at most %d", kind, len(line), MaxLineBytes)
	}
	if l.broken != nil {
		return 0, "", l.broken
	}
	// A full disk that takes part of the entry leaves nothing of it: the log stays a chain of
	// whole lines, which the attestation's head binds.
	end, err := fileio.AppendSync(l.f, l.end, append(line, '\n'))
	if err != nil {
		err = fmt.Errorf("append to audit log %s: %w", l.path, err)
		if errors.Is(err, fileio.ErrTorn) {
			l.broken = err
		}
		return 0, "", err
	}
	l.end = end
	l.head = ChainNext(l.head, line)
	l.entries++
	seq, head, hook := l.entries, l.head, l.onAppend
	if hook != nil {
		l.mu.Unlock()
		hook(kind, line)
		l.mu.Lock()
	}
	return seq, head, nil
}

// Head returns the current head and entry count.
func (l *Log) Head() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, l.entries
}

// Path is the log's file.
func (l *Log) Path() string { return l.path }

// Close closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
