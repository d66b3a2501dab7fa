package leaderboard

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"
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
