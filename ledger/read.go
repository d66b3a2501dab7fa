package ledger

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Ledger is a published ledger that verified: its entries rebuild the tree whose root the last
// checkpoint signs.
type Ledger struct {
	Name    string // where it was read from, for messages
	Origin  string
	Head    Checkpoint
	Signed  string   // the signed head
	Heads   []string // every signed head in the file, in order (the last is Signed)
	Entries []*Entry
	Leaves  [][]byte // each entry's exact bytes (what its leaf hash is of)
	Tree    *Tree
	Queued  map[string]int // run -> index of its queued entry
	Ended   map[string]int
	Amended *Amendments
}

// Read reads and verifies a ledger file: each line well formed, each entry valid, each run queued
// once before it ends once, every checkpoint's root that of the entries before it, and the last
// line a checkpoint over all of them signed by one of keys. name labels errors. It is long because
// it is one pass over the lines with a rule per kind of line.
func Read(r io.Reader, name string, keys []signature.Verifier) (*Ledger, error) {
	l := &Ledger{Name: name, Tree: NewTree(), Queued: map[string]int{}, Ended: map[string]int{}, Amended: NewAmendments()}
	var last string
	_, torn, err := scanLines(r, func(n int, ln line) error {
		last = ""
		if len(ln.Entry) > 0 {
			e, err := ln.entry()
			if err != nil {
				return fmt.Errorf("entry %d: %w", len(l.Entries), err)
			}
			i := len(l.Entries)
			switch e.Kind {
			case KindQueued:
				if _, dup := l.Queued[e.Run]; dup {
					return fmt.Errorf("entry %d: run %s is queued a second time", i, e.Run)
				}
				l.Queued[e.Run] = i
			case KindEnded:
				if _, ok := l.Queued[e.Run]; !ok {
					return fmt.Errorf("entry %d: run %s ends but was never queued", i, e.Run)
				}
				if _, dup := l.Ended[e.Run]; dup {
					return fmt.Errorf("entry %d: run %s ends a second time", i, e.Run)
				}
				l.Ended[e.Run] = i
			case KindAmended:
				var ended *Entry
				if j, ok := l.Ended[e.Run]; ok {
					ended = l.Entries[j]
				}
				if err := l.Amended.Check(e, ended); err != nil {
					return fmt.Errorf("entry %d: %w", i, err)
				}
				l.Amended.Add(e, i)
			}
			l.Entries = append(l.Entries, e)
			l.Leaves = append(l.Leaves, ln.Entry)
			l.Tree.Append(LeafHash(ln.Entry))
			return nil
		}
		body, _, _ := strings.Cut(ln.Checkpoint, "\n\n")
		c, err := ParseCheckpoint(body + "\n")
		if err != nil {
			return err
		}
		if l.Origin == "" {
			l.Origin = c.Origin
		} else if c.Origin != l.Origin {
			return fmt.Errorf("checkpoint of log %q in the ledger of %q", c.Origin, l.Origin)
		}
		if c.Size > l.Tree.Size() {
			return fmt.Errorf("checkpoint of size %d after only %d entries", c.Size, l.Tree.Size())
		}
		if root, _ := l.Tree.Root(c.Size); root != c.Root {
			return fmt.Errorf("checkpoint of size %d signs a root the entries before it do not hash to: an entry was edited", c.Size)
		}
		last = ln.Checkpoint
		l.Heads = append(l.Heads, ln.Checkpoint)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", name, err)
	}
	if torn {
		return nil, fmt.Errorf("ledger %s: the last line is cut (no newline): the file is incomplete; export it again", name)
	}
	if last == "" {
		return nil, fmt.Errorf("ledger %s: does not end with a signed checkpoint over all its entries (truncated, or entries appended after the last head)", name)
	}
	c, err := OpenCheckpoint(last, l.Origin, keys)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: last checkpoint: %w", name, err)
	}
	if c.Size != l.Tree.Size() {
		return nil, fmt.Errorf("ledger %s: the last checkpoint covers %d entries of %d", name, c.Size, l.Tree.Size())
	}
	l.Head, l.Signed = c, last
	return l, nil
}

// VerifyRef checks what an attestation carries of a ledger on its own: the head signed by one
// of keys, the entry valid, and the inclusion proof of the entry under the head.
func VerifyRef(r *Ref, keys []signature.Verifier) (Checkpoint, *Entry, error) {
	return VerifyRefUnder(r, keys, nil)
}

// VerifyRefUnder is VerifyRef opening the head through heads (each distinct head verified once).
func VerifyRefUnder(r *Ref, keys []signature.Verifier, heads *Heads) (Checkpoint, *Entry, error) {
	c, e, err := verifyEntry(r, keys, heads)
	if err == nil && e.Kind != KindQueued {
		return Checkpoint{}, nil, fmt.Errorf("ledger.entry: is %s; an attestation carries its run's queued entry", e.Kind)
	}
	return c, e, err
}

