package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/ledger/witness/witnesstest"
)

// The witness verbs as an operator meets them: keygen (never over an existing key), key, serve's
// refusals of bad input, each naming the flag or the line.
func TestWitnessVerbs(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	r := sealrun(t, "witness", "keygen", "--name", "witness.test/w1", "--out", key)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "witness.test/w1+") {
		t.Fatalf("keygen: %+v", r)
	}
	vkey := strings.TrimSpace(r.stdout)
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	logs := filepath.Join(dir, "logs")
	os.WriteFile(logs, []byte("# hosts\n\nnot-a-key\n"), 0o644)
	_, pub, err := attest.LoadVerifier("../../attest/testdata/ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	logKey, _ := ledger.VerifierKey("sealrun.ledger/x", pub)
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"bare", []string{"witness"}, 2, "", "missing subcommand"},
		{"keygen over a key", []string{"witness", "keygen", "--name", "w.test/x", "--out", key}, 2, "", "is never overwritten"},
		{"keygen bad name", []string{"witness", "keygen", "--name", "has space", "--out", filepath.Join(dir, "k2")}, 2, "", "not a key name"},
		{"key", []string{"witness", "key", key}, 0, vkey, ""},
		{"key of a non-key", []string{"witness", "key", logs}, 1, "", "not a witness private key"},
		{"serve without logs", []string{"witness", "serve", "--key", key, "--state", dir}, 2, "", "--log"},
		{"serve without key", []string{"witness", "serve", "--state", dir, "--log", vkey}, 2, "", "--key"},
		{"serve a witness key as a log", []string{"witness", "serve", "--key", key, "--state", dir, "--log", vkey}, 2, "", "--log: log key"},
		{"serve a bad logs file", []string{"witness", "serve", "--key", key, "--state", dir, "--logs", logs}, 2, "", logs + ":3"},
		{"serve behind a proxy that is no address", []string{"witness", "serve", "--key", key, "--state", dir, "--log", logKey, "--trusted-proxy", "proxy.local"}, 2, "", `--trusted-proxy: trusted proxy "proxy.local" is not an IP address or prefix`},
		{"serve with no rate", []string{"witness", "serve", "--key", key, "--state", dir, "--log", logKey, "--rate", "0"}, 2, "", "--rate and --log-rate are per second, above 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stdout, c.stdout) || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}

// startWitness starts sealrun witness serve following logKey (startServe) and returns its URL.
func startWitness(t *testing.T, key, state, logKey string) (string, *servedWitness) {
	t.Helper()
	w := startServe(t, "--key", key, "--state", state, "--log", logKey, "--rate", "100000")
	if w.addr == "" {
		t.Fatalf("witness serve: %s", w.stderr)
	}
	return "http://" + w.addr, w
}

// newWitnessKey makes a witness key with sealrun witness keygen (its file in dir) and returns
// the file, its public key as sealrun witness key prints it, and its verifier.
func newWitnessKey(t *testing.T, dir, name string) (key, vkey string, v *witness.Verifier) {
	t.Helper()
	key = filepath.Join(dir, "witness.key")
	if r := sealrun(t, "witness", "keygen", "--name", name, "--out", key); r.code != 0 {
		t.Fatal(r)
	}
	vkey = strings.TrimSpace(sealrun(t, "witness", "key", key).stdout)
	v, err := witness.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return key, vkey, v
}

// kill -9 of the witness at any moment loses no cosigned size: after every restart it holds at
// least the largest size it answered 200 for, and a log that resends from the size a 409 names
// goes on. The log is a real ledger signed with a host key, its heads taken from its export.
func TestWitnessSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	key, _, wv := newWitnessKey(t, dir, "witness.test/w1")
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledger.jsonl")
	lg, err := ledger.Open(path, "sealrun.ledger/kill9-host", signer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	tree := ledger.NewTree()
	add := func(n int) string { // append n runs, return the signed head over them
		for range n {
			e := &ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", tree.Size()), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: 1}
			if _, err := lg.Append(e); err != nil {
				t.Fatal(err)
			}
			leaf, _ := e.Encode()
			tree.Append(ledger.LeafHash(leaf))
		}
		root, _ := tree.Root(tree.Size())
		signed, err := ledger.SignCheckpoint(ledger.Checkpoint{Origin: "sealrun.ledger/kill9-host", Size: tree.Size(), Root: root}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	exported := filepath.Join(dir, "export.jsonl")
	add(1)
	sealrun(t, "--state-dir", dir, "ledger", "export", "--out", exported)
	vk := sealrun(t, "ledger", "vkey", exported, "--key", "../../attest/testdata/ed25519.pub")
	if vk.code != 0 {
		t.Fatalf("ledger vkey: %+v", vk)
	}
	logKey := strings.TrimSpace(vk.stdout)
	state := filepath.Join(dir, "witness-state")
	hc := &http.Client{Timeout: 5 * time.Second}
	var acked, held uint64
	for round := range 8 {
		url, w := startWitness(t, key, state, logKey)
		killAt := time.Duration(rand.IntN(40)) * time.Millisecond
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				signed := add(1 + rand.IntN(3))
				p := [][]byte(nil)
				if held > 0 {
					if p, err = tree.ConsistencyProof(held, tree.Size()); err != nil {
						t.Error(err)
						return
					}
				}
				_, err := witness.Submit(context.Background(), hc, url, wv, held, p, signed)
				if ce, ok := err.(*witness.ConflictError); ok {
					held = ce.Size
					continue
				}
				if err != nil {
					return // killed
				}
				held = tree.Size()
				acked = held
			}
		}()
		time.Sleep(killAt)
		w.kill() // SIGKILL
		<-done
		// Restarted, it holds at least what it acknowledged: a request from 0 is told so.
		url, w = startWitness(t, key, state, logKey)
		_, err := witness.Submit(context.Background(), hc, url, wv, 0, nil, add(1))
		w.kill()
		ce, ok := err.(*witness.ConflictError)
		if acked == 0 && err == nil {
			held = tree.Size()
			acked = held
			continue
		}
		if !ok || ce.Size < acked {
			t.Fatalf("round %d: acknowledged size %d, after kill -9 the witness answers %v", round, acked, err)
		}
		held = ce.Size
	}
	if acked == 0 {
		t.Fatal("no head was ever cosigned")
	}
	t.Logf("8 kill -9 rounds: the witness holds %d (acknowledged %d) of %d entries", held, acked, tree.Size())
}

// hostLedger is a host's ledger in its own state directory, signed with the test key, with a
// follower sending its heads to the witnesses at urls.
type hostLedger struct {
	state string
	log   *ledger.Log
	n     int
}

func newHostLedger(t *testing.T, origin string) *hostLedger {
	t.Helper()
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), origin, signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &hostLedger{state: state, log: l}
}

