package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
)

// provedLedger is a host's ledger of runs r-0..r-(n-1), each queued then ended with the
// statement "statement-i", its latest head cosigned by the witnesses, and then m more runs
// queued after that head; read back as a reader reads the export.
type provedLedger struct {
	read   *ledger.Ledger
	signed string // the cosigned head
	host   signature.Verifier
	ws     []*Verifier
	refs   map[string]*ledger.Ref // the queued entry each run's attestation carries
}

func newProvedLedger(t testing.TB, n, m int, witnesses ...string) *provedLedger {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, _ := signature.LoadED25519Signer(priv)
	hv, _ := signature.LoadED25519Verifier(pub)
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	origin := "sealrun.ledger/proved"
	lg, err := ledger.Open(path, origin, s)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	refs := map[string]*ledger.Ref{}
	queue := func(i int) {
		run := fmt.Sprintf("r-%d", i)
		if _, err := lg.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: run, Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if refs[run], err = lg.Ref(run); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		queue(i)
	}
	for i := range n {
		sum := sha256.Sum256([]byte(fmt.Sprint("statement-", i)))
		if _, err := lg.Append(&ledger.Entry{Kind: ledger.KindEnded, Run: fmt.Sprintf("r-%d", i), Time: time.Now(), State: "graded", Attestation: digest.HexOf(sum[:])}); err != nil {
			t.Fatal(err)
		}
	}
	signed, _ := lg.Head()
	body, _, _ := strings.Cut(signed, "\n\n")
	p := &provedLedger{host: hv, refs: refs}
	cosigned := signed
	for _, name := range witnesses {
		skey, vkey, err := GenerateKey(name)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := NewCosigner(skey)
		v, _ := NewVerifier(vkey)
		cosigned += c.Cosign([]byte(body+"\n"), time.Now())
		p.ws = append(p.ws, v)
	}
	for i := range m {
		queue(n + i)
	}
	f, _ := os.Open(path)
	defer f.Close()
	var exp bytes.Buffer
	if _, err := ledger.ExportWitnessed(f, &exp, cosigned); err != nil {
		t.Fatal(err)
	}
	if p.read, err = ledger.Read(&exp, "ledger.jsonl", []signature.Verifier{hv}); err != nil {
		t.Fatal(err)
	}
	p.signed = cosigned
	return p
}

func TestRunProof(t *testing.T) {
	pl := newProvedLedger(t, 4, 2, "witness.test/a", "witness.test/b", "witness.test/c")
	hosts := []signature.Verifier{pl.host}
	p, err := Prove(pl.read, pl.signed, "r-2")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	if p, err = ParseRunProof(b); err != nil {
		t.Fatal(err)
	}
	stmt := []byte("statement-2")
	got, err := p.Check("r-2", stmt, pl.refs["r-2"], hosts, pl.ws, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Head.Size != 8 || len(got.By) != 3 || p.Queued.Index != 2 || p.Ended.Index != 6 {
		t.Fatalf("proved %+v under %+v", p, got)
	}
	// A run queued after the cosigned head, and one not in the ledger, have no proof.
	if _, err := Prove(pl.read, pl.signed, "r-4"); err == nil || !strings.Contains(err.Error(), "ends after the witnessed head of size 8") {
		t.Errorf("a run after the head: %v", err)
	}
	if _, err := Prove(pl.read, pl.signed, "r-9"); err == nil || !strings.Contains(err.Error(), "not in it") {
		t.Errorf("a run not in the ledger: %v", err)
	}
	// A head of another tree is not this ledger's.
	other := newProvedLedger(t, 4, 0, "witness.test/a")
	if _, err := Prove(pl.read, other.signed, "r-2"); err == nil || !strings.Contains(err.Error(), "not a head of this ledger") {
		t.Errorf("another ledger's head: %v", err)
	}

	edit := func(f func(p *RunProof)) *RunProof {
		q := *p
		q.Queued.Inclusion = append([]string(nil), p.Queued.Inclusion...)
		q.Ended.Inclusion = append([]string(nil), p.Ended.Inclusion...)
		f(&q)
		return &q
	}
	r1, _ := Prove(pl.read, pl.signed, "r-1")
	for _, c := range []struct {
		name  string
		p     *RunProof
		run   string
		stmt  []byte
		ref   *ledger.Ref
		ws    []*Verifier
		quota int
		want  string
	}{
		{"another result", p, "r-2", []byte("statement-3"), pl.refs["r-2"], pl.ws, 3, "names another attestation"},
		{"another run's proof", r1, "r-2", stmt, pl.refs["r-2"], pl.ws, 3, "not the queued entry of r-2"},
		{"ended swapped for queued", edit(func(q *RunProof) { q.Ended = q.Queued }), "r-2", stmt, pl.refs["r-2"], pl.ws, 3, "not the ended entry of r-2"},
		{"the attestation's own entry differs", p, "r-2", stmt, pl.refs["r-1"], pl.ws, 3, "not the ledger entry the attestation carries"},
		{"an inclusion hash flipped", edit(func(q *RunProof) { q.Ended.Inclusion[0] = strings.Repeat("0", 64) }), "r-2", stmt, nil, pl.ws, 3, "ended: ledger.inclusion: the entry is not at index 6"},
		{"index moved", edit(func(q *RunProof) { q.Queued.Index = 3 }), "r-2", stmt, nil, pl.ws, 3, "queued: ledger.inclusion"},
		{"index past the head", edit(func(q *RunProof) { q.Ended.Index = 1 << 62 }), "r-2", stmt, nil, pl.ws, 3, "not below the head's size 8"},
		{"65 hashes", edit(func(q *RunProof) { q.Queued.Inclusion = make([]string, 65) }), "r-2", stmt, nil, pl.ws, 3, "65 hashes; at most 64"},
		{"not hex", edit(func(q *RunProof) { q.Queued.Inclusion[0] = "zz" }), "r-2", stmt, nil, pl.ws, 3, "not a hex SHA-256 hash"},
		{"head not the host's", edit(func(q *RunProof) { q.Checkpoint = other.signed }), "r-2", stmt, nil, pl.ws, 1, "not signed by any of the host keys given"},
		{"cosignatures stripped", edit(func(q *RunProof) { q.Checkpoint, _, _ = strings.Cut(q.Checkpoint, "— witness.test/") }), "r-2", stmt, nil, pl.ws, 1, "0 valid cosignature(s)"},
		{"witnesses it does not carry", p, "r-2", stmt, nil, append(pl.ws[:1:1], other.ws...), 2, "1 valid cosignature(s) of the given witnesses ([witness.test/a]), 2 needed; not by [witness.test/a]"},
		{"a quorum above the keys", p, "r-2", stmt, nil, pl.ws, 4, "witness.Quorum: a quorum of 4 with 3 witness keys given: give 1 to 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.p.Check(c.run, c.stmt, c.ref, hosts, c.ws, c.quota)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
	// One of three is enough when one is asked for.
	if _, err := p.Check("r-2", stmt, nil, hosts, pl.ws[2:], 1); err != nil {
		t.Error(err)
	}
}

func TestParseRunProofRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, "not a witnessed proof"},
		{`{"format":"sealrun-witnessed-run/v1","extra":1}`, `unknown field "extra"`},
		{`{"format":"sealrun-witnessed-run/v2"}`, `format "sealrun-witnessed-run/v2"`},
		{`[]`, "not a witnessed proof"},
		{strings.Repeat(" ", MaxRunProofBytes+1), "a witnessed proof is at most"},
	} {
		if _, err := ParseRunProof([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: %v, want %q", c.in, err, c.want)
		}
	}
}
