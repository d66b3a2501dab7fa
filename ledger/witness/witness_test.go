package witness

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

// testLog is a log as sealrund keeps one: a Merkle tree and a key signing its heads.
type testLog struct {
	origin string
	signer signature.Signer
	tree   *ledger.Tree
	vkey   string
}

func newTestLog(t testing.TB, origin string, ecdsaKey bool) *testLog {
	t.Helper()
	var s signature.Signer
	var pub any
	var err error
	if ecdsaKey {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		s, err = signature.LoadECDSASigner(k, crypto.SHA256)
		pub = &k.PublicKey
	} else {
		p, priv, _ := ed25519.GenerateKey(rand.Reader)
		s, err = signature.LoadED25519Signer(priv)
		pub = p
	}
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := ledger.VerifierKey(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{origin: origin, signer: s, tree: ledger.NewTree(), vkey: vkey}
}

func (l *testLog) grow(n int) {
	for range n {
		l.tree.Append(ledger.LeafHash([]byte(fmt.Sprint(l.tree.Size(), rand.Text()))))
	}
}

// head signs the log's current head.
func (l *testLog) head(t testing.TB) string {
	t.Helper()
	root, err := l.tree.Root(l.tree.Size())
	if err != nil {
		t.Fatal(err)
	}
	signed, err := ledger.SignCheckpoint(ledger.Checkpoint{Origin: l.origin, Size: l.tree.Size(), Root: root}, l.signer)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func (l *testLog) proof(t testing.TB, old uint64) [][]byte {
	t.Helper()
	if old == 0 {
		return nil
	}
	p, err := l.tree.ConsistencyProof(old, l.tree.Size())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type testWitness struct {
	srv   *Server
	store *Store
	dir   string
	v     *Verifier
}

func newTestWitness(t testing.TB, dir string, logs ...*testLog) *testWitness {
	t.Helper()
	skey, _, err := GenerateKey("witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "key")); err == nil {
		skey = string(b)
	} else {
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "key"), []byte(skey), 0o600)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(c.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ls []Log
	for _, l := range logs {
		lv, err := LogVerifier(l.vkey)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, Log{Origin: l.origin, Keys: []note.Verifier{lv}})
	}
	srv, err := NewServer(Config{Signer: c, Logs: ls, Store: st, Rate: 1e6, LogRate: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	return &testWitness{srv: srv, store: st, dir: dir, v: v}
}

func status(err error) int {
	if err == nil {
		return 200
	}
	if e, ok := err.(*requestError); ok {
		return e.status
	}
	return -1
}

// The protocol's answers, in the order a log meets them: a first head from size 0, a grown head
// with its proof, a stale old size (409 with the size held), a bad proof (422), an unknown
// origin (404), another key's signature (403), an old size past the checkpoint (400), the same
// size with another root (409), and a fork that cannot be proven consistent (422).
func TestAddCheckpoint(t *testing.T) {
	for _, ecdsaKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("ecdsa=%v", ecdsaKey), func(t *testing.T) {
			lg := newTestLog(t, "sealrun.ledger/host-a", ecdsaKey)
			w := newTestWitness(t, t.TempDir(), lg)
			lg.grow(3)
			first := lg.head(t)
			line, err := w.srv.AddCheckpoint(RequestBody(0, nil, first))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Pick(first, line, w.v); err != nil {
				t.Fatalf("cosignature %q: %v", line, err)
			}
			// x/mod's note.Open with the witness's verifier, and with the log's key beside it.
			lv, _ := LogVerifier(lg.vkey)
			n, err := note.Open([]byte(first+line), note.VerifierList(w.v, lv))
			if err != nil || len(n.Sigs) != 2 {
				t.Fatalf("note.Open of the cosigned checkpoint: %v (%d signatures)", err, len(n.Sigs))
			}
			lg.grow(4)
			second := lg.head(t)
			if _, err := w.srv.AddCheckpoint(RequestBody(3, lg.proof(t, 3), second)); err != nil {
				t.Fatalf("from 3 to 7: %v", err)
			}
			if h := w.store.Head(lg.origin); h.Size != 7 {
				t.Fatalf("the witness holds %+v", h)
			}
			// The same head again: cosigned again, nothing changes.
			if _, err := w.srv.AddCheckpoint(RequestBody(7, nil, second)); err != nil {
				t.Fatalf("the same head again: %v", err)
			}
			_, err = w.srv.AddCheckpoint(RequestBody(3, lg.proof(t, 3), second))
			if e, ok := err.(*requestError); !ok || e.status != 409 || !e.isSize || e.size != 7 {
				t.Fatalf("a stale old size: %v", err)
			}
			lg.grow(2)
			third := lg.head(t)
			bad := lg.proof(t, 7)
			bad[0][0] ^= 1
			if got := status(func() error { _, err := w.srv.AddCheckpoint(RequestBody(7, bad, third)); return err }()); got != 422 {
				t.Errorf("a bad proof: %d", got)
			}
			other := newTestLog(t, "sealrun.ledger/host-b", ecdsaKey)
			other.grow(1)
			if got := status(func() error { _, err := w.srv.AddCheckpoint(RequestBody(0, nil, other.head(t))); return err }()); got != 404 {
				t.Errorf("an unknown origin: %d", got)
			}
			forger := newTestLog(t, lg.origin, ecdsaKey) // same origin, another key
			forger.grow(9)
			if got := status(func() error {
				_, err := w.srv.AddCheckpoint(RequestBody(7, forger.proof(t, 7), forger.head(t)))
				return err
			}()); got != 403 {
				t.Errorf("another key's checkpoint: %d", got)
			}
			if got := status(func() error { _, err := w.srv.AddCheckpoint(RequestBody(10, nil, third)); return err }()); got != 400 {
				t.Errorf("old past the checkpoint: %d", got)
			}
			// A split view: a second tree under the same key and origin (a second machine), shown
			// to the witness after the first.
			split := &testLog{origin: lg.origin, signer: lg.signer, tree: ledger.NewTree(), vkey: lg.vkey}
			split.grow(7)
			if got := status(func() error { _, err := w.srv.AddCheckpoint(RequestBody(7, nil, split.head(t))); return err }()); got != 409 {
				t.Errorf("the same size with another root: %d", got)
			}
			split.grow(5)
			if got := status(func() error {
				_, err := w.srv.AddCheckpoint(RequestBody(7, split.proof(t, 7), split.head(t)))
				return err
			}()); got != 422 {
				t.Errorf("a fork with its own proof: %d", got)
			}
			if _, err := w.srv.AddCheckpoint(RequestBody(7, lg.proof(t, 7), third)); err != nil {
				t.Fatalf("the real log goes on: %v", err)
			}
		})
	}
}

// Malformed bodies are 400 with a reason, and never reach the store.
func TestMalformedRequests(t *testing.T) {
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	lg.grow(2)
	head := lg.head(t)
	proofLine := strings.Repeat("A", 43) + "=\n"
	for name, body := range map[string]string{
		"empty":                 "",
		"no old line":           "\n" + head,
		"old with leading zero": "old 01\n\n" + head,
		"old negative":          "old -1\n\n" + head,
		"old past 2^64":         "old 18446744073709551616\n\n" + head,
		"old two spaces":        "old  1\n\n" + head,
		"no empty line":         "old 0\n" + strings.TrimSuffix(proofLine, "\n"),
		"no checkpoint":         "old 0\n\n",
		"proof not base64":      "old 1\n!!!\n\n" + head,
		"proof short":           "old 1\nAAAA\n\n" + head,
		"64 proof lines":        "old 1\n" + strings.Repeat(proofLine, 64) + "\n" + head,
		"checkpoint unsigned":   "old 0\n\nsealrun.ledger/host-a\n2\n" + strings.Repeat("A", 43) + "=\n",
		"checkpoint size 2^64":  "old 0\n\n" + strings.Replace(head, "\n2\n", "\n18446744073709551616\n", 1),
		"proof from 0":          "old 0\n" + proofLine + "\n" + head,
		"checkpoint no newline": "old 0\n\n" + strings.TrimSuffix(head, "\n"),
		"origin with CR":        "old 0\n\nsealrun.ledger/host-a\r\n2\n",
		"binary":                "old 0\n\n\x00\xff\xfe",
	} {
		_, err := w.srv.AddCheckpoint([]byte(body))
		if s := status(err); s < 400 || s >= 500 {
			t.Errorf("%s: status %d (%v)", name, s, err)
		}
	}
	if h := w.store.Head(lg.origin); h.Size != 0 {
		t.Errorf("a malformed request moved the head to %+v", h)
	}
	// A checkpoint with extension lines is cosigned with them (they are in the signed text).
	root, _ := lg.tree.Root(2)
	n := &note.Note{Text: ledger.Checkpoint{Origin: lg.origin, Size: 2, Root: root}.Text() + "extension line\n"}
	signedExt, err := note.Sign(n, noteSignerFor(t, lg))
	if err != nil {
		t.Fatal(err)
	}
	line, err := w.srv.AddCheckpoint(RequestBody(0, nil, string(signedExt)))
	if err != nil {
		t.Fatalf("a checkpoint with an extension line: %v", err)
	}
	if _, err := Pick(string(signedExt), line, w.v); err != nil {
		t.Fatalf("its cosignature: %v", err)
	}
}

// noteSignerFor signs any note text with an Ed25519 test log's key.
func noteSignerFor(t testing.TB, l *testLog) note.Signer {
	t.Helper()
	return &logNoteSigner{l: l}
}

type logNoteSigner struct{ l *testLog }

func (s *logNoteSigner) Name() string { return s.l.origin }
func (s *logNoteSigner) KeyHash() uint32 {
	v, _ := note.NewVerifier(s.l.vkey)
	return v.KeyHash()
}
func (s *logNoteSigner) Sign(msg []byte) ([]byte, error) {
	return s.l.signer.SignMessage(bytes.NewReader(msg))
}

// 50 add-checkpoints at once for one log, each from the size its sender last saw: the held size
// only grows, every cosigned head is one the log signed, and the last is the largest.
func TestConcurrentAddsNeverRollBack(t *testing.T) {
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	type req struct {
		old  uint64
		body []byte
	}
	var reqs []req
	for i := 1; i <= 50; i++ {
		lg.grow(1 + i%3)
		reqs = append(reqs, req{0, RequestBody(0, nil, lg.head(t))})
	}
	var mu sync.Mutex
	var seen []uint64
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.srv.AddCheckpoint(r.body)
			if e, ok := err.(*requestError); ok && e.isSize {
				mu.Lock()
				seen = append(seen, e.size)
				mu.Unlock()
				return
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Every request said old 0: exactly one was cosigned, the rest told the size it made.
	h := w.store.Head(lg.origin)
	if len(seen) != 49 || h.Size == 0 {
		t.Fatalf("%d conflicts, head %d", len(seen), h.Size)
	}
	for _, s := range seen {
		if s != h.Size {
			t.Fatalf("a conflict named size %d, the witness holds %d", s, h.Size)
		}
	}
	// Then each in turn from what the witness holds, racing: never backwards.
	var sizes []uint64
	for i := 0; i < 50; i++ {
		lg.grow(1)
		cur := w.store.Head(lg.origin).Size
		head := lg.head(t)
		wg.Add(2)
		for range 2 {
			go func() {
				defer wg.Done()
				w.srv.AddCheckpoint(RequestBody(cur, lg.proof(t, cur), head))
			}()
		}
		wg.Wait()
		sizes = append(sizes, w.store.Head(lg.origin).Size)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] < sizes[i-1] {
			t.Fatalf("the held size went back: %v", sizes)
		}
	}
	if sizes[len(sizes)-1] != lg.tree.Size() {
		t.Fatalf("held %d, the log is at %d", sizes[len(sizes)-1], lg.tree.Size())
	}
}

// The held heads survive a reopen; a line cut by a crash is dropped; an edited file is refused,
// naming it and what to do.
func TestStoreDurable(t *testing.T) {
	dir := t.TempDir()
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, dir, lg)
	lg.grow(5)
	if _, err := w.srv.AddCheckpoint(RequestBody(0, nil, lg.head(t))); err != nil {
		t.Fatal(err)
	}
	w.store.Close()
	path := filepath.Join(dir, StateFile)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"origin":"sealrun.ledger/host-a","size":9,"ro`) // cut mid-line
	f.Close()
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Head(lg.origin); h.Size != 5 {
		t.Fatalf("after a cut line: %+v", h)
	}
	st.Close()
	if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(`"size":9`)) {
		t.Errorf("the cut line is still in the file: %s", b)
	}
	// What a crash, a full disk or a torn sector leaves is the file's tail, never answered: it
	// is cut off and the witness comes back at the last whole record. Damage with whole records
	// after it is no write of a witness's: refused, naming the line, advising no older copy.
	root := strings.Repeat("A", 43) + "="
	rec := func(origin string, size int) string {
		return fmt.Sprintf(`{"origin":%q,"size":%d,"root":%q}`+"\n", origin, size, root)
	}
	for _, c := range []struct {
		name, content string
		held          uint64 // o's head after opening, when it opens
		refused       string // else: what the refusal says
	}{
		{"a garbage tail", rec("o", 3) + "not json\n", 3, ""},
		{"a tail with a bad root", rec("o", 3) + `{"origin":"o","size":4,"root":"xx"}` + "\n", 3, ""},
		{"a tail with an unknown field", rec("o", 3) + `{"origin":"o","size":4,"root":"` + root + `","extra":1}` + "\n", 3, ""},
		{"a tail of NULs", rec("o", 3) + "\x00\x00\x00\x00\x00\x00\x00\x00", 3, ""},
		{"a torn sector: NULs, then the record's end", rec("o", 3) + "\x00\x00\x00\x00:4,\"root\":\"" + root + "\"}\n", 3, ""},
		{"two damaged lines at the tail", rec("o", 3) + "{\"or\x00\n\x00ig\n", 3, ""},
		{"only damage", "\x00\x00\n", 0, ""},
		{"damage, then a whole record", rec("o", 3) + "not json\n" + rec("o", 5), 0, "line 2: not a head record"},
		{"goes back", rec("o", 5) + rec("o", 4), 0, "line 2: o goes back from size 5 to 4"},
		{"an oversized line mid-file", rec("o", 1) + strings.Repeat("x", 2000) + "\n" + rec("o", 2), 0, "line 2: not a head record (a line of over 1024 bytes)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, StateFile), []byte(c.content), 0o600)
			st, err := OpenStore(d)
			if c.refused != "" {
				if err == nil {
					st.Close()
					t.Fatal("opened")
				}
				msg := err.Error()
				if !strings.Contains(msg, StateFile) || !strings.Contains(msg, c.refused) || !strings.Contains(msg, "Retire this witness's key") || strings.Contains(msg, "backup") || strings.Contains(msg, "restore it") {
					t.Fatalf("%v\nwant the file, %q, the advice to retire the key, and none to restore a copy", err, c.refused)
				}
				if b, _ := os.ReadFile(filepath.Join(d, StateFile)); string(b) != c.content {
					t.Errorf("a refused file was changed: %q", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if h := st.Head("o"); h.Size != c.held {
				t.Errorf("holds %d; want %d", h.Size, c.held)
			}
			b, _ := os.ReadFile(filepath.Join(d, StateFile))
			if want := rec("o", int(c.held)); c.held > 0 && string(b) != want || c.held == 0 && len(b) != 0 {
				t.Errorf("the file after opening: %q", b)
			}
			// It goes on: the next head is appended after the whole records.
			if err := st.Update("o", func(h Head) (Head, error) { return Head{Size: h.Size + 1}, nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// One process per state: a second store on the same directory, in this process as in another,
// is refused naming the holder; once it is closed (or its process gone), the state opens.
func TestStoreOneHolder(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenStore(dir)
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d (", os.Getpid())) || !strings.Contains(err.Error(), LockFile) {
		t.Fatalf("a second store on the state: %v; want ErrInUse naming this pid and the lock file", err)
	}
	st.Close()
	st, err = OpenStore(dir)
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	st.Close()
	// Whatever a lock file says is text: a holder's hostile words are not echoed.
	os.WriteFile(filepath.Join(dir, LockFile), []byte("\x1b[2Jowned\n"), 0o600)
	f, _ := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	defer f.Close()
	if held, err := tryLock(f); held || err != nil {
		t.Fatal(held, err)
	}
	if _, err := OpenStore(dir); !errors.Is(err, ErrInUse) || strings.Contains(err.Error(), "\x1b") || !strings.Contains(err.Error(), "a process that has not said which") {
		t.Fatalf("%q", err)
	}
}

// Keys: what GenerateKey writes reads back; edited and foreign keys are refused with the reason.
func TestKeys(t *testing.T) {
	skey, vkey, err := GenerateKey("witness.example.org/w1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if c.VerifierKey() != vkey {
		t.Fatalf("vkey %q, want %q", c.VerifierKey(), vkey)
	}
	for _, bad := range []string{"", "w+1+2", "witness.example.org/w1+00000000+" + strings.Split(vkey, "+")[2]} {
		if _, err := NewVerifier(bad); err == nil {
			t.Errorf("witness key %q accepted", bad)
		}
	}
	logKey := newTestLog(t, "sealrun.ledger/a", false).vkey
	if _, err := NewVerifier(logKey); err == nil || !strings.Contains(err.Error(), "cosignature/v1") {
		t.Errorf("a log key as a witness key: %v", err)
	}
	if _, err := LogVerifier(vkey); err == nil {
		t.Error("a witness key as a log key accepted")
	}
	for _, bad := range []string{"PRIVATE+KEY+a b+00000000+AA==", strings.TrimPrefix(skey, "PRIVATE+"), skey[:len(skey)-4] + "AAA="} {
		if _, err := NewCosigner(bad); err == nil {
			t.Errorf("private key %q accepted", bad)
		}
	}
	if _, _, err := GenerateKey("has space"); err == nil {
		t.Error("a name with a space accepted")
	}
}

// Over HTTP: the statuses, the 409's body and type, the size and rate bounds, and Submit's
// reading of each.
func TestHTTP(t *testing.T) {
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	ts := httptest.NewServer(w.srv)
	defer ts.Close()
	lg.grow(3)
	ctx := t.Context()
	line, err := Submit(ctx, ts.Client(), ts.URL, w.v, 0, nil, lg.head(t))
	if err != nil || !strings.HasPrefix(line, "— witness.test/w1 ") {
		t.Fatalf("submit: %q %v", line, err)
	}
	lg.grow(1)
	_, err = Submit(ctx, ts.Client(), ts.URL, w.v, 0, nil, lg.head(t))
	if ce, ok := err.(*ConflictError); !ok || ce.Size != 3 {
		t.Fatalf("a stale submit: %v", err)
	}
	if _, err := Submit(ctx, ts.Client(), ts.URL, w.v, 3, lg.proof(t, 3), lg.head(t)); err != nil {
		t.Fatalf("resent from the size held: %v", err)
	}
	resp, _ := http.Post(ts.URL+"/add-checkpoint", "text/plain", bytes.NewReader(make([]byte, MaxRequestBody+1)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body: %d", resp.StatusCode)
	}
	resp, _ = http.Get(ts.URL + "/add-checkpoint")
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	resp, _ = http.Post(ts.URL+"/other", "text/plain", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("another path: %d", resp.StatusCode)
	}
	// The rate bound: what cannot be a checkpoint of a log it follows is refused without being
	// counted; a burst of requests that could be is answered 429 beyond it.
	w.srv.clients = newLimiter[clientKey](2, 4, 16)
	codes := map[int]int{}
	post := func(body []byte) int {
		resp, err := http.Post(ts.URL+"/add-checkpoint", "text/plain", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	unsigned := RequestBody(0, nil, strings.Replace(lg.head(t), "— "+lg.origin+" ", "— "+lg.origin+"x ", 1))
	for range 50 {
		codes[post([]byte("x"))]++
		codes[post(RequestBody(0, nil, "sealrun.ledger/other\n1\nAAAA\n\n— x AAAA\n"))]++
		codes[post(unsigned)]++
	}
	if codes[429] > 0 || codes[400] != 50 || codes[404] != 50 || codes[403] != 50 {
		t.Errorf("150 requests that cannot be a checkpoint of the log: %v; want 50 each of 400, 404 and 403, none counted", codes)
	}
	clear(codes)
	body := RequestBody(0, nil, lg.head(t))
	for range 10 {
		codes[post(body)]++
	}
	if codes[429] < 5 {
		t.Errorf("10 requests at once against a rate of 2/s: %v", codes)
	}
}

// A cosignature's time is the witness's clock, and the verifier reads it back.
func TestCosignatureTime(t *testing.T) {
	skey, vkey, _ := GenerateKey("w.test/t")
	c, _ := NewCosigner(skey)
	v, _ := NewVerifier(vkey)
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	body := []byte("o\n1\n" + strings.Repeat("A", 43) + "=\n")
	line := c.Cosign(body, at)
	if _, err := note.Open(append(append([]byte{}, body...), append([]byte("\n"), line...)...), note.VerifierList(v)); err != nil {
		t.Fatal(err)
	}
	if got, err := CosignatureTime(line); err != nil || !got.Equal(at) {
		t.Errorf("time %v (%v), want %v", got, err, at)
	}
}

// VERIFY.md's by-hand check of a cosignature, run as written with openssl, xxd and base64.
func TestCosignatureByHandWithOpenSSL(t *testing.T) {
	testenv.RequireTool(t, "openssl", "openssl")
	testenv.RequireTool(t, "xxd", "xxd")
	doc, err := os.ReadFile("../../attest/VERIFY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "# vkey: the witness's public key")
	script, _, ok2 := strings.Cut("# vkey: the witness's public key"+rest, "```")
	if !ok || !ok2 {
		t.Fatal("VERIFY.md has no by-hand cosignature check")
	}
	// A key whose base64 holds a '+' (the vkey's separator): the recipe must not split there.
	var skey, vkey string
	for strings.Count(vkey, "+") < 3 {
		skey, vkey, _ = GenerateKey("witness.test/byhand")
	}
	c, _ := NewCosigner(skey)
	lg := newTestLog(t, "sealrun.ledger/byhand", false)
	lg.grow(3)
	body, _, _ := strings.Cut(lg.head(t), "\n\n")
	line := c.Cosign([]byte(body+"\n"), time.Now())
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "head.txt"), []byte(body+"\n"), 0o644)
	run := func(sig string) ([]byte, error) {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "vkey="+vkey, "sig="+sig)
		return cmd.CombinedOutput()
	}
	sig := strings.Fields(line)[2]
	if out, err := run(sig); err != nil || !strings.Contains(string(out), "Signature Verified Successfully") {
		t.Fatalf("openssl refuses a good cosignature: %v\n%s", err, out)
	}
	other := c.Cosign([]byte(strings.Replace(body, "\n3\n", "\n4\n", 1)+"\n"), time.Now())
	if out, err := run(strings.Fields(other)[2]); err == nil {
		t.Fatalf("openssl accepts a cosignature of another head:\n%s", out)
	}
}
