package ledger

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
)

// flipSig changes one character of a signed head's signature: its text (origin, size, root) is
// the same, its signature no longer verifies.
func flipSig(signed string) string {
	i := len(signed) - 10 // inside the last signature's base64, clear of its padding bits
	c := byte('A')
	if signed[i] == 'A' {
		c = 'B'
	}
	return signed[:i] + string(c) + signed[i+1:]
}

// DeferredHeads leave a head's signature to Settle, which needs none for a head a verified
// ledger holds (the ledger's signed head commits to every root it had) and checks every other
// as OpenCheckpoint would, with the very keys Open was given.
func TestDeferredHeads(t *testing.T) {
	s, v := testKey(t)
	_, other := testKey(t)
	vs, others := []signature.Verifier{v}, []signature.Verifier{other}
	_, l := writeLog(t, s, queued("r-1", 1, ""), queued("r-2", 2, ""), ended("r-1", "graded"))
	r1, err := l.Ref("r-1")
	if err != nil {
		t.Fatal(err)
	}
	led, err := Read(bytes.NewReader(export(t, l)), "ledger.jsonl", vs)
	if err != nil {
		t.Fatal(err)
	}
	// the same origin, other entries: its heads' roots are not the ledger's
	_, l2 := writeLog(t, s, queued("r-9", 1, ""), queued("r-8", 1, ""))
	r9, err := l2.Ref("r-9")
	if err != nil {
		t.Fatal(err)
	}
	forged, forged9 := flipSig(r1.Checkpoint), flipSig(r9.Checkpoint)
	for _, f := range []string{forged, forged9} {
		if _, err := OpenCheckpoint(f, r1.Origin, vs); err == nil {
			t.Fatal("flipSig left a head that verifies")
		}
	}

	for _, c := range []struct {
		name    string
		head    string
		keys    []signature.Verifier
		ledgers []*Ledger
		fails   bool
	}{
		{"a head of the ledger", r1.Checkpoint, vs, []*Ledger{led}, false},
		{"a head of the ledger, its signature broken: the ledger's own vouches", forged, vs, []*Ledger{led}, false},
		{"no ledger: the head's own signature", r1.Checkpoint, vs, nil, false},
		{"no ledger, its signature broken", forged, vs, nil, true},
		{"another log's head of the same origin, signed", r9.Checkpoint, vs, []*Ledger{led}, false},
		{"another log's head of the same origin, its signature broken", forged9, vs, []*Ledger{led}, true},
		{"a head of the ledger, opened with a key that signed neither", r1.Checkpoint, others, []*Ledger{led}, true},
	} {
		h := DeferredHeads()
		if _, err := h.Open(c.head, r1.Origin, c.keys); err != nil {
			t.Fatalf("%s: Open checked the signature: %v", c.name, err)
		}
		failed := h.Settle(c.ledgers)
		if err, bad := failed[c.head]; bad != c.fails {
			t.Errorf("%s: failed %v (%v), want %v", c.name, bad, err, c.fails)
		}
	}

	// What Open still checks at once: the form, the origin, the size.
	h := DeferredHeads()
	for _, bad := range []struct{ head, origin, want string }{
		{"no newline", "", "no origin line"},
		{r1.Checkpoint, "sealrun.ledger/another", "not of"},
		{strings.SplitAfter(r1.Checkpoint, "\n\n")[0][:len(r1.Checkpoint)/3], "", ""},
		{strings.Repeat("x", MaxCheckpointBytes+1), "", "at most"},
	} {
		if _, err := h.Open(bad.head, bad.origin, vs); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Open(%.40q, %q): %v, want an error with %q", bad.head, bad.origin, err, bad.want)
		}
	}
	if len(h.Settle(nil)) != 0 {
		t.Error("a head Open refused was left to Settle")
	}
	// Heads that are not deferred settle nothing; a nil one neither.
	var nilHeads *Heads
	if nilHeads.Settle([]*Ledger{led}) != nil || (&Heads{}).Settle(nil) != nil {
		t.Error("Settle of Heads that defer nothing")
	}
}
