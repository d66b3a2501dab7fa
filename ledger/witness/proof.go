package witness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
)

// RunProofFile is the name of a run's witnessed proof in a publication (runs/<id>/).
const RunProofFile = "witnessed.json"

// RunProofFormat is a RunProof's format.
const RunProofFormat = "sealrun-witnessed-run/v1"

// MaxRunProofBytes bounds a RunProof file (two entries, two proofs of at most 64 hashes, a head
// with its cosignatures).
const MaxRunProofBytes = 256 << 10

// RunProof is what a publication carries beside one attestation (witnessed.json): a head of its
// host's ledger with the witnesses' cosignatures, and the run's queued and ended entries with
// their inclusion proofs under it. With the host's key and the witnesses' keys a reader checks,
// from this file and the attestation alone, that witnesses saw a ledger in which this run was
// queued and ended with exactly this attestation — so the host cannot show another ledger,
// without this run or with another result for it, to anyone those witnesses serve.
type RunProof struct {
	Format string `json:"format"`
	// Ledger is the published ledger it was taken from (informational).
	Ledger     string     `json:"ledger,omitempty"`
	Origin     string     `json:"origin"`
	Checkpoint string     `json:"checkpoint"` // the cosigned head: its note and every signature
	Queued     ProofEntry `json:"queued"`
	Ended      ProofEntry `json:"ended"`
}

// ProofEntry is one entry of the ledger (its exact bytes), its index and its inclusion proof.
type ProofEntry struct {
	Index     uint64   `json:"index"`
	Entry     string   `json:"entry"`
	Inclusion []string `json:"inclusion"`
}

// Prove makes run's proof under signed, a cosigned head of l (as CheckLedger or
// Cosignatures.Best found it). The run must be queued and ended under it.
func Prove(l *ledger.Ledger, signed, run string) (*RunProof, error) {
	body, _, _ := strings.Cut(signed, "\n\n")
	c, err := ledger.ParseCheckpoint(body + "\n")
	if err != nil {
		return nil, fmt.Errorf("ledger %s: witnessed head: %w", l.Name, err)
	}
	if root, err := l.Tree.Root(c.Size); err != nil || root != c.Root || c.Origin != l.Origin {
		return nil, fmt.Errorf("ledger %s: the witnessed head of size %d is not a head of this ledger", l.Name, c.Size)
	}
	q, okQ := l.Queued[run]
	e, okE := l.Ended[run]
	switch {
	case !okQ:
		return nil, fmt.Errorf("ledger %s: run %s is not in it", l.Name, run)
	case !okE || uint64(e) >= c.Size:
		return nil, fmt.Errorf("ledger %s: run %s ends after the witnessed head of size %d", l.Name, run, c.Size)
	}
	rq, err := l.RefUnder(q, signed, c)
	if err != nil {
		return nil, err
	}
	re, err := l.RefUnder(e, signed, c)
	if err != nil {
		return nil, err
	}
	return &RunProof{Format: RunProofFormat, Origin: l.Origin, Checkpoint: signed,
		Queued: ProofEntry{Index: rq.Index, Entry: rq.Entry, Inclusion: rq.Inclusion},
		Ended:  ProofEntry{Index: re.Index, Entry: re.Entry, Inclusion: re.Inclusion}}, nil
}

// ParseRunProof decodes a witnessed.json, refusing unknown fields and another format.
func ParseRunProof(b []byte) (*RunProof, error) {
	if len(b) > MaxRunProofBytes {
		return nil, fmt.Errorf("%d bytes; a witnessed proof is at most %d", len(b), MaxRunProofBytes)
	}
	var p RunProof
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("not a witnessed proof: %v", err)
	}
	if p.Format != RunProofFormat {
		return nil, fmt.Errorf("format %q; this sealrun reads %s", p.Format, RunProofFormat)
	}
	return &p, nil
}

// RunWitnessed is what checking a RunProof found.
type RunWitnessed struct {
	Head  ledger.Checkpoint
	By    []string // the witnesses whose cosignatures verify on the head
	NotBy []string
}

// Check verifies p for the run whose signed statement (DSSE payload) is statement: the head
// signed by one of hostKeys and cosigned by at least quorum of ws, the run's queued and ended
// entries under it, the ended one naming this statement's SHA-256. queued, when not nil, is the
// queued entry the attestation itself carries (it must be the same entry at the same index).
func (p *RunProof) Check(run string, statement []byte, queued *ledger.Ref, hostKeys []signature.Verifier, ws []*Verifier, quorum int) (*RunWitnessed, error) {
	if quorum < 1 || quorum > len(ws) {
		return nil, opt.New("witness", "Quorum", fmt.Sprintf("a quorum of %d with %d witness keys given: give 1 to %d", quorum, len(ws), len(ws)))
	}
	ref := func(e ProofEntry) *ledger.Ref {
		return &ledger.Ref{Origin: p.Origin, Index: e.Index, Entry: e.Entry, Checkpoint: p.Checkpoint, Inclusion: e.Inclusion}
	}
	c, q, err := ledger.VerifyEntry(ref(p.Queued), hostKeys)
	if err != nil {
		return nil, fmt.Errorf("queued: %w", err)
	}
	_, e, err := ledger.VerifyEntry(ref(p.Ended), hostKeys)
	if err != nil {
		return nil, fmt.Errorf("ended: %w", err)
	}
	sum := sha256.Sum256(statement)
	switch {
	case q.Kind != ledger.KindQueued || q.Run != run:
		return nil, fmt.Errorf("queued.entry: is the %s entry of run %s, not the queued entry of %s", q.Kind, q.Run, run)
	case e.Kind != ledger.KindEnded || e.Run != run:
		return nil, fmt.Errorf("ended.entry: is the %s entry of run %s, not the ended entry of %s", e.Kind, e.Run, run)
	case string(e.Attestation) != hex.EncodeToString(sum[:]):
		return nil, errors.New("ended.entry: names another attestation than this one (the witnesses saw this run end with a different result)")
	case queued != nil && (queued.Origin != p.Origin || queued.Index != p.Queued.Index || queued.Entry != p.Queued.Entry):
		return nil, fmt.Errorf("queued.entry: is not the ledger entry the attestation carries (%s index %d)", queued.Origin, queued.Index)
	}
	by, notBy := Cosigned(p.Checkpoint, ws)
	if len(by) < quorum {
		return nil, fmt.Errorf("the head of size %d carries %d valid cosignature(s) of the given witnesses (%v), %d needed; not by %v", c.Size, len(by), by, quorum, notBy)
	}
	return &RunWitnessed{Head: c, By: by, NotBy: notBy}, nil
}

// Cosigned splits ws into those whose cosignature over the signed checkpoint verifies and the
// others (names).
func Cosigned(signed string, ws []*Verifier) (by, notBy []string) {
	for _, w := range ws {
		if _, err := Pick(signedBody(signed), sigLines(signed), w); err == nil {
			by = append(by, w.Name())
		} else {
			notBy = append(notBy, w.Name())
		}
	}
	return by, notBy
}
