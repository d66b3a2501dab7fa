package ledger

import (
	"fmt"
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
}

type headKey struct{ text, origin, keys string }

// Open is OpenCheckpoint, once per distinct head.
func (h *Heads) Open(text, origin string, keys []signature.Verifier) (Checkpoint, error) {
	if h == nil {
		return OpenCheckpoint(text, origin, keys)
	}
	var ids strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&ids, "%p,", k)
	}
	k := headKey{text, origin, ids.String()}
	if c, ok := h.m.Load(k); ok {
		return c.(Checkpoint), nil
	}
	c, err := OpenCheckpoint(text, origin, keys)
	if err == nil {
		h.m.Store(k, c)
	}
	return c, err
}