func (h *hostLedger) add(t *testing.T, n int) {
	t.Helper()
	for range n {
		if _, err := h.log.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", h.n), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: int64(h.n)}); err != nil {
			t.Fatal(err)
		}
		h.n++
	}
}

// follow runs a follower of the host's ledger to the targets until the test ends, and returns
// it.
func (h *hostLedger) follow(t *testing.T, targets ...witness.Target) *witness.Follower {
	t.Helper()
	return h.followVia(t, nil, targets...)
}

// followVia is follow with the HTTP client hc (nil: the follower's own).
func (h *hostLedger) followVia(t *testing.T, hc *http.Client, targets ...witness.Target) *witness.Follower {
	t.Helper()
	cs, err := witness.OpenCosignatures(filepath.Join(h.state, witness.CosignaturesFile))
	if err != nil {
		t.Fatal(err)
	}
	f := witness.NewFollower(h.log, targets, cs, nil)
	if hc != nil {
		f.HTTP = hc
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; cs.Close() })
	return f
}

// inProcessWitness serves sealrun's witness for origin's ledger (the test key) on loopback.
func inProcessWitness(t *testing.T, name, origin string) (witness.Target, string) {
	t.Helper()
	_, pk, err := attest.LoadVerifier("../../attest/testdata/ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	w := witnesstest.Serve(t, name, origin, pk)
	return w.Target, w.Key
}

func waitCosigned(t *testing.T, f *witness.Follower, name string, size uint64) {
	t.Helper()
	for i := 0; i < 500; i++ {
		for _, s := range f.Status() {
			if s.Name == name && s.Held >= size {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never cosigned size %d: %+v", name, size, f.Status())
}

// The reader's side of witnessing: a host's ledger exported with its witnessed head verifies
// with the witness's key; asking for a witness that did not cosign fails naming it; and the
// split view VERIFY.md names — one key, two ledgers under one origin (a second machine), the
// hidden one shown to the witness first — leaves the published ledger without a cosignature of
// that witness: the reader's check with it fails.
func TestWitnessedLedger(t *testing.T) {
	pub := "../../attest/testdata/ed25519.pub"
	origin := "sealrun.ledger/witnessed-host"
	w1, vkey1 := inProcessWitness(t, "witness.test/w1", origin)
	_, vkey2 := inProcessWitness(t, "witness.test/w2", origin)
	host := newHostLedger(t, origin)
	f := host.follow(t, w1)
	host.add(t, 5)
	waitCosigned(t, f, w1.Name, 5)
	out := filepath.Join(t.TempDir(), "ledger.jsonl")
	r := sealrun(t, "--state-dir", host.state, "ledger", "export", "--out", out, "--witnessed", "1", "--wait", "5s")
	if r.code != 0 || !strings.Contains(r.stderr, "witnessed head: 5 of 5 entries, cosigned by witness.test/w1") {
		t.Fatalf("export --witnessed: %+v", r)
	}
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"one witness", []string{"ledger", "verify", out, "--key", pub, "--witness", vkey1}, 0, "witnessed  head of 5 entries cosigned by witness.test/w1; 0 entries after it", ""},
		{"two, one never shown", []string{"ledger", "verify", out, "--key", pub, "--witness", vkey1, "--witness", vkey2}, 1, "witness.test/w2 cosigned nothing here", ""},
		{"one of two", []string{"ledger", "verify", out, "--key", pub, "--witness", vkey1, "--witness", vkey2, "--witnesses", "1"}, 0, "cosigned by witness.test/w1; not by witness.test/w2", ""},
		{"more than given", []string{"ledger", "verify", out, "--key", pub, "--witness", vkey1, "--witnesses", "2"}, 2, "", "--witnesses 2 with 1 --witness keys: give 1 to 1"},
		{"quorum without keys", []string{"ledger", "verify", out, "--key", pub, "--witnesses", "1"}, 2, "", "give each with --witness"},
		{"a log key as a witness", []string{"ledger", "verify", out, "--key", pub, "--witness", "sealrun.ledger/x+01234567+AQ=="}, 2, "", "--witness: witness key"},
		{"export needing two", []string{"--state-dir", host.state, "ledger", "export", "--out", out + ".2", "--witnessed", "2"}, 1, "", "no head of 5 entries or fewer has 2 cosignatures: witness.test/w1 at 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stdout, c.stdout) || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
	// The witnessed head timestamped by sigstore's timestamp-authority, beside the export; a
	// reader checks it with the authority's chain. Another authority's chain, or the timestamp
	// beside a ledger it is not of, fails.
	tsaURL, tsaChain := testenv.TimestampAuthority(t)
	tsOut := filepath.Join(t.TempDir(), "ledger.jsonl")
	if r := sealrun(t, "--state-dir", host.state, "ledger", "export", "--out", tsOut, "--witnessed", "1", "--wait", "5s", "--tsa", tsaURL, "--tsa-chain", tsaChain); r.code != 0 || !strings.Contains(r.stdout, "the witnessed head existed before ") {
		t.Fatalf("export --tsa: %+v", r)
	}
	if r := sealrun(t, "ledger", "verify", tsOut, "--key", pub, "--witness", vkey1, "--tsa-chain", tsaChain); r.code != 0 || !strings.Contains(r.stdout, "timestamp  the head of 5 entries existed before "+time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("verify --tsa-chain: %+v", r)
	}
	if r := sealrun(t, "ledger", "verify", tsOut, "--key", pub, "--tsa-chain", "../../attest/testdata/ed25519.pub"); r.code != 2 || !strings.Contains(r.stderr, "--tsa-chain") {
		t.Errorf("verify with a chain file that is none: %+v", r)
	}
	if r := sealrun(t, "ledger", "verify", out, "--key", pub, "--timestamp", tsOut+".tsr", "--tsa-chain", tsaChain); r.code != 0 {
		t.Errorf("the timestamp of the same head, checked beside another export of it: %+v", r)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"--tsa without --witnessed", []string{"--state-dir", host.state, "ledger", "export", "--out", tsOut + ".x", "--tsa", tsaURL, "--tsa-chain", tsaChain}, 2, "--tsa and --tsa-chain go together, with --witnessed"},
		{"--timestamp without --tsa-chain", []string{"ledger", "verify", tsOut, "--key", pub, "--timestamp", tsOut + ".tsr"}, 2, "--timestamp: is checked with the authority's chain (PEM); give --tsa-chain"},
		{"no timestamp beside it", []string{"ledger", "verify", out, "--key", pub, "--tsa-chain", tsaChain}, 1, "no timestamp at " + out + ".tsr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code == 0 || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Errorf("exit %d %q %q; want failure with %q", r.code, r.stdout, r.stderr, c.want)
			}
		})
	}

	// The split view. A second machine with the same key and origin shows its ledger to a third
	// witness first; the published host's heads are then refused by it.
	w3, vkey3 := inProcessWitness(t, "witness.test/w3", origin)
	hidden := newHostLedger(t, origin)
	hf := hidden.follow(t, w3)
	hidden.add(t, 3)
	waitCosigned(t, hf, w3.Name, 3)
	pf := host.follow(t, w3)
	host.add(t, 2)
	// Until the follower has shown the witness the published heads: refused (an error), or
	// cosigned (what must not be).
	var st witness.TargetStatus
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, s := range pf.Status() {
			st = s
		}
		if st.LastError != "" || st.Held >= 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never showed the witness that saw the hidden ledger its heads: %+v", st)
		}
	}
	if st.Held >= 7 && st.LastError == "" {
		t.Fatalf("the witness that saw the hidden ledger cosigned the published one: %+v", st)
	}
	t.Logf("the published host's follower says of %s: %s", st.Name, st.LastError)
	out2 := filepath.Join(t.TempDir(), "ledger.jsonl")
	if r := sealrun(t, "--state-dir", host.state, "ledger", "export", "--out", out2); r.code != 0 {
		t.Fatal(r)
	}
	r = sealrun(t, "ledger", "verify", out2, "--key", pub, "--witness", vkey3)
	if r.code != 1 || !strings.Contains(r.stdout, "witness.test/w3 cosigned nothing here") {
		t.Fatalf("a reader checking the published ledger with the witness that saw the hidden one: %+v", r)
	}
	// The first export's timestamp, beside the ledger that grew since: over a head it still holds.
	// Beside the hidden machine's ledger, which holds none of those heads: refused.
	hiddenOut := filepath.Join(t.TempDir(), "hidden.jsonl")
	if r := sealrun(t, "--state-dir", hidden.state, "ledger", "export", "--out", hiddenOut); r.code != 0 {
		t.Fatal(r)
	}
	if r := sealrun(t, "ledger", "verify", hiddenOut, "--key", pub, "--timestamp", tsOut+".tsr", "--tsa-chain", tsaChain); r.code != 1 || !strings.Contains(r.stdout, "the timestamp is of no head of this ledger") {
		t.Errorf("a timestamp beside a ledger it is not of: %+v", r)
	}
}