// VerifyEntry checks one entry of any kind under a signed head: the head signed by one of keys
// (other signatures on it, such as witnesses' cosignatures, are left to the caller), the entry
// valid, and its inclusion proof under the head.
func VerifyEntry(r *Ref, keys []signature.Verifier) (Checkpoint, *Entry, error) {
	return verifyEntry(r, keys, nil)
}

func verifyEntry(r *Ref, keys []signature.Verifier, heads *Heads) (Checkpoint, *Entry, error) {
	c, err := heads.Open(r.Checkpoint, r.Origin, keys)
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("ledger.checkpoint: %w", err)
	}
	e, err := DecodeEntry([]byte(r.Entry))
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("ledger.entry: %w", err)
	}
	if len(r.Inclusion) > 64 {
		return Checkpoint{}, nil, fmt.Errorf("ledger.inclusion: %d hashes; at most 64", len(r.Inclusion))
	}
	p := make([][]byte, len(r.Inclusion))
	for i, h := range r.Inclusion {
		if p[i], err = hex.DecodeString(h); err != nil || len(p[i]) != 32 {
			return Checkpoint{}, nil, fmt.Errorf("ledger.inclusion[%d]: not a hex SHA-256 hash", i)
		}
	}
	if r.Index >= c.Size {
		return Checkpoint{}, nil, fmt.Errorf("ledger.index: %d is not below the head's size %d", r.Index, c.Size)
	}
	if err := VerifyInclusion(r.Index, c.Size, LeafHash([]byte(r.Entry)), p, c.Root); err != nil {
		return Checkpoint{}, nil, fmt.Errorf("ledger.inclusion: the entry is not at index %d under the head: %v", r.Index, err)
	}
	return c, e, nil
}

// RefUnder is entry i of l with its inclusion proof under signed, a head of l (its note with
// every signature on it) of size c.Size.
func (l *Ledger) RefUnder(i int, signed string, c Checkpoint) (*Ref, error) {
	if i < 0 || i >= len(l.Leaves) || uint64(i) >= c.Size {
		return nil, fmt.Errorf("ledger %s: entry %d is not under the head of size %d", l.Name, i, c.Size)
	}
	p, err := l.Tree.InclusionProof(uint64(i), c.Size)
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.Name, err)
	}
	r := &Ref{Origin: l.Origin, Index: uint64(i), Entry: string(l.Leaves[i]), Checkpoint: signed, Inclusion: make([]string, len(p))}
	for k, h := range p {
		r.Inclusion[k] = hex.EncodeToString(h)
	}
	return r, nil
}

// CheckHead says whether a head seen elsewhere (in an attestation, an earlier export) agrees
// with this ledger: same origin, not beyond its end, and the root of its first c.Size entries.
// what names where the head came from.
func (l *Ledger) CheckHead(c Checkpoint, what string) error {
	switch {
	case c.Origin != l.Origin:
		return fmt.Errorf("%s is a head of log %q, not of %q", what, c.Origin, l.Origin)
	case c.Size > l.Head.Size:
		return fmt.Errorf("ledger %s was truncated: it ends at %d entries, but %s was signed at %d", l.Name, l.Head.Size, what, c.Size)
	}
	// The tree holds every entry, and its whole root is the signed head's (Read), so the root of
	// its first c.Size entries being c.Root is the consistency a proof between the two heads
	// would show, without building the proof.
	root, _ := l.Tree.Root(c.Size)
	if root != c.Root {
		return fmt.Errorf("ledger %s was rewritten: its first %d entries do not hash to the root signed in %s (an edited entry, or a fork)", l.Name, c.Size, what)
	}
	return nil
}

// CheckRef checks an attestation's ledger reference against this ledger: its head agrees and
// the entry at its index is the one it carries.
func (l *Ledger) CheckRef(r *Ref, c Checkpoint, what string) error {
	if err := l.CheckHead(c, "the head in "+what); err != nil {
		return err
	}
	if r.Index >= uint64(len(l.Entries)) || l.Tree.Leaf(r.Index) != LeafHash([]byte(r.Entry)) {
		return fmt.Errorf("ledger %s: entry %d is not the one %s carries", l.Name, r.Index, what)
	}
	return nil
}

// Same says whether two ledgers of one origin agree: one is a prefix of the other. Two that do
// not are a fork: the host signed two histories.
func Same(a, b *Ledger) error {
	if a.Origin != b.Origin {
		return nil
	}
	short, long := a, b
	if b.Head.Size < a.Head.Size {
		short, long = b, a
	}
	if err := long.CheckHead(short.Head, "the head of "+short.Name); err != nil {
		return fmt.Errorf("fork: ledgers %s and %s of %q disagree: %v", a.Name, b.Name, a.Origin, err)
	}
	return nil
}

