package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
)

// proxyBlock is docs/OPERATOR.md's nginx configuration for a witness, as written, with what a
// test must make its own: the ports, the certificate, the upstream's address and name (one
// per witness in one nginx). Each replaced text must be in the block once: a doc that changes
// shape fails here rather than being tested in a shape it no longer has.
func proxyBlock(t testing.TB, name string, port int, upstream, crt, key string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/OPERATOR.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- witness-proxy: nginx -->\n```nginx\n")
	block, _, ok2 := strings.Cut(rest, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/OPERATOR.md has no ```nginx block after <!-- witness-proxy: nginx -->")
	}
	for _, r := range [][2]string{
		{"upstream sealrun_witness {", "upstream " + name + " {"},
		{"proxy_pass http://sealrun_witness;", "proxy_pass http://" + name + ";"},
		{"server 127.0.0.1:7380;", "server " + upstream + ";"},
		{"listen 443 ssl;", fmt.Sprintf("listen 127.0.0.1:%d ssl;", port)},
		{"listen [::]:443 ssl;", fmt.Sprintf("listen [::1]:%d ssl;", port)},
		{"/etc/ssl/certs/witness.your-lab.example.pem", crt},
		{"/etc/ssl/private/witness.your-lab.example.key", key},
	} {
		if n := strings.Count(block, r[0]); n != 1 {
			t.Fatalf("docs/OPERATOR.md's nginx block has %q %d times; the test replaces it once", r[0], n)
		}
		block = strings.Replace(block, r[0], r[1], 1)
	}
	return block + "\n"
}

// servedWitness is a `sealrun witness serve` process.
type servedWitness struct {
	cmd    *exec.Cmd
	addr   string // host:port
	stderr *lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServe starts `sealrun witness serve` with args (and --listen 127.0.0.1:0) and waits for
// it to say where it serves, or to exit: then addr is "" and stderr says why. It is killed when
// the test ends.
func startServe(t testing.TB, args ...string) *servedWitness {
	t.Helper()
	w := &servedWitness{cmd: exec.Command(bin, append([]string{"witness", "serve", "--listen", "127.0.0.1:0"}, args...)...), stderr: &lockedBuffer{}, done: make(chan struct{})}
	out, _ := w.cmd.StdoutPipe()
	w.cmd.Stderr = w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { io.Copy(io.Discard, out); w.cmd.Wait(); close(w.done) }()
	t.Cleanup(w.kill)
	if _, rest, ok := strings.Cut(line, " on http://"); ok {
		w.addr, _, _ = strings.Cut(rest, " ")
	} else {
		<-w.done
	}
	return w
}

func (w *servedWitness) kill() {
	w.cmd.Process.Kill()
	<-w.done
}

// floodLog is a host's log as the witness sees it: a tree, signed heads, and the witness's key
// for it.
type floodLog struct {
	origin string
	tree   *ledger.Tree
	sign   func(ledger.Checkpoint) string
	vkey   string
}

func newFloodLog(t testing.TB, origin string) *floodLog {
	t.Helper()
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, pub, err := attest.LoadVerifier("../../attest/testdata/ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := ledger.VerifierKey(origin, pub)
	if err != nil {
		t.Fatal(err)
	}
	l := &floodLog{origin: origin, tree: ledger.NewTree(), vkey: vkey}
	l.sign = func(c ledger.Checkpoint) string {
		s, err := ledger.SignCheckpoint(c, signer)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return l
}

// grow appends n leaves and returns the signed head over them.
func (l *floodLog) grow(n int) string {
	for range n {
		l.tree.Append(ledger.LeafHash([]byte(fmt.Sprint(l.origin, l.tree.Size(), rand.Text()))))
	}
	root, _ := l.tree.Root(l.tree.Size())
	return l.sign(ledger.Checkpoint{Origin: l.origin, Size: l.tree.Size(), Root: root})
}

func (l *floodLog) proof(old uint64) [][]byte {
	if old == 0 {
		return nil
	}
	p, _ := l.tree.ConsistencyProof(old, l.tree.Size())
	return p
}

// proxied is a witness behind docs/OPERATOR.md's nginx block: its https URL, and a client that
// trusts the test's CA, from a given loopback source address ("" for any).
type proxied struct {
	url  string
	port int
	pool *x509.CertPool
}

func (p *proxied) client(from string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	hc := witness.NewClient()
	hc.Timeout = 10 * time.Second
	hc.Transport = &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: p.pool}, MaxIdleConnsPerHost: 4, ForceAttemptHTTP2: false}
	return hc
}

// behindNginx puts nginx, configured as docs/OPERATOR.md says, in front of each upstream
// (host:port), and returns them as the proxy serves them.
func behindNginx(t testing.TB, upstreams ...string) []*proxied {
	t.Helper()
	dir := t.TempDir()
	ca, crt, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "crt.pem"), filepath.Join(dir, "key.pem")
	if err := testenv.MakeCerts(ca, crt, key); err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	var conf strings.Builder
	var out []*proxied
	var addrs []string
	for i, u := range upstreams {
		port := testenv.FreePort(t)
		conf.WriteString(proxyBlock(t, fmt.Sprintf("witness_%d", i), port, u, crt, key))
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", port))
		out = append(out, &proxied{url: fmt.Sprintf("https://127.0.0.1:%d", port), port: port, pool: pool})
	}
	testenv.Nginx(t, conf.String(), addrs...)
	return out
}

