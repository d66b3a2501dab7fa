package ledger

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Heads remembers the signed heads already opened, so that a reader checking many attestations
// under the same head (a publication of a thousand runs, a board of ten thousand) verifies its
// signature once. It is keyed by the head's exact text, the origin and the very verifiers
// given; it is meant to live as long as one check of many (never a daemon's lifetime). Safe for
// concurrent use; a nil *Heads remembers nothing.
type Heads struct {
	m sync.Map // headKey -> Checkpoint

	// deferred (DeferredHeads): Open leaves the signature to Settle; pending are those heads.
	deferred bool
	mu       sync.Mutex
	pending  map[headKey][]signature.Verifier
}

type headKey struct{ text, origin, keys string }

// Open is OpenCheckpoint, once per distinct head. Heads from DeferredHeads check all but the
// signature here, and the signature in Settle.
func (h *Heads) Open(text, origin string, keys []signature.Verifier) (Checkpoint, error) {
	if h == nil {
		return OpenCheckpoint(text, origin, keys)
	}
	var ids strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&ids, "%p,", k)
	}
	k := headKey{text, origin, ids.String()}
	if h.deferred {
		c, err := openUnsigned(text, origin)
		if err == nil {
			h.mu.Lock()
			h.pending[k] = keys
			h.mu.Unlock()
		}
		return c, err
	}
	return h.open(k, keys)
}

// open opens k's head with keys, once.
func (h *Heads) open(k headKey, keys []signature.Verifier) (Checkpoint, error) {
	if c, ok := h.m.Load(k); ok {
		return c.(Checkpoint), nil
	}
	c, err := OpenCheckpoint(k.text, k.origin, keys)
	if err == nil {
		h.m.Store(k, c)
	}
	return c, err
}

// DeferredHeads returns Heads for a reader that also verifies the ledgers the heads come from
// (sealrun leaderboard --ledger): Open checks a head's form and origin but leaves its signature
// to Settle, which needs none for a head a verified ledger vouches for. So the ledger's one
// signature stands for the heads of ten thousand attestations, and the attestations are
// checked while the ledger is read.
func DeferredHeads() *Heads {
	return &Heads{deferred: true, pending: map[headKey][]signature.Verifier{}}
}

// openUnsigned is OpenCheckpoint without the signature: the size bound, the origin and the
// checkpoint's form.
func openUnsigned(signed, origin string) (Checkpoint, error) {
	body, err := signedOrigin(signed, origin)
	if err != nil {
		return Checkpoint{}, err
	}
	text, _, ok := strings.Cut(signed, "\n\n")
	if !ok {
		return Checkpoint{}, fmt.Errorf("checkpoint of %q: malformed note (no signatures)", body)
	}
	return ParseCheckpoint(text + "\n")
}

// Settle checks every head Open left unchecked (DeferredHeads). A head needs no signature of
// its own when a ledger of its origin, whose own last head is signed by one of the same keys,
// holds at the head's size exactly the head's root: that signed head commits to every entry
// before it, so to every root the ledger had. Any other head is verified as Open would have.
// It returns, by the head's text, why each that failed did; the caller rejects what carried it.
// ledgers must each have been read and verified (Read).
func (h *Heads) Settle(ledgers []*Ledger) map[string]error {
	if h == nil || !h.deferred {
		return nil
	}
	h.mu.Lock()
	var todo []headKey
	for k := range h.pending {
		todo = append(todo, k)
	}
	h.mu.Unlock()
	// A head that is one of a ledger's own, as it wrote it, had its root checked when the
	// ledger was read: no tree root to compute again.
	own := make([]map[string]bool, len(ledgers))
	for i, l := range ledgers {
		own[i] = make(map[string]bool, len(l.Heads))
		for _, t := range l.Heads {
			own[i][t] = true
		}
	}
	failed := map[string]error{}
	var mu sync.Mutex
	next := make(chan headKey)
	var wg sync.WaitGroup
	for range min(len(todo), max(1, runtime.NumCPU())) {
		wg.Go(func() {
			for k := range next {
				keys := h.pending[k]
				if h.vouched(k, keys, ledgers, own) {
					continue
				}
				if _, err := OpenCheckpoint(k.text, k.origin, keys); err != nil {
					mu.Lock()
					failed[k.text] = err
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range todo {
		next <- k
	}
	close(next)
	wg.Wait()
	return failed
}

// vouched says whether one of ledgers vouches for the head k (Settle).
func (h *Heads) vouched(k headKey, keys []signature.Verifier, ledgers []*Ledger, own []map[string]bool) bool {
	c, err := openUnsigned(k.text, k.origin)
	if err != nil {
		return false
	}
	for i, l := range ledgers {
		if l.Origin != c.Origin || c.Size > l.Tree.Size() {
			continue
		}
		if !own[i][k.text] {
			if root, err := l.Tree.Root(c.Size); err != nil || root != c.Root {
				continue
			}
		}
		// the ledger's own head, signed by one of these keys (once per ledger and keys)
		if _, err := h.open(headKey{l.Signed, l.Origin, k.keys}, keys); err == nil {
			return true
		}
	}
	return false
}
