package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/ledger"
	"golang.org/x/mod/sumdb/note"
)

// Limits of one add-checkpoint request: the spec's 63 proof lines, and a checkpoint no larger
// than a ledger writes.
const (
	MaxProofLines  = 63
	MaxRequestBody = 16 << 10
)

// Log is one log a witness follows: its origin and the keys its checkpoints are signed with.
type Log struct {
	Origin string
	Keys   []note.Verifier
}

// Server answers add-checkpoint requests (C2SP tlog-witness) for the logs it follows.
type Server struct {
	signer *Cosigner
	logs   map[string]note.Verifiers
	store  *Store
	log    *slog.Logger
	now    func() time.Time
	limit  *limiter
}

// Config configures a Server.
type Config struct {
	Signer *Cosigner
	Logs   []Log
	Store  *Store
	Log    *slog.Logger // one line per answer (origin, sizes, status); nil: discarded
	// Rate bounds requests per client address (per second, with a burst of twice that): 0
	// means 20. A client over it is answered 429.
	Rate float64
	Now  func() time.Time // the cosignatures' clock; nil: time.Now
}

// NewServer returns a witness server.
func NewServer(c Config) (*Server, error) {
	if c.Signer == nil || c.Store == nil {
		return nil, errors.New("witness: a signer and a store are required")
	}
	s := &Server{signer: c.Signer, logs: map[string]note.Verifiers{}, store: c.Store, log: c.Log, now: c.Now}
	for _, l := range c.Logs {
		if err := checkName("log origin", l.Origin); err != nil {
			return nil, err
		}
		if len(l.Keys) == 0 {
			return nil, fmt.Errorf("witness: log %s has no key", l.Origin)
		}
		for _, k := range l.Keys {
			if k.Name() != l.Origin {
				return nil, fmt.Errorf("witness: log %s: a key named %q (a log's key is named by its origin)", l.Origin, k.Name())
			}
		}
		if _, dup := s.logs[l.Origin]; dup {
			return nil, fmt.Errorf("witness: log %s is listed twice; give it every key in one entry", l.Origin)
		}
		s.logs[l.Origin] = note.VerifierList(l.Keys...)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	rate := c.Rate
	if rate <= 0 {
		rate = 20
	}
	s.limit = newLimiter(rate, 2*rate)
	return s, nil
}

// requestError is an answer other than 200: its status and text.
type requestError struct {
	status int
	msg    string
	size   uint64 // 409 on a size mismatch: the size the witness holds
	isSize bool
}

func (e *requestError) Error() string { return e.msg }

func fail(status int, format string, args ...any) *requestError {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

// ServeHTTP serves POST /add-checkpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/add-checkpoint" {
		http.Error(w, "not found: a witness serves POST /add-checkpoint (C2SP tlog-witness)", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "add-checkpoint takes POST", http.StatusMethodNotAllowed)
		return
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !s.limit.allow(host, s.now()) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests from "+host, http.StatusTooManyRequests)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over %d bytes", MaxRequestBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	line, rerr := s.AddCheckpoint(body)
	if rerr != nil {
		var e *requestError
		if !errors.As(rerr, &e) {
			e = fail(http.StatusInternalServerError, "%v", rerr)
		}
		s.log.Info("add-checkpoint refused", "client", host, "status", e.status, "why", e.msg)
		if e.isSize {
			w.Header().Set("Content-Type", "text/x.tlog.size")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, "%d\n", e.size)
			return
		}
		http.Error(w, e.msg, e.status)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, line)
}

