package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

func testKey(t testing.TB) (signature.Signer, signature.Verifier) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := signature.LoadED25519Signer(priv)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.LoadED25519Verifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}

const track = "05a3ddefc0ffee05a3ddefc0ffee05a3ddefc0ffee05a3ddefc0ffee05a3ddef"

func queued(run string, seed int64, rerunOf string) *Entry {
	return &Entry{Kind: KindQueued, Run: run, Time: time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC), Track: track, TrackName: "t 1",
		Scaffold: "demo 1", Agent: "none/scripted", Seed: seed, RerunOf: rerunOf}
}

func ended(run string, state outcome.Outcome) *Entry {
	e := &Entry{Kind: KindEnded, Run: run, Time: time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC), State: state}
	if state != "invalid" {
		e.Attestation = digest.Hex(strings.Repeat("ab", 32))
	} else {
		e.Reason = "daemon restart"
	}
	return e
}

func TestTreeProofs(t *testing.T) {
	tr := NewTree()
	var leaves []Hash
	for i := range 70 {
		h := LeafHash([]byte(fmt.Sprint(i)))
		leaves = append(leaves, h)
		tr.Append(h)
	}
	for size := uint64(1); size <= 70; size++ {
		root, err := tr.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(0); i < size; i++ {
			p, err := tr.InclusionProof(i, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(i, size, leaves[i], p, root); err != nil {
				t.Fatalf("inclusion %d/%d: %v", i, size, err)
			}
			if i+1 < size && VerifyInclusion(i+1, size, leaves[i], p, root) == nil {
				t.Fatalf("inclusion %d/%d verified at the wrong index", i, size)
			}
		}
		for s1 := uint64(1); s1 <= size; s1++ {
			r1, _ := tr.Root(s1)
			p, err := tr.ConsistencyProof(s1, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyConsistency(s1, size, p, r1, root); err != nil {
				t.Fatalf("consistency %d->%d: %v", s1, size, err)
			}
		}
	}
}

func writeLog(t *testing.T, s signature.Signer, entries ...*Entry) (string, *Log) {
	return writeLogTB(t, s, entries...)
}

func writeLogTB(t testing.TB, s signature.Signer, entries ...*Entry) (string, *Log) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := Open(path, "sealrun.ledger/host-a", s)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := l.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	return path, l
}

func export(t *testing.T, l *Log) []byte {
	var b bytes.Buffer
	if err := l.Export(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestLogRoundTrip(t *testing.T) {
	s, v := testKey(t)
	path, l := writeLog(t, s, queued("r-1", 1, ""), queued("r-2", 2, ""), ended("r-1", "graded"), ended("r-2", "invalid"), queued("r-3", 2, "r-2"))
	ref, err := l.Ref("r-3")
	if err != nil {
		t.Fatal(err)
	}
	c, e, err := VerifyRef(ref, []signature.Verifier{v})
	if err != nil {
		t.Fatal(err)
	}
	if e.RerunOf != "r-2" || c.Size != 5 || ref.Index != 4 {
		t.Fatalf("ref %+v %+v", c, e)
	}
	if _, err := l.Append(queued("r-1", 1, "")); err == nil {
		t.Fatal("a run queued twice was appended")
	}
	l.Close()
	// Reopen: same tree, same head; a torn last line is cut.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"entry":{"kind":"que`)
	f.Close()
	l2, err := Open(path, "other-origin", s)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Size() != 5 || l2.Origin() != "sealrun.ledger/host-a" {
		t.Fatalf("reopened: size %d origin %s", l2.Size(), l2.Origin())
	}
	led, err := Read(bytes.NewReader(export(t, l2)), "export", []signature.Verifier{v})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.CheckRef(ref, c, "r-3's attestation"); err != nil {
		t.Fatal(err)
	}
	// The head is a standard signed note: Go's own note package verifies it for an ed25519 key.
	pub, _ := v.PublicKey()
	h, _ := keyHash(led.Origin, pub)
	vkey := fmt.Sprintf("%s+%08x+%s", led.Origin, h, b64(append([]byte{algEd25519}, pub.(ed25519.PublicKey)...)))
	nv, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := note.Open([]byte(led.Signed), note.VerifierList(nv)); err != nil {
		t.Fatalf("sumdb/note does not verify our head: %v", err)
	}
}

func TestReadRejectsRewrites(t *testing.T) {
	s, v := testKey(t)
	_, other := testKey(t)
	_, l := writeLog(t, s, queued("r-1", 1, ""), queued("r-2", 2, ""), ended("r-1", "graded"), ended("r-2", "failed"))
	ref, _ := l.Ref("r-2")
	c, _, _ := VerifyRef(ref, []signature.Verifier{v})
	good := export(t, l)
	lines := strings.SplitAfter(string(good), "\n")
	keys := []signature.Verifier{v}
	for _, tc := range []struct {
		name, data, want string
		keys             []signature.Verifier
	}{
		{"edited entry", strings.Replace(string(good), `"seed":1`, `"seed":7`, 1), "an entry was edited", keys},
		{"dropped entry", lines[0] + strings.Join(lines[2:], ""), "never queued", keys},
		{"no head", strings.Join(lines[:len(lines)-2], ""), "does not end with a signed checkpoint", keys},
		{"cut line", string(good[:len(good)-1]), "cut", keys},
		{"wrong key", string(good), "not signed by any of the host keys given", []signature.Verifier{other}},
		{"ends before queued", strings.Replace(string(good), `"run":"r-1","time"`, `"run":"r-9","time"`, 1), "never queued", keys},
		{"not json", "hello\n", "line 1", keys},
		{"unknown field", `{"entry":{"kind":"queued"},"x":1}` + "\n", "unknown field", keys},
		{"both", `{"entry":{},"checkpoint":"x"}` + "\n", "line 1", keys},
		{"long line", strings.Repeat("x", MaxLineBytes+10) + "\n", "longer than", keys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.data), "L", tc.keys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want %q", err, tc.want)
			}
		})
	}
	// Truncated to an earlier, validly signed prefix: the ledger reads, but the head an
	// attestation carries says it was cut.
	_, l2 := writeLog(t, s, queued("r-1", 1, ""))
	short, err := Read(bytes.NewReader(export(t, l2)), "short", keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := short.CheckRef(ref, c, "r-2's attestation"); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("truncation: %v", err)
	}
	// A fork: the same origin and key, another history.
	_, l3 := writeLog(t, s, queued("r-1", 1, ""), queued("r-5", 2, ""), ended("r-1", "graded"), ended("r-5", "failed"))
	fork, err := Read(bytes.NewReader(export(t, l3)), "fork", keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := fork.CheckRef(ref, c, "r-2's attestation"); err == nil || !strings.Contains(err.Error(), "rewritten") {
		t.Fatalf("fork vs attestation: %v", err)
	}
	full, _ := Read(bytes.NewReader(good), "full", keys)
	if err := Same(full, fork); err == nil || !strings.Contains(err.Error(), "fork") {
		t.Fatalf("fork vs ledger: %v", err)
	}
	if err := Same(full, short); err != nil {
		t.Fatalf("a prefix is not a fork: %v", err)
	}
	// A forged inclusion proof, a ref whose entry was changed.
	bad := *ref
	bad.Entry = strings.Replace(bad.Entry, `"seed":2`, `"seed":3`, 1)
	if _, _, err := VerifyRef(&bad, keys); err == nil || !strings.Contains(err.Error(), "inclusion") {
		t.Fatalf("edited ref entry: %v", err)
	}
}

func TestAppendFailureStopsTheLog(t *testing.T) {
	s, _ := testKey(t)
	_, l := writeLog(t, s, queued("r-1", 1, ""))
	l.f.Close() // the disk goes away under it
	if _, err := l.Append(queued("r-2", 1, "")); err == nil {
		t.Fatal("append to a closed file succeeded")
	}
	l.f = nil
	if _, err := l.Append(queued("r-3", 1, "")); err == nil || !strings.Contains(err.Error(), "failed before") {
		t.Fatalf("after a failure: %v", err)
	}
}

func TestEntryCheck(t *testing.T) {
	for _, e := range []*Entry{
		{Kind: "deleted", Run: "r-1", Time: time.Now()},
		{Kind: KindQueued, Run: "R 1", Time: time.Now(), Track: track, Agent: "a", Scaffold: "s"},
		{Kind: KindQueued, Run: "r-1", Time: time.Now(), Track: "abc", Agent: "a", Scaffold: "s"},
		{Kind: KindQueued, Run: "r-1", Time: time.Now(), Track: track, Agent: "a", Scaffold: "s", RerunOf: "r-1"},
		{Kind: KindEnded, Run: "r-1", Time: time.Now(), State: "graded"},
		{Kind: KindEnded, Run: "r-1", Time: time.Now(), State: "lost"},
		{Kind: KindQueued, Run: "r-1", Track: track, Agent: "a", Scaffold: "s"},
	} {
		if err := e.Check(); err == nil {
			t.Errorf("%+v passed", e)
		}
	}
}
