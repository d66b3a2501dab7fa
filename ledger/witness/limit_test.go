package witness

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sealrun/sealrun/ledger"
)

// A client is an IPv4 address or an IPv6 /64: every address of one /64 shares its budget, two
// /64s do not; IPv4 written as IPv6 is the IPv4 address.
func TestClientKeys(t *testing.T) {
	same := [][2]string{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"2001:db8:1:2::1", "2001:db8:1:2::1%eth0"},
		{"192.0.2.7", "::ffff:192.0.2.7"},
	}
	differ := [][2]string{
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
		{"192.0.2.7", "192.0.2.8"},
		{"::ffff:192.0.2.7", "::192.0.2.7"},
	}
	key := func(s string) clientKey { return keyOf(netip.MustParseAddr(s)) }
	for _, p := range same {
		if key(p[0]) != key(p[1]) {
			t.Errorf("%s and %s: two clients", p[0], p[1])
		}
	}
	for _, p := range differ {
		if key(p[0]) == key(p[1]) {
			t.Errorf("%s and %s: one client", p[0], p[1])
		}
	}
	if got := key("2001:db8:1:2::1").String(); got != "2001:db8:1:2::/64" {
		t.Errorf("an IPv6 client is named %q", got)
	}
	if got := key("::ffff:192.0.2.7").String(); got != "192.0.2.7" {
		t.Errorf("an IPv4 client is named %q", got)
	}
}