// AddCheckpoint handles one request body and returns the cosignature line, or an error
// carrying the status the protocol gives it.
func (s *Server) AddCheckpoint(body []byte) (string, error) {
	old, proof, signed, err := parseRequest(body)
	if err != nil {
		return "", err
	}
	origin, _, _ := strings.Cut(string(signed), "\n")
	keys, ok := s.logs[origin]
	if !ok {
		return "", fail(http.StatusNotFound, "unknown log %q: this witness does not follow it", trim(origin))
	}
	n, err := note.Open(signed, keys)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return "", fail(http.StatusForbidden, "checkpoint of %s: no signature by the log's key verifies", origin)
		}
		return "", fail(http.StatusBadRequest, "checkpoint of %s: %v", origin, err)
	}
	cp, err := ledger.ParseCheckpoint(n.Text)
	if err != nil {
		return "", fail(http.StatusBadRequest, "checkpoint of %s: %v", origin, err)
	}
	if old > cp.Size {
		return "", fail(http.StatusBadRequest, "old size %d is larger than the checkpoint's %d", old, cp.Size)
	}
	if cp.Size == 0 && cp.Root != emptyRoot {
		return "", fail(http.StatusBadRequest, "a checkpoint of size 0 whose root is not the empty tree's")
	}
	if old == 0 && len(proof) > 0 {
		return "", fail(http.StatusUnprocessableEntity, "a consistency proof from size 0 is empty; got %d lines", len(proof))
	}
	err = s.store.Update(origin, func(cur Head) (Head, error) {
		if old != cur.Size {
			return cur, &requestError{status: http.StatusConflict, msg: fmt.Sprintf("old size %d; this witness holds %d", old, cur.Size), size: cur.Size, isSize: true}
		}
		switch {
		case old == cp.Size && old > 0:
			if cp.Root != cur.Root {
				return cur, fail(http.StatusConflict, "checkpoint of %s at size %d has a root hash other than the one this witness cosigned at that size: the log shows two trees", origin, old)
			}
		case old > 0:
			if err := ledger.VerifyConsistency(old, cp.Size, proof, cur.Root, cp.Root); err != nil {
				return cur, fail(http.StatusUnprocessableEntity, "consistency proof from %d to %d does not verify: %v", old, cp.Size, err)
			}
		}
		return Head{Size: cp.Size, Root: cp.Root}, nil
	})
	if err != nil {
		return "", err
	}
	s.log.Info("cosigned", "origin", origin, "old", old, "size", cp.Size)
	return s.signer.Cosign([]byte(n.Text), s.now()), nil
}

// emptyRoot is the root hash of the empty tree (RFC 6962: SHA-256 of nothing).
var emptyRoot = ledger.Hash(sha256.Sum256(nil))

// parseRequest splits a body into the old size, the proof and the signed checkpoint.
func parseRequest(body []byte) (old uint64, proof [][]byte, signed []byte, err error) {
	rest := body
	next := func() (string, bool) {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return "", false
		}
		l := string(rest[:i])
		rest = rest[i+1:]
		return l, true
	}
	first, ok := next()
	sizeText, isOld := strings.CutPrefix(first, "old ")
	if !ok || !isOld {
		return 0, nil, nil, fail(http.StatusBadRequest, "the body starts with an old size line (\"old N\"); got %q", trim(first))
	}
	old, perr := strconv.ParseUint(sizeText, 10, 64)
	if perr != nil || (sizeText != "0" && strings.HasPrefix(sizeText, "0")) {
		return 0, nil, nil, fail(http.StatusBadRequest, "old size %q is not a decimal number without leading zeros", trim(sizeText))
	}
	for {
		l, ok := next()
		if !ok {
			return 0, nil, nil, fail(http.StatusBadRequest, "no empty line after the consistency proof")
		}
		if l == "" {
			break
		}
		if len(proof) == MaxProofLines {
			return 0, nil, nil, fail(http.StatusBadRequest, "more than %d consistency proof lines", MaxProofLines)
		}
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != sha256.Size {
			return 0, nil, nil, fail(http.StatusBadRequest, "consistency proof line %d is not a base64 SHA-256 hash", len(proof)+1)
		}
		proof = append(proof, h)
	}
	if len(rest) == 0 {
		return 0, nil, nil, fail(http.StatusBadRequest, "no checkpoint after the empty line")
	}
	return old, proof, rest, nil
}

// trim keeps an echoed input short.
func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// limiter is a token bucket per client address.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(rate, burst float64) *limiter {
	return &limiter{rate: rate, burst: burst, buckets: map[string]*bucket{}}
}

func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buckets) > 10000 { // forget idle clients rather than grow without bound
		for k, b := range l.buckets {
			if now.Sub(b.at).Seconds()*l.rate >= l.burst {
				delete(l.buckets, k)
			}
		}
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// ServerFor is a witness server following one log, origin's, whose heads are signed with logPub
// (the host's public key), cosigning with c and keeping its heads in st: the demo's witness, and
// the tests'.
func ServerFor(c *Cosigner, origin string, logPub any, st *Store) (*Server, error) {
	logKey, err := ledger.VerifierKey(origin, logPub)
	if err != nil {
		return nil, err
	}
	lv, err := LogVerifier(logKey)
	if err != nil {
		return nil, err
	}
	return NewServer(Config{Signer: c, Logs: []Log{{Origin: origin, Keys: []note.Verifier{lv}}}, Store: st})
}
