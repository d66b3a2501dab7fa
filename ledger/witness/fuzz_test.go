package witness

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Whatever the body, the witness answers a protocol status and cosigns only a checkpoint the
// log signed that extends what it holds: its held size never goes back.
func FuzzAddCheckpoint(f *testing.F) {
	lg := newTestLog(f, "sealrun.ledger/fuzz", false)
	lg.grow(5)
	head5 := lg.head(f)
	lg.grow(3)
	head8, proof := lg.head(f), lg.proof(f, 5)
	f.Add(RequestBody(0, nil, head5))
	f.Add(RequestBody(5, proof, head8))
	f.Add(RequestBody(5, append(proof, proof...), head8))
	f.Add([]byte("old 18446744073709551615\n\n" + head8))
	f.Add([]byte("old 5\n" + strings.Repeat("AAAA\n", 64) + "\n" + head8))
	f.Add([]byte(strings.Replace(head8, "\n8\n", "\n8\nextra\n", 1)))
	f.Add([]byte("old 0\n\n" + strings.Replace(head5, "sealrun.ledger/fuzz", "sealrun.ledger/other", 1)))
	w := newTestWitness(f, f.TempDir(), lg)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := w.store.Head(lg.origin)
		line, err := w.srv.AddCheckpoint(body)
		after := w.store.Head(lg.origin)
		if after.Size < before.Size {
			t.Fatalf("the held size went back from %d to %d", before.Size, after.Size)
		}
		if err == nil {
			if !strings.HasPrefix(line, "— witness.test/w1 ") {
				t.Fatalf("cosignature line %q", line)
			}
			// What it cosigned is a head of the log: the body ends with one the log signed.
			if !bytes.HasSuffix(body, []byte(head5)) && !bytes.HasSuffix(body, []byte(head8)) {
				t.Logf("cosigned a head the test did not sign by hand (the log's key signed it): %q", body)
			}
			return
		}
		switch s := status(err); s {
		case 400, 403, 404, 409, 422:
		default:
			t.Fatalf("status %d: %v", s, err)
		}
	})
}

// FuzzRunProof: a run's witnessed.json as anyone may write it: never a panic, and a proof that
// checks proves the run it was made for, under the cosigned head.
func FuzzRunProof(f *testing.F) {
	pl := newProvedLedger(f, 4, 2, "witness.test/a", "witness.test/b", "witness.test/c")
	hosts := []signature.Verifier{pl.host}
	p, err := Prove(pl.read, pl.signed, "r-2")
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(p)
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"r-2"`), []byte(`"r-1"`), -1))
	f.Add([]byte(`{"queued":null,"ended":{}}`))
	f.Add([]byte(`[]`))
	stmt := []byte("statement-2")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseRunProof(b)
		if err != nil {
			return
		}
		for _, run := range []string{"r-1", "r-2"} {
			got, err := p.Check(run, stmt, pl.refs[run], hosts, pl.ws, 3)
			if err == nil && (run != "r-2" || got.Head.Size != 8) {
				t.Fatalf("a proof checked for run %s under a head of %d entries: %s", run, got.Head.Size, b)
			}
		}
	})
}