// The client of a request: the peer, unless the peer is a trusted proxy; then the nearest
// address in X-Forwarded-For no trusted proxy has. A header from an untrusted peer is ignored
// (and said to be there).
func TestClientOf(t *testing.T) {
	trusted, err := ParseProxies([]string{"127.0.0.1", "10.0.0.0/8,::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peer      string
		xff       []string
		want      string
		fromProxy bool
	}{
		{"192.0.2.1:4000", nil, "192.0.2.1", false},
		{"[2001:db8:7:8::1]:4000", nil, "2001:db8:7:8::/64", false}, // served directly over IPv6: its /64
		{"[2001:db8:7:8:aaaa::2]:4000", nil, "2001:db8:7:8::/64", false},
		{"[::ffff:192.0.2.1]:4000", nil, "192.0.2.1", false},
		{"192.0.2.1:4000", []string{"198.51.100.9"}, "192.0.2.1", true}, // anyone can write the header
		{"127.0.0.1:4000", nil, "127.0.0.1", false},                     // the proxy's own request
		{"127.0.0.1:4000", []string{"198.51.100.9"}, "198.51.100.9", false},
		{"[::1]:4000", []string{"2001:db8:5:6::9"}, "2001:db8:5:6::/64", false},
		{"127.0.0.1:4000", []string{"203.0.113.66, 198.51.100.9"}, "198.51.100.9", false}, // what the client wrote, then what the proxy saw
		{"127.0.0.1:4000", []string{"203.0.113.66", "198.51.100.9"}, "198.51.100.9", false},
		{"127.0.0.1:4000", []string{"198.51.100.9, 10.1.2.3"}, "198.51.100.9", false}, // through two trusted proxies
		{"127.0.0.1:4000", []string{"junk, 10.1.2.3"}, "10.1.2.3", false},             // garbage: counted as the hop that took it
		{"127.0.0.1:4000", []string{"198.51.100.9, junk"}, "127.0.0.1", false},
		{"127.0.0.1:4000", []string{""}, "127.0.0.1", false},
		{"127.0.0.1:4000", []string{strings.Repeat("1.2.3.4,", 1000) + "198.51.100.9"}, "198.51.100.9", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/add-checkpoint", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		k, fromProxy, err := clientOf(r, trusted)
		if err != nil || k.String() != c.want || fromProxy != c.fromProxy {
			t.Errorf("peer %s, X-Forwarded-For %q: %s %v %v; want %s %v", c.peer, c.xff, k, fromProxy, err, c.want, c.fromProxy)
		}
	}
	for _, bad := range []string{"localhost", "127.0.0.1/33", "fe80::1%eth0", ""} {
		if _, err := ParseProxies([]string{bad}); err == nil || !strings.Contains(err.Error(), "trusted proxy") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A request through a proxy the operator did not name is counted as the proxy, and the witness
// says so once, naming --trusted-proxy.
func TestUntrustedProxyWarned(t *testing.T) {
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	var buf bytes.Buffer
	w.srv.log = slog.New(slog.NewTextHandler(&buf, nil))
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/add-checkpoint", strings.NewReader("x"))
		r.RemoteAddr = "127.0.0.1:5000"
		r.Header.Set("X-Forwarded-For", "198.51.100.9")
		w.srv.ServeHTTP(httptest.NewRecorder(), r)
	}
	if n := strings.Count(buf.String(), "name it with --trusted-proxy"); n != 1 {
		t.Fatalf("%d warnings for three requests through an untrusted proxy:\n%s", n, buf.String())
	}
}

// The limiter: a burst, then the rate; one client's traffic costs another nothing; at a million
// clients it keeps max buckets, forgetting the least recently seen, and one that comes back
// starts afresh.
func TestLimiter(t *testing.T) {
	l := newLimiter[clientKey](10, 20, 1000)
	now := time.Unix(1_000_000, 0)
	a, b := keyOf(netip.MustParseAddr("192.0.2.1")), keyOf(netip.MustParseAddr("192.0.2.2"))
	n := 0
	for l.allow(a, now) {
		n++
	}
	if n != 20 {
		t.Fatalf("a burst of %d; want 20", n)
	}
	if !l.allow(b, now) {
		t.Fatal("another client refused for the first's traffic")
	}
	if l.allow(a, now.Add(50*time.Millisecond)) || !l.allow(a, now.Add(100*time.Millisecond)) {
		t.Fatal("not 10 a second after the burst")
	}
	for i := range 1_000_000 {
		var k clientKey
		k[0], k[1], k[2], k[3] = 0x20, byte(i>>16), byte(i>>8), byte(i)
		l.allow(k, now)
	}
	if l.size() != 1000 || len(l.slots) != 1000 {
		t.Fatalf("%d buckets (%d slots) after a million clients; want 1000", l.size(), len(l.slots))
	}
	if !l.allow(a, now) {
		t.Fatal("a forgotten client does not start afresh")
	}
	// The list stays whole: walking it from the newest visits every bucket once.
	seen := 0
	for i := l.newest; i >= 0; i = l.slots[i].next {
		seen++
	}
	if seen != 1000 {
		t.Fatalf("the recency list has %d of 1000 buckets", seen)
	}
}

// Refusals are logged at a bounded rate, each line saying how many went unlogged before it.
func TestRefusalsLogBounded(t *testing.T) {
	var buf bytes.Buffer
	r := newRefusals(slog.New(slog.NewTextHandler(&buf, nil)), 5)
	now := time.Unix(1_000_000, 0)
	for i := range 10_000 {
		r.note(now.Add(time.Duration(i)*time.Millisecond), "add-checkpoint refused", "i", i)
	}
	lines := strings.Count(buf.String(), "\n")
	if lines < 10 || lines > 70 { // a burst of 10, then 5 a second for 10 s
		t.Fatalf("%d lines for 10,000 refusals in 10 s", lines)
	}
	if !strings.Contains(buf.String(), "unlogged_before=") {
		t.Fatal("no line says how many refusals went unlogged")
	}
}

// A log's budget is spent only by what moves its head, which only its key can sign: a flood of
// replays of its own published checkpoint, or of its current head, leaves its next head
// cosigned at once; a log that moves faster than its budget is answered 429 with Retry-After.
func TestLogBudget(t *testing.T) {
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	w.srv.heads = newLimiter[string](1, 2, 1)
	ts := httptest.NewServer(w.srv)
	defer ts.Close()
	lg.grow(3)
	first := lg.head(t)
	if _, err := Submit(t.Context(), NewClient(), ts.URL, w.v, 0, nil, first); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		w.srv.AddCheckpoint(RequestBody(0, nil, first)) // a stale replay: 409
		w.srv.AddCheckpoint(RequestBody(3, nil, first)) // the current head again: cosigned, moves nothing
	}
	lg.grow(1)
	if _, err := Submit(t.Context(), NewClient(), ts.URL, w.v, 3, lg.proof(t, 3), lg.head(t)); err != nil {
		t.Fatalf("the log's next head after 400 replays: %v", err)
	}
	lg.grow(1)
	_, err := Submit(t.Context(), NewClient(), ts.URL, w.v, 4, lg.proof(t, 4), lg.head(t))
	if se, ok := err.(*StatusError); !ok || se.Status != 429 || se.RetryAfter != time.Second || !strings.Contains(se.Text, "moved more than 1 times a second") {
		t.Fatalf("a third move within a second against a budget of 1/s, burst 2: %v", err)
	}
}

// The follower follows no redirect: a witness URL answering 307 sends the head nowhere else, and
// the follower says where it was sent. What a witness receives is the head and its proof, with
// no credentials, cookies or other headers; a 429 is waited out, not counted as a failure.
func TestFollowerSendsOnlyHeads(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	redirect := httptest.NewServer(http.RedirectHandler(other.URL+"/add-checkpoint", http.StatusTemporaryRedirect))
	defer redirect.Close()
	lg := newTestLog(t, "sealrun.ledger/host-a", false)
	w := newTestWitness(t, t.TempDir(), lg)
	lg.grow(2)
	_, err := Submit(t.Context(), NewClient(), redirect.URL, w.v, 0, nil, lg.head(t))
	if se, ok := err.(*StatusError); !ok || se.Status != 307 || !strings.Contains(err.Error(), "a redirect to "+other.URL+"/add-checkpoint, which is not followed") {
		t.Fatalf("a redirect: %v", err)
	}
	if elsewhere.Load() != 0 {
		t.Fatal("the head was sent where the redirect said")
	}
	var got []*http.Request
	var bodies [][]byte
	spy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		got = append(got, r)
		bodies = append(bodies, b.Bytes())
		http.SetCookie(rw, &http.Cookie{Name: "track", Value: "1"})
		w.srv.ServeHTTP(rw, &http.Request{Method: r.Method, URL: r.URL, Header: r.Header, Body: http.NoBody, RemoteAddr: r.RemoteAddr})
	}))
	defer spy.Close()
	hc := NewClient()
	Submit(t.Context(), hc, spy.URL, w.v, 0, nil, lg.head(t))
	Submit(t.Context(), hc, spy.URL, w.v, 0, nil, lg.head(t))
	for i, r := range got {
		var names []string
		for k := range r.Header {
			names = append(names, k)
		}
		if fmt.Sprint(slices.Sorted(slices.Values(names))) != "[Accept-Encoding Content-Length Content-Type User-Agent]" || r.URL.Path != "/add-checkpoint" || r.URL.RawQuery != "" || r.Method != http.MethodPost {
			t.Errorf("request %d: %s %s with headers %v", i, r.Method, r.URL, r.Header)
		}
		if !bytes.Equal(bodies[i], RequestBody(0, nil, lg.head(t))) {
			t.Errorf("request %d's body is not the head: %q", i, bodies[i])
		}
	}
	// A 429 is the witness's budget: retried after its Retry-After, without doubling backoff.
	var calls atomic.Int32
	w2 := newTestWitness(t, t.TempDir(), lg)
	busy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			rw.Header().Set("Retry-After", "1")
			http.Error(rw, "too many", http.StatusTooManyRequests)
			return
		}
		w2.srv.ServeHTTP(rw, r)
	}))
	defer busy.Close()
	cs, err := OpenCosignatures(t.TempDir() + "/c.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	f := NewFollower(&followedLog{t, lg}, []Target{{Name: "busy", URL: busy.URL, Verifier: w2.v}}, cs, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for start := time.Now(); cs.Latest(w2.v.Name()) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("never cosigned after three 429s: %+v", f.Status())
		}
	}
	if calls.Load() != 4 {
		t.Errorf("%d requests for three 429s and a 200", calls.Load())
	}
}

// followedLog is a testLog as a Follower's Source; it does not change.
type followedLog struct {
	t  testing.TB
	lg *testLog
}

func (f *followedLog) Head() (string, ledger.Checkpoint) {
	root, _ := f.lg.tree.Root(f.lg.tree.Size())
	return f.lg.head(f.t), ledger.Checkpoint{Origin: f.lg.origin, Size: f.lg.tree.Size(), Root: root}
}

func (f *followedLog) ConsistencyProof(a, b uint64) ([][]byte, error) {
	return f.lg.tree.ConsistencyProof(a, b)
}

func (f *followedLog) Changed() <-chan struct{} { return nil }
