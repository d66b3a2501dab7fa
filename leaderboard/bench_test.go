package leaderboard

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/ledger"
)

// BenchmarkLeaderboard10k: 10,000 attestations (100 agents × 100 seeds) verified, aggregated and
// rendered as text (target <= 5 s), and the share of the time spent verifying signatures and
// predicates.
func BenchmarkLeaderboard10k(b *testing.B) {
	f := &fixture{t: b, dir: b.TempDir(), base: basePredicate(b), key: "../attest/testdata/ed25519.key"}
	ari := loadTrack(b, "../tracks/ari-v1.toml", nil)
	for a := range 100 {
		for s := range 100 {
			id := fmt.Sprintf("r-%d-%d", a, s)
			f.write(filepath.Join("r", id+".att.json"), f.attestation(runSpec{ari, fmt.Sprintf("model-%d", a), "high", int64(s), id, "", "graded", (a*7 + s*3) % 101, 50, nil, ""}))
		}
	}
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		b.Fatal(err)
	}
	var verify, rest time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		in, err := Load([]string{filepath.Join(f.dir, "r")}, keys, nil)
		if err != nil || len(in.Entries) != 10000 || len(in.Rejected) > 0 {
			b.Fatalf("%v: %d entries, %d rejected", err, len(in.Entries), len(in.Rejected))
		}
		t1 := time.Now()
		var out bytes.Buffer
		if err := Build(in, keys).Render(&out, "text"); err != nil {
			b.Fatal(err)
		}
		verify += t1.Sub(t0)
		rest += time.Since(t1)
	}
	b.ReportMetric((verify+rest).Seconds()/float64(b.N), "total-s")
	b.ReportMetric(verify.Seconds()/float64(b.N), "verify-s")
	b.ReportMetric(100*float64(verify)/float64(verify+rest), "verify-%")
}

// BenchmarkLeaderboardLedger: runs attestations (agents × 100 seeds), each run in the host's run
// ledger (2 entries a run), the board built with --ledger, at 1,000 and 10,000 runs (target:
// 10,000 in <= 1 s, and 10× the runs in <= 11× the time): the whole (total-s), the ledger's
// share after loading (checking every attestation's head, accounting: ledger-s; reading and
// verifying it overlaps the attestations' verification, as in sealrun leaderboard, and shows
// in the whole only),
// and the floor no verifier goes under, the two ed25519 checks of each run (its envelope's
// and its ledger head's) alone on every CPU (sig-floor-s). Every row must be accounted for.
func BenchmarkLeaderboardLedger(b *testing.B) {
	for _, agents := range []int{10, 100} {
		b.Run(fmt.Sprintf("runs=%d", agents*100), func(b *testing.B) { benchLedgerBoard(b, agents) })
	}
}

func benchLedgerBoard(b *testing.B, agents int) {
	f := &fixture{t: b, dir: b.TempDir(), base: basePredicate(b), key: "../attest/testdata/ed25519.key"}
	signer, err := attest.LoadSigner(context.Background(), f.key, nil)
	if err != nil {
		b.Fatal(err)
	}
	if f.led, err = ledger.Open(filepath.Join(f.dir, "host.jsonl"), "sealrun.ledger/bench", signer); err != nil {
		b.Fatal(err)
	}
	defer f.led.Close()
	ari := loadTrack(b, "../tracks/ari-v1.toml", nil)
	for a := range agents {
		for s := range 100 {
			id := fmt.Sprintf("r-%d-%d", a, s)
			f.write(filepath.Join("r", id+".att.json"), f.attestation(runSpec{ari, fmt.Sprintf("model-%d", a), "high", int64(s), id, "", "graded", (a*7 + s*3) % 101, 50, nil, ""}))
		}
	}
	var pub bytes.Buffer
	f.led.Export(&pub)
	lpath := f.write("ledger.jsonl", pub.Bytes())
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		b.Fatal(err)
	}
	runs := agents * 100
	floor := sigFloor(b, signer, 2*runs)
	var total, led time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		in, lerr, err := LoadWithLedgers([]string{filepath.Join(f.dir, "r")}, keys, nil, []string{lpath}, LoadOptions{}) // as sealrun leaderboard reads them
		if err != nil || lerr != nil || len(in.Entries) != runs || len(in.Rejected) > 0 || len(in.Ledgers) != 1 {
			b.Fatalf("%v, ledger %v: %d entries, %d rejected", err, lerr, len(in.Entries), len(in.Rejected))
		}
		t1 := time.Now()
		board := Build(in, keys)
		t2 := time.Now()
		for _, t := range board.Tables {
			for _, r := range t.Rows {
				if r.Ledger == nil || !r.Ledger.Accounted {
					b.Fatalf("row %s not accounted: %+v", r.Agent.Name(), r.Ledger)
				}
			}
		}
		noLedger := in
		noLedger.Ledgers = nil
		t3 := time.Now()
		Build(noLedger, keys)
		build := time.Since(t3)
		var out bytes.Buffer
		board.Render(&out, "text")
		total += time.Since(t0) - build
		led += t2.Sub(t1) - build
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "total-s")
	b.ReportMetric(led.Seconds()/float64(b.N), "ledger-s")
	b.ReportMetric(floor.Seconds(), "sig-floor-s")
}

// sigFloor times n ed25519 checks of 5 KB messages (an attestation's size) spread over every
// CPU, as Load spreads its files.
func sigFloor(b *testing.B, signer signature.Signer, n int) time.Duration {
	pub, err := signer.PublicKey()
	if err != nil {
		b.Fatal(err)
	}
	msg := bytes.Repeat([]byte("x"), 5000)
	sig, err := signer.SignMessage(bytes.NewReader(msg))
	if err != nil {
		b.Fatal(err)
	}
	k := pub.(ed25519.PublicKey)
	t0 := time.Now()
	var wg sync.WaitGroup
	cpus := runtime.NumCPU()
	for w := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += cpus {
				if !ed25519.Verify(k, msg, sig) {
					b.Error("the floor's signature does not verify")
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(t0)
}