// Export copies a ledger file as sealrund keeps it (an entry and a head per append, and maybe a
// line cut by a crash) to w for publication: every entry under the last head, then that head.
// Each head's root is checked against the entries before it; signatures are the reader's to
// check (Read). It returns the head written.
func Export(r io.Reader, w io.Writer) (Checkpoint, error) { return ExportWitnessed(r, w, "") }

// ExportWitnessed is Export with a witnessed head (a signed checkpoint of this ledger carrying
// witnesses' cosignatures, "" for none) in its place: right after the entries it covers, or as
// the last line where it covers them all. Its root is checked like every head's.
func ExportWitnessed(r io.Reader, w io.Writer, witnessed string) (Checkpoint, error) {
	var wc Checkpoint
	if witnessed != "" {
		body, _, _ := strings.Cut(witnessed, "\n\n")
		c, err := ParseCheckpoint(body + "\n")
		if err != nil {
			return Checkpoint{}, fmt.Errorf("witnessed head: %w", err)
		}
		wc = c
	}
	placed := witnessed == ""
	tree := NewTree()
	var leaves [][]byte
	var last string
	var lastCP Checkpoint
	bw := bufio.NewWriterSize(w, 1<<20)
	_, _, err := scanLines(r, func(n int, ln line) error {
		if len(ln.Entry) > 0 {
			if _, err := ln.entry(); err != nil {
				return fmt.Errorf("entry %d: %w", tree.Size(), err)
			}
			tree.Append(LeafHash(ln.Entry))
			leaves = append(leaves, ln.Entry)
			return nil
		}
		body, _, _ := strings.Cut(ln.Checkpoint, "\n\n")
		c, err := ParseCheckpoint(body + "\n")
		if err != nil {
			return err
		}
		if root, err := tree.Root(c.Size); err != nil || root != c.Root {
			return fmt.Errorf("checkpoint of size %d does not match the entries before it", c.Size)
		}
		// Entries up to this head are final: write them out.
		written := tree.Size() - uint64(len(leaves))
		if c.Size < written {
			return fmt.Errorf("checkpoint of size %d after one of size %d: heads never go back", c.Size, written)
		}
		for i, leaf := range leaves[:c.Size-written] {
			if !placed && wc.Size == written+uint64(i) {
				if err := placeWitnessed(bw, wc, witnessed, tree, c.Origin); err != nil {
					return err
				}
				placed = true
			}
			if _, err := bw.Write(entryLine(leaf)); err != nil {
				return err
			}
		}
		leaves = leaves[c.Size-written:]
		last, lastCP = ln.Checkpoint, c
		return nil
	})
	if err != nil {
		return Checkpoint{}, err
	}
	if last == "" {
		return Checkpoint{}, errNoHead
	}
	if !placed {
		if wc.Size != lastCP.Size {
			return Checkpoint{}, fmt.Errorf("witnessed head of size %d is beyond the ledger's last head (%d entries)", wc.Size, lastCP.Size)
		}
		if err := placeWitnessed(io.Discard, wc, witnessed, tree, lastCP.Origin); err != nil {
			return Checkpoint{}, err
		}
		last = witnessed // the same head, with its cosignatures
	}
	if _, err := bw.Write(checkpointLine(last)); err != nil {
		return Checkpoint{}, err
	}
	return lastCP, bw.Flush()
}

// placeWitnessed checks a witnessed head against the entries and writes its line.
func placeWitnessed(w io.Writer, c Checkpoint, signed string, tree *Tree, origin string) error {
	if c.Origin != origin {
		return fmt.Errorf("witnessed head of log %q in the ledger of %q", c.Origin, origin)
	}
	if root, err := tree.Root(c.Size); err != nil || root != c.Root {
		return fmt.Errorf("witnessed head of size %d does not match the ledger's entries: the witnesses saw another tree", c.Size)
	}
	_, err := w.Write(checkpointLine(signed))
	return err
}

// HeadOf reads a ledger file as sealrund keeps it (or an export) and returns a check of a signed
// head (its note, with any signatures): that it is a head of this ledger — its origin, a size
// within the ledger, and the root of that many entries. A cosigned head kept from another ledger
// of the same origin fails it.
func HeadOf(r io.Reader) (func(signed string) bool, error) {
	tree := NewTree()
	origin := ""
	_, _, err := scanLines(r, func(n int, ln line) error {
		if len(ln.Entry) > 0 {
			tree.Append(LeafHash(ln.Entry))
			return nil
		}
		body, _, _ := strings.Cut(ln.Checkpoint, "\n\n")
		if c, err := ParseCheckpoint(body + "\n"); err == nil {
			origin = c.Origin
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func(signed string) bool {
		body, _, _ := strings.Cut(signed, "\n\n")
		c, err := ParseCheckpoint(body + "\n")
		if err != nil || c.Origin != origin || c.Size > tree.Size() {
			return false
		}
		root, err := tree.Root(c.Size)
		return err == nil && root == c.Root
	}, nil
}
