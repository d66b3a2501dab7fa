package leaderboard

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

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

// BenchmarkLeaderboardLedger10k: the same 10,000 runs, each in the host's run ledger (20,000
// entries), the board built with --ledger: the whole (target: the ledger adds <= 1 s) and the
// ledger's share (reading and verifying it, checking every attestation's head, accounting).
func BenchmarkLeaderboardLedger10k(b *testing.B) {
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
	for a := range 100 {
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
	var total, led time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		in, err := Load([]string{filepath.Join(f.dir, "r")}, keys, nil)
		if err != nil || len(in.Entries) != 10000 {
			b.Fatalf("%v: %d entries", err, len(in.Entries))
		}
		t1 := time.Now()
		if in.Ledgers, err = LoadLedgers([]string{lpath}, keys); err != nil {
			b.Fatal(err)
		}
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
}
