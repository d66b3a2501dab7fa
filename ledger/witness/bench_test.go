package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/ledger"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

// benchHost is a host's ledger with a follower to n witnesses (sealrun's, on loopback), all
// answering or all down.
func benchHost(b *testing.B, n int, down bool) (*ledger.Log, *Cosignatures, []*Verifier) {
	b.Helper()
	dir := b.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := signature.LoadED25519Signer(priv)
	origin := "sealrun.ledger/bench"
	lg, err := ledger.Open(filepath.Join(dir, "ledger.jsonl"), origin, signer)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lg.Close() })
	vkey, _ := ledger.VerifierKey(origin, priv.Public())
	lv, _ := LogVerifier(vkey)
	cs, err := OpenCosignatures(filepath.Join(dir, CosignaturesFile))
	if err != nil {
		b.Fatal(err)
	}
	var targets []Target
	var vs []*Verifier
	for i := range n {
		w := newTestWitness(b, b.TempDir())
		w.srv.logs[origin] = note.VerifierList(lv)
		ts := httptest.NewServer(w.srv)
		url := ts.URL
		if down {
			ts.Close()
		} else {
			b.Cleanup(ts.Close)
		}
		targets = append(targets, Target{Name: fmt.Sprint("w", i), URL: url, Verifier: w.v})
		vs = append(vs, w.v)
	}
	if n > 0 {
		f := NewFollower(lg, targets, cs, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.Run(ctx); close(done) }()
		b.Cleanup(func() { cancel(); <-done; cs.Close() })
	}
	return lg, cs, vs
}

func appendOne(b *testing.B, lg *ledger.Log, i int) {
	if _, err := lg.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", i), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: int64(i)}); err != nil {
		b.Fatal(err)
	}
}

// From a new head (a run's ledger entry) to three witnesses' cosignatures of it, kept: the
// latency a publication waits for, p50 and p99.
func BenchmarkHeadToCosignature(b *testing.B) {
	lg, cs, vs := benchHost(b, 3, false)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		appendOne(b, lg, i)
		size := uint64(i + 1)
		for {
			all := true
			for _, v := range vs {
				all = all && cs.Latest(v.Name()) >= size
			}
			if all {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// What a run pays for witnesses: its ledger append (entry, head, fsync) with a follower to three
// witnesses answering, to three that are down, and with none.
func BenchmarkAppendWitnesses(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		down bool
	}{{"none", 0, false}, {"up", 3, false}, {"down", 3, true}} {
		b.Run(c.name, func(b *testing.B) {
			lg, _, _ := benchHost(b, c.n, c.down)
			for i := 0; b.Loop(); i++ {
				appendOne(b, lg, i)
			}
		})
	}
}
