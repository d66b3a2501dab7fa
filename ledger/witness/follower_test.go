package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/ledger"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

// A host and three witnesses: one cosigning what it should, one down, one answering garbage.
// Appends never wait for them; the good one ends holding the ledger's last head, its cosignature
// kept; the others are retried and their errors said; a reopened store has every cosignature.
func TestFollower(t *testing.T) {
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := signature.LoadED25519Signer(priv)
	lg, err := ledger.Open(filepath.Join(dir, "ledger.jsonl"), "sealrun.ledger/follow", signer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	vkey, _ := ledger.VerifierKey("sealrun.ledger/follow", priv.Public())
	logV, err := LogVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	good := newTestWitness(t, t.TempDir())
	good.srv.logs["sealrun.ledger/follow"] = note.VerifierList(logV)
	goodTS := httptest.NewServer(good.srv)
	defer goodTS.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("— nonsense AAAA\n")) }))
	defer garbage.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	otherKey := func(name string) *Verifier {
		_, vk, _ := GenerateKey(name)
		v, _ := NewVerifier(vk)
		return v
	}
	store, err := OpenCosignatures(filepath.Join(dir, CosignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	targets := []Target{
		{Name: "good", URL: goodTS.URL, Verifier: good.v},
		{Name: "down", URL: downURL, Verifier: otherKey("witness.test/down")},
		{Name: "garbage", URL: garbage.URL, Verifier: otherKey("witness.test/garbage")},
	}
	f := NewFollower(lg, targets, store, nil)
	f.MaxBackoff = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	var slowest time.Duration
	for i := range 40 {
		t0 := time.Now()
		if _, err := lg.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", i), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: 1}); err != nil {
			t.Fatal(err)
		}
		slowest = max(slowest, time.Since(t0))
	}
	deadline := time.Now().Add(10 * time.Second)
	for store.Latest(good.v.Name()) < 40 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a few retries of the failing ones
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if got := store.Latest(good.v.Name()); got != 40 {
		t.Fatalf("the good witness cosigned up to %d of 40", got)
	}
	for _, s := range f.Status() {
		switch s.Name {
		case "good":
			if s.Held != 40 || s.LastError != "" {
				t.Errorf("good: %+v", s)
			}
		default:
			if s.LastError == "" || s.Held != 0 {
				t.Errorf("%s: %+v", s.Name, s)
			}
		}
	}
	signed, size, by, ok := store.Best([]string{good.v.Name(), "witness.test/down"}, 1, nil)
	if !ok || size != 40 || len(by) != 1 {
		t.Fatalf("best head: %v %d %v", ok, size, by)
	}
	if _, err := note.Open([]byte(signed), note.VerifierList(good.v, logV)); err != nil {
		t.Fatalf("the best head does not open with the host's and the witness's keys: %v", err)
	}
	if _, _, _, ok := store.Best([]string{good.v.Name(), "witness.test/down"}, 2, nil); ok {
		t.Error("a quorum of 2 met with one witness answering")
	}
	store.Close()
	again, err := OpenCosignatures(filepath.Join(dir, CosignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Latest(good.v.Name()) != 40 {
		t.Errorf("reopened: %d", again.Latest(good.v.Name()))
	}
	t.Logf("40 appends with one witness down and one answering garbage: the slowest took %s", slowest)
}

// A witness that already holds part of the log (a host restarted without its cosignatures file,
// or a second witness set up later) is caught up from the size its 409 names.
func TestFollowerCatchesUpFrom409(t *testing.T) {
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := signature.LoadED25519Signer(priv)
	lg, _ := ledger.Open(filepath.Join(dir, "ledger.jsonl"), "sealrun.ledger/catchup", signer)
	defer lg.Close()
	vkey, _ := ledger.VerifierKey("sealrun.ledger/catchup", priv.Public())
	logV, _ := LogVerifier(vkey)
	w := newTestWitness(t, t.TempDir())
	w.srv.logs["sealrun.ledger/catchup"] = note.VerifierList(logV)
	ts := httptest.NewServer(w.srv)
	defer ts.Close()
	for i := range 5 {
		lg.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", i), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: 1})
	}
	signed, _ := lg.Head()
	if _, err := Submit(t.Context(), ts.Client(), ts.URL, w.v, 0, nil, signed); err != nil {
		t.Fatal(err)
	}
	lg.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: "r-5", Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: 1})
	store, _ := OpenCosignatures(filepath.Join(dir, CosignaturesFile)) // empty: it believes the witness holds 0
	defer store.Close()
	f := NewFollower(lg, []Target{{Name: "w", URL: ts.URL, Verifier: w.v}}, store, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for store.Latest(w.v.Name()) < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := store.Latest(w.v.Name()); got != 6 {
		t.Fatalf("cosigned up to %d, want 6 (status %+v)", got, f.Status())
	}
}

// A cosignatures file kept from another ledger of the same origin (the ledger was replaced, or a
// second machine's was shown): both trees' heads load, kept as evidence, and an export takes only
// the heads of the ledger it writes.
func TestCosignaturesOfTwoTrees(t *testing.T) {
	dir := t.TempDir()
	a := newTestLog(t, "sealrun.ledger/two", false)
	b := &testLog{origin: a.origin, signer: a.signer, tree: ledger.NewTree(), vkey: a.vkey}
	a.grow(3)
	b.grow(3)
	w := newTestWitness(t, t.TempDir())
	cs, err := OpenCosignatures(filepath.Join(dir, CosignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	ha, hb := a.head(t), b.head(t)
	body := func(s string) []byte { x, _, _ := strings.Cut(s, "\n\n"); return []byte(x + "\n") }
	if err := cs.Add(w.v.Name(), ha, w.srv.signer.Cosign(body(ha), time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := cs.Add(w.v.Name(), hb, w.srv.signer.Cosign(body(hb), time.Now())); err != nil {
		t.Fatalf("a second tree's head: %v", err)
	}
	cs.Close()
	cs, err = OpenCosignatures(filepath.Join(dir, CosignaturesFile))
	if err != nil {
		t.Fatalf("reopen a file holding two trees: %v", err)
	}
	defer cs.Close()
	isB := func(signed string) bool { return strings.HasPrefix(signed, strings.SplitN(hb, "\n\n", 2)[0]) }
	signed, size, _, ok := cs.Best([]string{w.v.Name()}, 1, isB)
	if !ok || size != 3 || !isB(signed) {
		t.Fatalf("best of tree b: %v %d", ok, size)
	}
}