// sealrun verify --witness without a proof, with a broken one, or --witnessed without keys:
// not valid or a usage error, naming the file or the flag (the demo's e2e test checks a real
// publication's proofs, and another run's proof refused).
func TestVerifyWitnessedRefuses(t *testing.T) {
	dir := t.TempDir()
	_, att := signedGolden(t, dir)
	pub := "../../attest/testdata/ed25519.pub"
	_, vkey, _ := witness.GenerateKey("witness.test/v")
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte(`{"format":"sealrun-witnessed-run/v1","checkpoint":"x"`), 0o644)
	huge := filepath.Join(dir, "huge.json")
	os.WriteFile(huge, make([]byte, witness.MaxRunProofBytes+1), 0o644)
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no proof beside it", []string{"--witness", vkey}, 1, "NOT VALID (witnessed)\n  no witnessed proof at " + filepath.Join(dir, "witnessed.json")},
		{"a broken proof", []string{"--witness", vkey, "--witnessed", broken}, 1, "broken.json: not a witnessed proof"},
		{"an oversized proof", []string{"--witness", vkey, "--witnessed", huge}, 1, "a witnessed proof is at most 262144"},
		{"a proof without keys", []string{"--witnessed", broken}, 2, "--witnessed: is checked against witnesses: their keys; give --witness"},
		{"a host key as a witness key", []string{"--witness", "sealrun.ledger/x+01234567+AQ=="}, 2, "--witness: witness key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, append([]string{"verify", att, "--key", pub}, c.args...)...)
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Errorf("%+v; want exit %d and %q", r, c.code, c.want)
			}
		})
	}
}
