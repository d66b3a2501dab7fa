package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
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
//
// A request is refused, before it is counted against anything, when it cannot be a checkpoint
// of a log it follows: malformed, of another origin, or bearing no signature line of that log's
// key. What is left costs a signature check and is counted against its client's budget; what
// would move a log's head (an fsync) is counted against that log's, which only the log's key
// can spend: a replayed checkpoint moves nothing. Refusals are logged at a bounded rate.
type Server struct {
	signer   *Cosigner
	logs     map[string]note.Verifiers
	store    *Store
	log      *slog.Logger
	now      func() time.Time
	clients  *limiter[clientKey]
	heads    *limiter[string]
	proxies  []netip.Prefix
	refused  *refusals
	viaProxy sync.Once
}

// Config configures a Server.
type Config struct {
	Signer *Cosigner
	Logs   []Log
	Store  *Store
	Log    *slog.Logger // a line per cosignature; refusals at most a few a second; nil: discarded
	// Rate bounds a client's requests (per second, with a burst of twice that): 0 means 20. A
	// client is an IPv4 address or an IPv6 /64. Over it: 429.
	Rate float64
	// LogRate bounds how often one log's head moves (per second, a burst of twice that): 0
	// means 10. Over it: 429.
	LogRate float64
	// TrustedProxies are the proxies whose X-Forwarded-For names the client; from anyone else
	// the header is ignored.
	TrustedProxies []netip.Prefix
	// MaxClients bounds the clients the limiter keeps a budget for (0: DefaultMaxClients).
	MaxClients int
	Now        func() time.Time // the cosignatures' clock; nil: time.Now
}

// NewServer returns a witness server.
func NewServer(c Config) (*Server, error) {
	if c.Signer == nil || c.Store == nil {
		return nil, errors.New("witness: a signer and a store are required")
	}
	s := &Server{signer: c.Signer, logs: map[string]note.Verifiers{}, store: c.Store, log: c.Log, now: c.Now, proxies: c.TrustedProxies}
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
	rate, logRate := c.Rate, c.LogRate
	if rate <= 0 {
		rate = 20
	}
	if logRate <= 0 {
		logRate = 10
	}
	if c.MaxClients <= 0 {
		c.MaxClients = DefaultMaxClients
	}
	s.clients = newLimiter[clientKey](rate, 2*rate, c.MaxClients)
	s.heads = newLimiter[string](logRate, 2*logRate, max(len(s.logs), 1))
	s.refused = newRefusals(s.log, 5)
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
	client, viaProxy, err := clientOf(r, s.proxies)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if viaProxy {
		s.viaProxy.Do(func() {
			s.log.Warn("a request came through a proxy this witness does not trust (X-Forwarded-For from "+client.String()+"): its clients share that proxy's budget; name it with --trusted-proxy", "proxy", client.String())
		})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, client, fail(http.StatusRequestEntityTooLarge, "request body over %d bytes", MaxRequestBody))
			return
		}
		s.refuse(w, client, fail(http.StatusBadRequest, "reading the request: %v", err))
		return
	}
	req, err := s.parse(body)
	if err != nil {
		s.refuse(w, client, err)
		return
	}
	if !s.clients.allow(client, time.Now()) {
		w.Header().Set("Retry-After", "1")
		s.refuse(w, client, fail(http.StatusTooManyRequests, "too many requests from %s (%g a second)", client, s.clients.rate))
		return
	}
	line, err := s.add(req)
	if err != nil {
		var e *requestError
		if errors.As(err, &e) && e.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		s.refuse(w, client, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, line)
}

// refuse answers err (a requestError, or a 500) and logs it at the refusals' rate.
func (s *Server) refuse(w http.ResponseWriter, client clientKey, err error) {
	var e *requestError
	if !errors.As(err, &e) {
		e = fail(http.StatusInternalServerError, "%v", err)
	}
	s.refused.note(time.Now(), "add-checkpoint refused", "client", client.String(), "status", e.status, "why", e.msg)
	if e.isSize {
		w.Header().Set("Content-Type", "text/x.tlog.size")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", e.size)
		return
	}
	http.Error(w, e.msg, e.status)
}

// request is an add-checkpoint request that could be a checkpoint of a log this witness follows.
type request struct {
	old    uint64
	proof  [][]byte
	signed []byte
	origin string
	keys   note.Verifiers
}

// parse checks, without any signature check, that body can be a checkpoint of a log this
// witness follows: the request's form, the origin, and a signature line of one of its keys.
func (s *Server) parse(body []byte) (*request, error) {
	old, proof, signed, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	origin, _, _ := strings.Cut(string(signed), "\n")
	keys, ok := s.logs[origin]
	if !ok {
		return nil, fail(http.StatusNotFound, "unknown log %q: this witness does not follow it", trim(origin))
	}
	text, sigs, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok || !hasSignatureBy(sigs, keys) {
		return nil, fail(http.StatusForbidden, "checkpoint of %s: no signature line of the log's key", origin)
	}
	if _, err := ledger.ParseCheckpoint(string(text) + "\n"); err != nil {
		return nil, fail(http.StatusBadRequest, "checkpoint of %s: %v", origin, err)
	}
	return &request{old: old, proof: proof, signed: signed, origin: origin, keys: keys}, nil
}

// hasSignatureBy says whether a note's signature lines include one whose key name and hash are
// one of keys (its signature is not checked).
func hasSignatureBy(sigs []byte, keys note.Verifiers) bool {
	for l := range strings.SplitSeq(string(sigs), "\n") {
		rest, ok := strings.CutPrefix(l, "— ")
		name, b64, ok2 := strings.Cut(rest, " ")
		if !ok || !ok2 {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(sig) < 5 {
			continue
		}
		if _, err := keys.Verifier(name, binary.BigEndian.Uint32(sig)); err == nil {
			return true
		}
	}
	return false
}

// AddCheckpoint handles one request body and returns the cosignature line, or an error
// carrying the status the protocol gives it.
func (s *Server) AddCheckpoint(body []byte) (string, error) {
	req, err := s.parse(body)
	if err != nil {
		return "", err
	}
	return s.add(req)
}

func (s *Server) add(req *request) (string, error) {
	origin, old, proof := req.origin, req.old, req.proof
	n, err := note.Open(req.signed, req.keys)
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
	moved := false
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
		next := Head{Size: cp.Size, Root: cp.Root}
		if next != cur {
			// The head moves (an fsync): the log's own budget, which only its key can spend.
			if !s.heads.allow(origin, time.Now()) {
				return cur, fail(http.StatusTooManyRequests, "the head of %s moved more than %g times a second", origin, s.heads.rate)
			}
			moved = true
		}
		return next, nil
	})
	if err != nil {
		return "", err
	}
	if moved {
		s.log.Info("cosigned", "origin", origin, "old", old, "size", cp.Size)
	}
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
