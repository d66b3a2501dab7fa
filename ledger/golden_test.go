package ledger

import (
	"encoding/hex"
	"github.com/sealrun/sealrun/digest"
	"strings"
	"testing"
	"time"
)

// A queued and an ended entry keep their bytes, and the tree of the two its root: a change of
// code that says it changes no behaviour (an outcome written through a type, not a literal)
// leaves every ledger readable by what came before. (The root is RFC 6962's, computed apart.)
func TestGoldenEntries(t *testing.T) {
	at := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	queued := &Entry{Kind: KindQueued, Run: "r-golden", Time: at, Track: strings.Repeat("a", 64), TrackName: "ari 1",
		Scaffold: "opencode 1.0", Agent: "openai/gpt-x@high", Seed: 3}
	ended := &Entry{Kind: KindEnded, Run: "r-golden", Time: at.Add(time.Hour), State: "graded", Attestation: digest.Hex(strings.Repeat("b", 64))}
	tree := NewTree()
	var lines []string
	for _, e := range []*Entry{queued, ended} {
		b, err := e.Encode()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
		tree.Append(LeafHash(b))
	}
	want := []string{
		`{"kind":"queued","run":"r-golden","time":"2026-12-04T09:00:00Z","track":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","track_name":"ari 1","scaffold":"opencode 1.0","agent":"openai/gpt-x@high","seed":3}`,
		`{"kind":"ended","run":"r-golden","time":"2026-12-04T10:00:00Z","seed":0,"state":"graded","attestation":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}`,
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("entry %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
	root, err := tree.Root(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(root[:]); got != "4c37a0cf916e3d5ff94c6f67b652ed914b7097efecf81e81e7fc72f84889adfb" {
		t.Errorf("root %s", got)
	}
}
