package ledger

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sigstore/sigstore/pkg/signature"
)

// amendedN counts the amended entries made, so that each names an amendment of its own.
var amendedN int

func amended(run, action string) *Entry {
	amendedN++
	return &Entry{Kind: KindAmended, Run: run, Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Action: action,
		Attestation: digest.Hex(strings.Repeat("ab", 32)), Amendment: digest.SumHex([]byte(fmt.Sprint("amendment ", amendedN))), Reason: "the host's memory failed its test on 2026-11-30"}
}

// rawLedger is a ledger file of entries under a head signed with s, written without the Log's
// checks: what a hostile host could publish.
func rawLedger(t *testing.T, s signature.Signer, entries ...*Entry) string {
	t.Helper()
	tree := NewTree()
	var b bytes.Buffer
	for _, e := range entries {
		leaf, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		tree.Append(LeafHash(leaf))
		b.Write(entryLine(leaf))
	}
	root, _ := tree.Root(tree.Size())
	head, err := SignCheckpoint(Checkpoint{Origin: "sealrun.ledger/host-a", Size: tree.Size(), Root: root}, s)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(checkpointLine(head))
	return b.String()
}

// Amendments in the ledger: appended only for a run that ended with the attestation they name,
// one invalidation or legacy label per run, none of a run the host ended invalid, at most
// MaxNotes notes; kept across a reopen; and a reader holds a published ledger to the same rules.
func TestAmendedEntries(t *testing.T) {
	s, v := testKey(t)
	path, l := writeLog(t, s, queued("r-1", 1, ""), ended("r-1", "graded"), queued("r-2", 2, ""), ended("r-2", "invalid"), queued("r-3", 3, ""))
	other := amended("r-1", ActionInvalidate)
	other.Attestation = digest.Hex(strings.Repeat("ef", 32))
	for _, c := range []struct {
		name string
		e    *Entry
		want string
	}{
		{"a run never run here", amended("r-9", ActionNote), "never ended in this ledger"},
		{"a run not ended", amended("r-3", ActionNote), "never ended in this ledger"},
		{"another attestation (an amendment's, say)", other, "an amendment amends a run's attestation, never another amendment"},
		{"an invalid run invalidated", func() *Entry { e := amended("r-2", ActionInvalidate); e.Attestation = ""; return e }(), "attestation"},
	} {
		if _, err := l.Append(c.e); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	first := amended("r-1", ActionInvalidate)
	if _, err := l.Append(first); err != nil {
		t.Fatal(err)
	}
	again := *first
	again.Action = ActionNote
	if _, err := l.Append(&again); err == nil || !strings.Contains(err.Error(), "is in the ledger already: each amendment is appended once") {
		t.Fatalf("the same amendment twice: %v", err)
	}
	if _, err := l.Append(amended("r-1", ActionLegacy)); err == nil || !strings.Contains(err.Error(), "already amended invalidated") {
		t.Fatalf("a legacy label after an invalidation: %v", err)
	}
	for range MaxNotes {
		if _, err := l.Append(amended("r-1", ActionNote)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Append(amended("r-1", ActionNote)); err == nil || !strings.Contains(err.Error(), "notes already") {
		t.Fatalf("note %d: %v", MaxNotes+1, err)
	}
	l.Close()
	l, err := Open(path, "sealrun.ledger/host-a", s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := len(l.AmendmentsOf("r-1")); n != 1+MaxNotes {
		t.Fatalf("%d amendments of r-1 after reopening", n)
	}
	if _, err := l.Append(amended("r-1", ActionInvalidate)); err == nil || !strings.Contains(err.Error(), "already amended") {
		t.Fatalf("a second invalidation after reopening: %v", err)
	}
	got, err := Read(bytes.NewReader(export(t, l)), "L", []signature.Verifier{v})
	if err != nil {
		t.Fatal(err)
	}
	if got.Amended.Status["r-1"] != ActionInvalidate || got.Amended.Notes["r-1"] != MaxNotes {
		t.Fatalf("read back: %+v", got.Amended)
	}

	// A published ledger breaking them, under a valid head.
	q, e := queued("r-1", 1, ""), ended("r-1", "graded")
	for _, c := range []struct {
		name    string
		entries []*Entry
		want    string
	}{
		{"amended before it ended", []*Entry{q, amended("r-1", ActionNote), e}, "entry 1: run r-1 is amended but never ended"},
		{"two invalidations", []*Entry{q, e, amended("r-1", ActionInvalidate), amended("r-1", ActionInvalidate)}, "entry 3: run r-1 is already amended invalidated"},
		{"invalidated, then legacy", []*Entry{q, e, amended("r-1", ActionInvalidate), amended("r-1", ActionLegacy)}, "entry 3: run r-1 is already amended invalidated"},
		{"re-pointed at another attestation", []*Entry{q, e, other}, "entry 2: run r-1 ended with attestation abababababab…; the amendment names efefefefefef…"},
		{"one amendment twice", func() []*Entry { n := amended("r-1", ActionNote); return []*Entry{q, e, n, n} }(), "entry 3: amendment "},
	} {
		if _, err := Read(strings.NewReader(rawLedger(t, s, c.entries...)), "L", []signature.Verifier{v}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

// An amended entry's own fields: each malformed one named.
func TestAmendedEntryCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Entry)
		want string
	}{
		{"no action", func(e *Entry) { e.Action = "" }, "action: \"\" is not invalidate, legacy or note"},
		{"unknown action", func(e *Entry) { e.Action = "delete" }, "action: \"delete\""},
		{"no reason", func(e *Entry) { e.Reason = " " }, "reason: an amendment says why"},
		{"a reason over its bound", func(e *Entry) { e.Reason = strings.Repeat("x", 1025) }, "reason: is longer than 1024 bytes"},
		{"a reason with control characters", func(e *Entry) { e.Reason = "ok\x1b[2J" }, "reason: is longer than 1024 bytes or holds control characters"},
		{"no amendment digest", func(e *Entry) { e.Amendment = "" }, "amendment:"},
		{"a link that is no URL", func(e *Entry) { e.Link = "javascript:alert(1)" }, "link: \"javascript:alert(1)\" is not an http(s) URL"},
		{"a queued entry's fields", func(e *Entry) { e.Agent = "a/b" }, "kind: an amended entry names its run"},
		{"a state", func(e *Entry) { e.State = "graded" }, "kind: an amended entry names its run"},
	} {
		e := amended("r-1", ActionInvalidate)
		c.edit(e)
		if err := e.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	e := amended("r-1", ActionInvalidate)
	e.Link = "https://status.example.org/incident/42"
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeEntry(b)
	if err != nil || back.Link != e.Link || back.Amendment != e.Amendment || back.Action != ActionInvalidate {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	q := queued("r-1", 1, "")
	q.Action = ActionNote
	if err := q.Check(); err == nil {
		t.Error("a queued entry with an action")
	}
}
