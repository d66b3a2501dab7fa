package ledger

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Log is a host's ledger as sealrund keeps it: one file of JSON lines, an entry and the signed
// checkpoint after it written with one write and one fsync, so that nothing is acknowledged
// that is not on disk and every entry on disk is under a signed head. A line cut by a crash was
// never acknowledged: Open truncates it.
type Log struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	origin  string
	signer  signature.Signer
	tree    *Tree
	leaves  [][]byte          // the entries' bytes, by index
	queued  map[string]uint64 // run -> index of its queued entry
	ended   map[string]uint64
	amended *Amendments
	head    string // the latest signed checkpoint
	headCP  Checkpoint
	failure error         // an append that failed: the log takes nothing more
	changed chan struct{} // a new head was signed (capacity 1: never blocks an append)
}

// Open opens (creating) the ledger at path, signing heads with s under origin (an existing
// ledger keeps the origin it was made with).
func Open(path, origin string, s signature.Signer) (*Log, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	l := &Log{f: f, path: path, origin: origin, signer: s, tree: NewTree(), queued: map[string]uint64{}, ended: map[string]uint64{}, amended: NewAmendments(), changed: make(chan struct{}, 1)}
	var lastCP string
	good, torn, err := scanLines(f, func(n int, ln line) error {
		if len(ln.Entry) > 0 {
			e, err := ln.entry()
			if err != nil {
				return err
			}
			l.add(e, ln.Entry)
			return nil
		}
		c, err := ParseCheckpoint(strings.SplitN(ln.Checkpoint, "\n\n", 2)[0] + "\n")
		if err != nil {
			return err
		}
		if root, err := l.tree.Root(c.Size); err != nil || root != c.Root {
			return fmt.Errorf("checkpoint of size %d does not match the entries before it; the ledger is evidence and is not repaired automatically", c.Size)
		}
		l.origin, lastCP = c.Origin, ln.Checkpoint
		return nil
	})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("ledger %s: %w", path, err)
	}
	if torn {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("ledger %s: truncate the torn last line: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	if err := checkOrigin(l.origin); err != nil {
		f.Close()
		return nil, err
	}
	l.head = lastCP
	if c, err := ParseCheckpoint(strings.SplitN(lastCP, "\n\n", 2)[0] + "\n"); err == nil {
		l.headCP = c
	}
	if lastCP == "" || l.headCP.Size != l.tree.Size() {
		// A new ledger, or entries after the last head (a crash between the two): sign now.
		if err := l.writeHead(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *Log) add(e *Entry, leaf []byte) {
	i := l.tree.Size()
	l.tree.Append(LeafHash(leaf))
	l.leaves = append(l.leaves, leaf)
	switch e.Kind {
	case KindQueued:
		l.queued[e.Run] = i
	case KindEnded:
		l.ended[e.Run] = i
	case KindAmended:
		l.amended.Add(e, int(i))
	}
}

func (l *Log) signHead() (string, Checkpoint, error) {
	root, err := l.tree.Root(l.tree.Size())
	if err != nil {
		return "", Checkpoint{}, err
	}
	c := Checkpoint{Origin: l.origin, Size: l.tree.Size(), Root: root}
	s, err := SignCheckpoint(c, l.signer)
	if err != nil {
		return "", Checkpoint{}, fmt.Errorf("sign the ledger head: %w", err)
	}
	return s, c, nil
}

func (l *Log) writeHead() error {
	s, c, err := l.signHead()
	if err != nil {
		return err
	}
	if err := l.write(checkpointLine(s)); err != nil {
		return err
	}
	l.head, l.headCP = s, c
	l.signal()
	return nil
}

// signal tells a follower (Changed) that a new head is signed.
func (l *Log) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Changed receives after each new head (coalesced: one receive may stand for several heads).
func (l *Log) Changed() <-chan struct{} { return l.changed }

// Head is the latest signed head, and what it says.
func (l *Log) Head() (string, Checkpoint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head, l.headCP
}

// ConsistencyProof proves that the log at size1 is a prefix of the log at size2 (at most its
// size).
func (l *Log) ConsistencyProof(size1, size2 uint64) ([][]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if size1 > size2 || size2 > l.tree.Size() {
		return nil, fmt.Errorf("no consistency proof from size %d to %d of a log of %d entries", size1, size2, l.tree.Size())
	}
	if size1 == 0 || size1 == size2 {
		return nil, nil
	}
	return l.tree.ConsistencyProof(size1, size2)
}

func (l *Log) write(b []byte) error {
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("append to ledger %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("fsync ledger %s: %w", l.path, err)
	}
	return nil
}

// Append adds e and a signed head over it, fsynced, and returns e's index. A run has at most
// one queued and one ended entry. After a failed append the log refuses every later one (what
// is on disk may be torn): the daemon stops taking runs.
func (l *Log) Append(e *Entry) (uint64, error) {
	leaf, err := e.Encode()
	if err != nil {
		return 0, fmt.Errorf("ledger entry: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failure != nil {
		return 0, fmt.Errorf("the ledger failed before and takes no more entries: %w", l.failure)
	}
	if l.f == nil {
		return 0, fmt.Errorf("ledger %s is closed", l.path)
	}
	if _, dup := l.queued[e.Run]; dup && e.Kind == KindQueued {
		return 0, fmt.Errorf("run %s is already in the ledger as queued", e.Run)
	}
	if _, dup := l.ended[e.Run]; dup && e.Kind == KindEnded {
		return 0, fmt.Errorf("run %s is already in the ledger as ended", e.Run)
	}
	if e.Kind == KindAmended {
		if err := l.amended.Check(e, l.entryAt(l.ended, e.Run)); err != nil {
			return 0, err
		}
	}
	i := l.tree.Size()
	l.add(e, leaf)
	s, c, err := l.signHead()
	if err == nil {
		err = l.write(append(entryLine(leaf), checkpointLine(s)...))
	}
	if err != nil {
		l.failure = err
		return 0, err
	}
	l.head, l.headCP = s, c
	l.signal()
	return i, nil
}

// CheckAmendment says why the amended entry e could not be appended now (nil: it could).
func (l *Log) CheckAmendment(e *Entry) error {
	if err := e.Check(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.amended.Check(e, l.entryAt(l.ended, e.Run))
}

// Has says whether run has an entry of kind.
func (l *Log) Has(run, kind string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kind == KindQueued {
		_, ok := l.queued[run]
		return ok
	}
	_, ok := l.ended[run]
	return ok
}

// EndOf returns run's ended entry, if it has one.
func (l *Log) EndOf(run string) (*Entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entryAt(l.ended, run)
	return e, e != nil
}

// entryAt is the entry of run in index (queued or ended), nil when there is none.
func (l *Log) entryAt(index map[string]uint64, run string) *Entry {
	i, ok := index[run]
	if !ok {
		return nil
	}
	e, err := DecodeEntry(l.leaves[i])
	if err != nil {
		return nil
	}
	return e
}

// AmendmentsOf returns run's amended entries, in order.
func (l *Log) AmendmentsOf(run string) []*Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Entry
	for _, i := range l.amended.ByRun[run] {
		if e, err := DecodeEntry(l.leaves[i]); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// Size is the number of entries.
func (l *Log) Size() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tree.Size()
}

// Origin is the log's name.
func (l *Log) Origin() string { return l.origin }

// Ref is what an attestation carries of the ledger: the run's queued entry (its exact bytes),
// its index, the signed head it is included under and the inclusion proof (hex hashes).
type Ref struct {
	Origin     string   `json:"origin"`
	Index      uint64   `json:"index"`
	Entry      string   `json:"entry"`
	Checkpoint string   `json:"checkpoint"`
	Inclusion  []string `json:"inclusion"`
}

// Ref returns run's queued entry with the latest head and its inclusion proof.
func (l *Log) Ref(run string) (*Ref, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.queued[run]
	if !ok {
		return nil, fmt.Errorf("run %s is not in the ledger", run)
	}
	p, err := l.tree.InclusionProof(i, l.headCP.Size)
	if err != nil {
		return nil, err
	}
	r := &Ref{Origin: l.origin, Index: i, Entry: string(l.leaves[i]), Checkpoint: l.head, Inclusion: make([]string, len(p))}
	for k, h := range p {
		r.Inclusion[k] = hex.EncodeToString(h)
	}
	return r, nil
}

// Export writes the ledger for publication: every entry and the latest signed head.
func (l *Log) Export(w io.Writer) error {
	l.mu.Lock()
	leaves, head := l.leaves[:l.headCP.Size:l.headCP.Size], l.head
	l.mu.Unlock()
	var buf bytes.Buffer
	for _, leaf := range leaves {
		buf.Write(entryLine(leaf))
		if buf.Len() > 1<<20 {
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
			buf.Reset()
		}
	}
	buf.Write(checkpointLine(head))
	_, err := w.Write(buf.Bytes())
	return err
}

// Close closes the file.
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
