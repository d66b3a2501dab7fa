package ledger

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkAppend: one entry and its signed head, written and fsynced (target <= 1 ms).
func BenchmarkAppend(b *testing.B) {
	s, _ := testKey(b)
	l, err := Open(filepath.Join(b.TempDir(), "ledger.jsonl"), "sealrun.ledger/bench", s)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(queued(fmt.Sprintf("r-%d", i), int64(i), "")); err != nil {
			b.Fatal(err)
		}
	}
}

var million *Tree

func millionTree() *Tree {
	if million == nil {
		million = NewTree()
		for i := range 1_000_000 {
			million.Append(LeafHash(fmt.Appendf(nil, "entry %d", i)))
		}
	}
	return million
}

// BenchmarkProofs: inclusion and consistency proofs in a ledger of 1,000,000 entries, made and
// verified (target <= 10 ms each).
func BenchmarkProofs(b *testing.B) {
	t := millionTree()
	const size = 1_000_000
	root, _ := t.Root(size)
	b.Run("inclusion-make", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := t.InclusionProof(uint64(i*7919)%size, size); err != nil {
				b.Fatal(err)
			}
		}
	})
	p, _ := t.InclusionProof(123_457, size)
	leaf := t.Leaf(123_457)
	b.Run("inclusion-verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := VerifyInclusion(123_457, size, leaf, p, root); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("consistency-make", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := t.ConsistencyProof(uint64(1+i*7919)%size+1, size); err != nil {
				b.Fatal(err)
			}
		}
	})
	r1, _ := t.Root(654_321)
	cp, _ := t.ConsistencyProof(654_321, size)
	b.Run("consistency-verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := VerifyConsistency(654_321, size, cp, r1, root); err != nil {
				b.Fatal(err)
			}
		}
	})
}