// floodResult is what a flood and the real log's heads during it met.
type floodResult struct {
	latencies []time.Duration // the real log's add-checkpoints, each to its cosignature
	failures  []string        // the real log's add-checkpoints that were not cosigned
	statuses  map[string]map[int]int
	sent      int
	elapsed   time.Duration
}

func (r *floodResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// flood sends rate requests a second for d to the witness behind p, from 1,000 loopback
// addresses (127.0.1.1 to 127.0.4.250) and two "hot" ones (127.0.9.1-2) that send a quarter of
// it: junk, checkpoints of a log it does not follow, checkpoints of lg with no signature line of
// its key, and checkpoints of lg with a forged signature of its key (which cost a signature
// check). Meanwhile lg's own host adds a head every 100 ms and sends it from 127.0.0.1, as a
// follower would, with a consistency proof from the size the witness holds. rate 0: no flood.
func flood(t testing.TB, p *proxied, v *witness.Verifier, lg *floodLog, rate int, d time.Duration) *floodResult {
	t.Helper()
	res := &floodResult{statuses: map[string]map[int]int{}}
	var mu sync.Mutex
	count := func(kind string, code int) {
		mu.Lock()
		if res.statuses[kind] == nil {
			res.statuses[kind] = map[int]int{}
		}
		res.statuses[kind][code]++
		mu.Unlock()
	}
	// The bodies: each kind a few variants, made once.
	head := lg.grow(1)
	body, sigs, _ := strings.Cut(head, "\n\n")
	sig, _ := base64.StdEncoding.DecodeString(strings.Fields(strings.TrimPrefix(sigs, "— "))[1])
	forged := func() []byte {
		f := slices.Clone(sig)
		rand.Read(f[4:])
		return witness.RequestBody(0, nil, body+"\n\n— "+lg.origin+" "+base64.StdEncoding.EncodeToString(f)+"\n")
	}
	kinds := []struct {
		name string
		body func() []byte
	}{
		{"junk", func() []byte { return []byte(rand.Text() + "\n" + rand.Text()) }},
		{"another log", func() []byte {
			return witness.RequestBody(0, nil, strings.Replace(head, lg.origin, "sealrun.ledger/not-followed", -1))
		}},
		{"no signature of the log's key", func() []byte {
			return witness.RequestBody(0, nil, body+"\n\n— someone.else "+base64.StdEncoding.EncodeToString(sig)+"\n")
		}},
		{"forged signature", forged},
	}
	// Sources: a client (keep-alive connections) per address.
	var spread []*http.Client
	for i := range 1000 {
		spread = append(spread, p.client(fmt.Sprintf("127.0.%d.%d", 1+i/250, 1+i%250)))
	}
	var hot []*http.Client
	for i := range 2 { // each about 125 a second: over its budget of 20 even at a fifth of the rate
		hot = append(hot, p.client(fmt.Sprintf("127.0.9.%d", 1+i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := make(chan int, 4096)
	var workers sync.WaitGroup
	for range 128 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := range jobs {
				// Of each 8: two junk, one another log's, one unsigned, two forged from the spread
				// addresses, two forged from the hot ones.
				hc, kind, k := spread[i%len(spread)], kinds[[]int{0, 0, 1, 2, 3, 3, 3, 3}[i%8]], ""
				if i%8 >= 6 {
					hc, k = hot[i%len(hot)], "hot: "
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/add-checkpoint", bytes.NewReader(kind.body()))
				resp, err := hc.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						count(k+kind.name, -1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				count(k+kind.name, resp.StatusCode)
			}
		}()
	}
	// The real log: a head every 100 ms.
	real := p.client("")
	var held uint64
	realDone := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(realDone)
		for time.Since(start) < d {
			signed := lg.grow(1)
			t0 := time.Now()
			_, err := witness.Submit(ctx, real, p.url, v, held, lg.proof(held), signed)
			if ce, ok := err.(*witness.ConflictError); ok && held == 0 { // the first: from what it holds
				held = ce.Size
				_, err = witness.Submit(ctx, real, p.url, v, held, lg.proof(held), signed)
			}
			lat := time.Since(t0)
			mu.Lock()
			if err != nil {
				res.failures = append(res.failures, err.Error())
			} else {
				held = lg.tree.Size()
				res.latencies = append(res.latencies, lat)
			}
			mu.Unlock()
			time.Sleep(max(0, 100*time.Millisecond-lat))
		}
	}()
	if rate > 0 {
		tick := time.NewTicker(5 * time.Millisecond)
		for now := range tick.C {
			el := now.Sub(start)
			if el >= d {
				break
			}
			for due := int(el.Seconds() * float64(rate)); res.sent < due; res.sent++ {
				select {
				case jobs <- res.sent:
				default: // the workers are behind: what is not sent is not counted as sent
					due = res.sent
				}
			}
		}
		tick.Stop()
	}
	close(jobs)
	<-realDone
	workers.Wait()
	res.elapsed = time.Since(start)
	return res
}

// floodedWitness is `sealrun witness serve` following lg's log, with --trusted-proxy 127.0.0.1,
// behind docs/OPERATOR.md's nginx block.
func floodedWitness(t testing.TB) (*proxied, *witness.Verifier, *floodLog, *servedWitness) {
	t.Helper()
	testenv.RequireTool(t, "nginx", "nginx")
	dir := t.TempDir()
	key := filepath.Join(dir, "witness.key")
	skey, vkey, err := witness.GenerateKey("witness.test/flooded")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(key, []byte(skey+"\n"), 0o600)
	v, err := witness.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	lg := newFloodLog(t, "sealrun.ledger/flooded-host")
	w := startServe(t, "--key", key, "--state", filepath.Join(dir, "state"), "--log", lg.vkey, "--trusted-proxy", "127.0.0.1")
	if w.addr == "" {
		t.Fatalf("witness serve: %s", w.stderr)
	}
	return behindNginx(t, w.addr)[0], v, lg, w
}

// Behind nginx configured as docs/OPERATOR.md says (TLS on loopback, --trusted-proxy naming
// it), a flood of 1,000 requests a second for 30 s from a thousand addresses and two hot ones
// (junk, another log's checkpoints, checkpoints of the log unsigned, and with a forged signature)
// does not stop the real log's heads, one every 100 ms from another address: each is cosigned.
// The hot addresses are held to their budget; the spread ones, each within it, are refused for
// what they send, never for one another's traffic; nothing is cosigned but the log's own heads;
// and the witness's log grows by a few lines a second, not a line a refusal.
func TestWitnessBehindProxyUnderFlood(t *testing.T) {
	p, v, lg, w := floodedWitness(t)
	res := flood(t, p, v, lg, 1000, 30*time.Second)
	t.Logf("flood: %d requests in %s (%.0f a second); the real log: %d heads cosigned, p50 %s, p99 %s, max %s; statuses by kind: %v",
		res.sent, res.elapsed.Round(time.Millisecond), float64(res.sent)/res.elapsed.Seconds(), len(res.latencies), res.quantile(0.5), res.quantile(0.99), res.quantile(1), res.statuses)
	if len(res.failures) > 0 {
		t.Errorf("%d of the real log's heads were not cosigned during the flood; the first: %s", len(res.failures), res.failures[0])
	}
	if len(res.latencies) < 100 {
		t.Errorf("only %d of the real log's heads were sent in 30 s", len(res.latencies))
	}
	for kind, codes := range res.statuses {
		for code, n := range codes {
			want := map[string][]int{
				"junk": {400}, "another log": {404}, "no signature of the log's key": {403},
				"forged signature": {403}, "hot: forged signature": {403, 429},
			}[kind]
			if !slices.Contains(want, code) {
				t.Errorf("%s: %d answered %d; want only %v", kind, n, code, want)
			}
		}
	}
	if res.statuses["hot: forged signature"][429] == 0 {
		t.Error("the hot addresses, each over its budget, were never answered 429")
	}
	// The witness's stderr: its start, a line per cosignature, refusals at a bounded rate.
	lines := strings.Count(w.stderr.String(), "\n")
	if bound := 10 + len(res.latencies) + 5*int(res.elapsed.Seconds()+1) + 10; lines > bound {
		t.Errorf("the witness wrote %d lines for %d requests; want at most %d", lines, res.sent, bound)
	}
	if !strings.Contains(w.stderr.String(), "unlogged_before=") {
		t.Error("no refusal line counts those not logged")
	}
}

// Behind that same nginx, sealrun's witness and litewitness (torchwood's) are interchangeable:
// two hosts' ledgers, each followed by both witnesses through the proxy, each head cosigned by
// both, and each host's export with two cosignatures verifies with both witnesses' keys.
func TestWitnessAndLitewitnessBehindOneProxy(t *testing.T) {
	testenv.RequireTool(t, "nginx", "nginx")
	hostA := newHostLedger(t, "sealrun.ledger/proxied-a")
	hostB := newHostLedger(t, "sealrun.ledger/proxied-b")
	_, pub, err := attest.LoadVerifier("../../attest/testdata/ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	vkeyA, _ := ledger.VerifierKey("sealrun.ledger/proxied-a", pub)
	vkeyB, _ := ledger.VerifierKey("sealrun.ledger/proxied-b", pub)
	dir := t.TempDir()
	key, oursKey, _ := newWitnessKey(t, dir, "witness.test/ours")
	ours := startServe(t, "--key", key, "--state", filepath.Join(dir, "state"), "--log", vkeyA, "--log", vkeyB, "--trusted-proxy", "127.0.0.1")
	if ours.addr == "" {
		t.Fatalf("witness serve: %s", ours.stderr)
	}
	liteAddr, litePub := testenv.Litewitness(t, "witness.test/lite", map[string]string{"sealrun.ledger/proxied-a": vkeyA, "sealrun.ledger/proxied-b": vkeyB})
	liteKey := witness.VKey("witness.test/lite", litePub)
	px := behindNginx(t, ours.addr, liteAddr)
	var targets []witness.Target
	for i, k := range []string{oursKey, liteKey} {
		v, err := witness.NewVerifier(k)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, witness.Target{Name: v.Name(), URL: px[i].url, Verifier: v})
	}
	for _, h := range []*hostLedger{hostA, hostB} {
		f := h.followVia(t, px[0].client(""), targets...)
		h.add(t, 3)
		for _, tg := range targets {
			waitCosigned(t, f, tg.Name, 3)
		}
		h.add(t, 4)
		for _, tg := range targets {
			waitCosigned(t, f, tg.Name, 7)
		}
		out := filepath.Join(t.TempDir(), "ledger.jsonl")
		if r := sealrun(t, "--state-dir", h.state, "ledger", "export", "--out", out, "--witnessed", "2", "--wait", "10s"); r.code != 0 {
			t.Fatalf("export: %+v", r)
		}
		r := sealrun(t, "ledger", "verify", out, "--key", "../../attest/testdata/ed25519.pub", "--witness", oursKey, "--witness", liteKey)
		if r.code != 0 || !strings.Contains(r.stdout, "cosigned by witness.test/ours, witness.test/lite") && !strings.Contains(r.stdout, "cosigned by witness.test/lite, witness.test/ours") {
			t.Fatalf("verify with both witnesses' keys: %+v", r)
		}
	}
}

// One process per state: two `witness serve` started at once on one state, round after round,
// one serves and the other refuses naming it; 50 add-checkpoints at once, of two trees under the
// log's one key, race each kill -9 of the one serving. Over every round: a size is never
// cosigned with two roots, and after each restart the witness holds at least every size it
// answered for.
func TestWitnessTwoProcessesKill9(t *testing.T) {
	dir := t.TempDir()
	key, _, v := newWitnessKey(t, dir, "witness.test/raced")
	// Two trees under one origin and key: a log showing two views.
	forkA := newFloodLog(t, "sealrun.ledger/raced-host")
	forkB := newFloodLog(t, "sealrun.ledger/raced-host")
	state := filepath.Join(dir, "state")
	args := []string{"--key", key, "--state", state, "--log", forkA.vkey, "--rate", "100000", "--log-rate", "100000"}
	hc := &http.Client{Timeout: 5 * time.Second}
	var mu sync.Mutex
	roots := map[uint64]ledger.Hash{} // every size cosigned, and its root
	var acked uint64
	var cosigned atomic.Int32
	for round := range 8 {
		// Both at once: one serves, the other names it.
		var a, b *servedWitness
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); a = startServe(t, args...) }()
		go func() { defer wg.Done(); b = startServe(t, args...) }()
		wg.Wait()
		if (a.addr == "") == (b.addr == "") {
			t.Fatalf("round %d: two witness serve on one state: %q and %q serve; stderr:\n%s\n%s", round, a.addr, b.addr, a.stderr, b.stderr)
		}
		up, refused := a, b
		if a.addr == "" {
			up, refused = b, a
		}
		if round == 0 && !strings.Contains(up.stderr.String(), "serving on loopback with no --trusted-proxy") {
			t.Errorf("serving on loopback with no trusted proxy, the witness does not warn: %s", up.stderr)
		}
		if msg := refused.stderr.String(); !strings.Contains(msg, fmt.Sprintf("in use by another witness: pid %d (", up.cmd.Process.Pid)) || !strings.Contains(msg, "One witness process per state") {
			t.Fatalf("round %d: the second serve said %q; want it to name pid %d", round, msg, up.cmd.Process.Pid)
		}
		url := "http://" + up.addr
		var senders sync.WaitGroup
		for i := range 50 {
			senders.Add(1)
			go func() {
				defer senders.Done()
				fork := forkA
				if i%2 == 1 {
					fork = forkB
				}
				var held uint64
				for {
					mu.Lock()
					n := 1 + i%3
					if s := fork.tree.Size(); s < held {
						n = int(held-s) + 1 // the other tree is ahead: catch up past it
					}
					signed := fork.grow(n)
					size := fork.tree.Size()
					root, _ := fork.tree.Root(size)
					proof := fork.proof(held)
					mu.Unlock()
					_, err := witness.Submit(context.Background(), hc, url, v, held, proof, signed)
					if ce, ok := err.(*witness.ConflictError); ok {
						held = ce.Size
						continue
					}
					if se, ok := err.(*witness.StatusError); ok {
						if se.Status == http.StatusUnprocessableEntity || se.Status == http.StatusConflict {
							continue // the other tree's: refused, as it must be
						}
						t.Errorf("round %d: %v", round, err)
						return
					}
					if err != nil {
						return // killed
					}
					cosigned.Add(1)
					mu.Lock()
					if r, ok := roots[size]; ok && r != root {
						t.Errorf("round %d: size %d cosigned with two roots", round, size)
					}
					roots[size] = root
					acked = max(acked, size)
					mu.Unlock()
					held = size
				}
			}()
		}
		time.Sleep(time.Duration(20+mrand.IntN(200)) * time.Millisecond) // kill -9 at any moment
		up.cmd.Process.Kill()
		<-up.done
		senders.Wait()
		if t.Failed() {
			return
		}
		// Restarted, it holds at least what it acknowledged.
		again := startServe(t, args...)
		if again.addr == "" {
			t.Fatalf("round %d: after kill -9 the witness does not start: %s", round, again.stderr)
		}
		mu.Lock()
		probe := forkA.grow(1)
		mu.Unlock()
		_, err := witness.Submit(context.Background(), hc, "http://"+again.addr, v, 0, nil, probe)
		again.kill()
		ce, ok := err.(*witness.ConflictError)
		if acked > 0 && (!ok || ce.Size < acked) {
			t.Fatalf("round %d: acknowledged size %d; after kill -9 the witness answers %v", round, acked, err)
		}
	}
	if cosigned.Load() == 0 {
		t.Fatal("nothing was ever cosigned")
	}
	t.Logf("8 rounds: %d heads cosigned, %d sizes, the largest %d; never two roots for one size", cosigned.Load(), len(roots), acked)
}

// The real log's add-checkpoint, each head to its cosignature through nginx, while the witness
// is flooded as TestWitnessBehindProxyUnderFlood floods it (1,000 requests a second for 30 s),
// against the same with no flood, in the same run.
func BenchmarkWitnessUnderFlood(b *testing.B) {
	p, v, lg, _ := floodedWitness(b)
	var quiet, flooded *floodResult
	for b.Loop() {
		quiet = flood(b, p, v, lg, 0, 10*time.Second)
		flooded = flood(b, p, v, lg, 1000, 30*time.Second)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(flooded.quantile(0.5)), "p50-ms")
	b.ReportMetric(ms(flooded.quantile(0.99)), "p99-ms")
	b.ReportMetric(ms(quiet.quantile(0.5)), "quiet-p50-ms")
	b.ReportMetric(ms(quiet.quantile(0.99)), "quiet-p99-ms")
	b.ReportMetric(float64(flooded.sent)/flooded.elapsed.Seconds(), "flood-req/s")
	b.ReportMetric(float64(len(flooded.failures)), "refused-heads")
}
