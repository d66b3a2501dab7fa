package leaderboard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/ledger"
)

// ledgerScenario: five runs of ari-v1 on one host (alpha 1 2, gamma 1, gamma 3 invalid and its
// rerun), each in the host's ledger and published.
func ledgerScenario(t *testing.T, origin string) (*fixture, []runSpec, string) {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	signer, err := attest.LoadSigner(context.Background(), f.key, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "host-ledger.jsonl")
	if f.led, err = ledger.Open(path, origin, signer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.led.Close() })
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	runs := []runSpec{
		{ari, "alpha", "high", 1, "a-1", "", "graded", 40, 55, nil, ""},
		{ari, "alpha", "high", 2, "a-2", "", "graded", 50, 65, nil, ""},
		{ari, "gamma", "", 1, "c-1", "", "graded", 10, 20, nil, ""},
		{ari, "gamma", "", 3, "c-3", "", "invalid", 0, 0, nil, ""},
		{ari, "gamma", "", 3, "c-3r", "c-3", "graded", 14, 30, nil, ""},
	}
	for _, r := range runs {
		f.write(filepath.Join("results", r.id, "result.att.json"), f.attestation(r))
	}
	return f, runs, filepath.Join(f.dir, "results")
}

func exportLedger(t *testing.T, l *ledger.Log, path string) string {
	t.Helper()
	var b bytes.Buffer
	if err := l.Export(&b); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b.Bytes(), 0o644)
	return path
}

func boardWith(t *testing.T, results string, ledgers ...string) (*Board, error) {
	t.Helper()
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := Load([]string{results}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Ledgers, err = LoadLedgers(ledgers, keys); err != nil {
		return nil, err
	}
	return Build(in, keys), nil
}

func rowLedger(t *testing.T, b *Board, model string) *RowLedger {
	t.Helper()
	for _, tb := range b.Tables {
		for _, r := range tb.Rows {
			if r.Agent.Model == model {
				if r.Ledger == nil {
					t.Fatalf("row %s has no ledger accounting", model)
				}
				return r.Ledger
			}
		}
	}
	t.Fatalf("no row %s", model)
	return nil
}

// Every cheat an operator could try on a published board, each caught by the ledger.
func TestLedgerAccounting(t *testing.T) {
	f, runs, results := ledgerScenario(t, "sealrun.ledger/node-a")
	pub := exportLedger(t, f.led, filepath.Join(f.dir, "ledger.jsonl"))
	orig := map[string][]byte{}
	for _, r := range runs {
		orig[r.id] = mustReadFile(t, filepath.Join(results, r.id, "result.att.json"))
	}
	restore := func(ids ...string) {
		for _, id := range ids {
			f.write(filepath.Join("results", id, "result.att.json"), orig[id])
		}
	}

	// Everything published: every row accounted for, the rerun named.
	b, err := boardWith(t, results, pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Rejected) != 0 {
		t.Fatalf("rejected: %v", b.Rejected)
	}
	for _, m := range []string{"alpha", "gamma"} {
		if rl := rowLedger(t, b, m); !rl.Accounted {
			t.Errorf("%s: %s", m, rl.Text())
		}
	}
	if rl := rowLedger(t, b, "gamma"); rl.Runs != 3 || len(rl.Reruns) != 1 || rl.Reruns[0] != "c-3 → c-3r" || !strings.Contains(rl.Text(), "rerun: c-3 → c-3r") {
		t.Errorf("gamma: %+v", rl)
	}
	var text bytes.Buffer
	b.Render(&text, "text")
	if !strings.Contains(text.String(), "every run accounted for (2 in sealrun.ledger/node-a)") || !strings.Contains(text.String(), "Run ledger: sealrun.ledger/node-a") {
		t.Errorf("text board:\n%s", text.String())
	}

	// A run's files deleted (its attestation withheld): the row names it.
	os.RemoveAll(filepath.Join(results, "a-2"))
	b, _ = boardWith(t, results, pub)
	if rl := rowLedger(t, b, "alpha"); rl.Accounted || len(rl.Missing) != 1 || !strings.Contains(rl.Missing[0], "a-2 (seed 2, graded") {
		t.Errorf("withheld a-2: %+v", rl)
	}
	// The invalid run withheld, only its rerun published: named too.
	os.RemoveAll(filepath.Join(results, "c-3"))
	b, _ = boardWith(t, results, pub)
	if rl := rowLedger(t, b, "gamma"); rl.Accounted || len(rl.Missing) != 1 || !strings.Contains(rl.Missing[0], "c-3 (seed 3, invalid") {
		t.Errorf("withheld c-3: %+v", rl)
	}
	// Every run of an agent withheld: no row, but the board names its runs.
	os.RemoveAll(filepath.Join(results, "a-1"))
	os.RemoveAll(filepath.Join(results, "a-2"))
	b, _ = boardWith(t, results, pub)
	if len(b.Unpublished) != 2 || !strings.Contains(b.Unpublished[0], "a-1 (") || !strings.Contains(b.Unpublished[0], "alpha@high, seed 1, graded on sealrun.ledger/node-a") {
		t.Errorf("a withheld agent: %v", b.Unpublished)
	}
	restore("a-1", "a-2", "c-3")
	if b, _ = boardWith(t, results, pub); !rowLedger(t, b, "alpha").Accounted || !rowLedger(t, b, "gamma").Accounted || len(b.Unpublished) != 0 {
		t.Errorf("restored: %+v %+v %v", rowLedger(t, b, "alpha"), rowLedger(t, b, "gamma"), b.Unpublished)
	}
	// Re-signed: the same run, another statement than the one the ledger names.
	f.write(filepath.Join("results", "a-1", "result.att.json"), f.attestation(runs[0]))
	if b, _ = boardWith(t, results, pub); !strings.Contains(rowLedger(t, b, "alpha").Text(), "a-1 (seed 1): the published attestation is not the one the ledger names") {
		t.Errorf("re-signed a-1: %s", rowLedger(t, b, "alpha").Text())
	}
	restore("a-1")

	// A run not in any given ledger: a run made on a host whose ledger is not published.
	other := &fixture{t: t, dir: f.dir, base: f.base, key: f.key}
	other.write(filepath.Join("results", "a-9", "result.att.json"), other.attestation(runSpec{runs[0].track, "alpha", "high", 9, "a-9", "", "graded", 70, 70, nil, ""}))
	b, _ = boardWith(t, results, pub)
	if rl := rowLedger(t, b, "alpha"); rl.Accounted || len(rl.NotInLedger) != 1 || rl.NotInLedger[0] != "a-9" {
		t.Errorf("a run outside the ledger: %+v", rl)
	}
	os.RemoveAll(filepath.Join(results, "a-9"))

	// A rerun presented as a first run: re-signed without rerun_of, the entry it carries says
	// otherwise.
	p := f.base
	env, _ := os.ReadFile(filepath.Join(results, "c-3r", "result.att.json"))
	keys, _ := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	v, err := attest.Verify(env, keys[0].Verifier)
	if err != nil {
		t.Fatal(err)
	}
	p = *v.Statement.Predicate
	p.Run.RerunOf = ""
	f.write("results/c-3r-as-first.att.json", edSigner{t, f.key}.sign(attest.NewStatement(&p, v.Statement.Subject...)))
	b, _ = boardWith(t, results, pub)
	found := false
	for _, r := range b.Rejected {
		found = found || (strings.Contains(r.Path, "c-3r-as-first") && strings.Contains(r.Reason, "ledger.entry.rerun_of"))
	}
	if !found {
		t.Errorf("a rerun presented as a first run was not rejected: %v", b.Rejected)
	}
	os.Remove(filepath.Join(results, "c-3r-as-first.att.json"))

	// An entry edited in the published ledger: the ledger does not read.
	data, _ := os.ReadFile(pub)
	edited := filepath.Join(f.dir, "edited.jsonl")
	os.WriteFile(edited, bytes.Replace(data, []byte(`"state":"invalid"`), []byte(`"state":"failed"`), 1), 0o644)
	if _, err := boardWith(t, results, edited); err == nil || !strings.Contains(err.Error(), "an entry was edited") {
		t.Errorf("edited ledger: %v", err)
	}

	// The host signs other histories with its key: a prefix (truncated) and one that differs
	// from the third entry on (a fork). The heads the attestations carry catch both.
	signer, _ := attest.LoadSigner(context.Background(), f.key, nil)
	var entries []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(l, `{"entry":`) {
			entries = append(entries, l)
		}
	}
	signedFrom := func(name string, lines ...string) string {
		src := filepath.Join(f.dir, name+"-src.jsonl")
		os.WriteFile(src, []byte(strings.Join(lines, "")), 0o644)
		l, err := ledger.Open(src, "sealrun.ledger/node-a", signer) // signs a head over them
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return exportLedger(t, l, filepath.Join(f.dir, name+".jsonl"))
	}
	truncated := signedFrom("short", entries[:3]...)
	b, _ = boardWith(t, results, truncated)
	if len(b.Rejected) == 0 || !strings.Contains(b.Rejected[0].Reason, "truncated") {
		t.Errorf("truncated ledger: %v", b.Rejected)
	}
	if rl := rowLedger(t, b, "alpha"); rl.Accounted {
		t.Errorf("accounted against a rejected ledger: %+v", rl)
	}
	forked := signedFrom("fork", append(append(append([]string{}, entries[:2]...), strings.Replace(entries[2], `"seed":2`, `"seed":5`, 1)), entries[3:]...)...)
	b, _ = boardWith(t, results, forked)
	if len(b.Rejected) == 0 || !strings.Contains(b.Rejected[0].Reason, "rewritten") {
		t.Errorf("forked ledger vs the attestations: %v", b.Rejected)
	}
	b, _ = boardWith(t, results, pub, forked)
	fk := 0
	for _, r := range b.Rejected {
		if strings.Contains(r.Reason, "fork") {
			fk++
		}
	}
	if fk != 2 {
		t.Errorf("two ledgers that fork: %v", b.Rejected)
	}

	// An older export of the same host beside the newer one: a prefix, not a truncation.
	b, _ = boardWith(t, results, truncated, pub)
	if len(b.Rejected) != 0 || !rowLedger(t, b, "alpha").Accounted {
		t.Errorf("an older export beside the newer: %v %+v", b.Rejected, rowLedger(t, b, "alpha"))
	}

	// Several hosts: a second node's ledger beside the first.
	g, _, results2 := ledgerScenario(t, "sealrun.ledger/node-b")
	pub2 := exportLedger(t, g.led, filepath.Join(g.dir, "ledger.jsonl"))
	keys2, _ := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	in, _ := Load([]string{results, results2}, keys2, nil)
	in.Ledgers, _ = LoadLedgers([]string{pub, pub2}, keys2)
	b = Build(in, keys2)
	// Run ids repeat across the two fixtures (a-1 on both): the loader rejects the conflict;
	// what remains is accounted per host.
	if len(b.Ledgers) != 2 {
		t.Errorf("ledgers: %+v", b.Ledgers)
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHumanRows: people's runs are rows of their own (human · HANDLE), or with HumanBaseline one
// row over every person (human · baseline: HANDLES) with the same rules: its runs, the failed one
// counted, mean ± SE over them, and every run accounted for by the ledger.
func TestHumanRows(t *testing.T) {
	f, _, results := ledgerScenario(t, "sealrun.ledger/node-h")
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	for _, r := range []runSpec{
		{ari, "human/alice", "", 1, "h-a1", "", "graded", 30, 40, nil, ""},
		{ari, "human/alice", "", 2, "h-a2", "", "graded", 36, 45, nil, ""},
		{ari, "human/bob", "", 1, "h-b1", "", "failed", 0, 0, nil, ""},
	} {
		f.write(filepath.Join("results", r.id, "result.att.json"), f.attestation(r))
	}
	pub := exportLedger(t, f.led, filepath.Join(f.dir, "ledger.jsonl"))
	keys, _ := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	for _, baseline := range []bool{false, true} {
		in, err := Load([]string{results}, keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.Ledgers, err = LoadLedgers([]string{pub}, keys); err != nil {
			t.Fatal(err)
		}
		in.HumanBaseline = baseline
		b := Build(in, keys)
		rows := map[string]Row{}
		for _, r := range b.Tables[0].Rows {
			rows[r.Agent.Name()] = r
		}
		if !baseline {
			a, bob := rows["human · alice"], rows["human · bob"]
			if a.N != 2 || bob.N != 1 || bob.Failed != 1 || a.Ledger == nil || !a.Ledger.Accounted || !bob.Ledger.Accounted {
				t.Errorf("a row each: alice %+v, bob %+v (of %v)", a, bob, keysOf(rows))
			}
			// The pauses granted, in the row and every rendering of it.
			if a.Pauses == nil || a.Pauses.Count != 1 || a.Pauses.Seconds != 300 || bob.Pauses != nil {
				t.Errorf("pauses: alice %+v, bob %+v", a.Pauses, bob.Pauses)
			}
			for _, format := range []string{"text", "markdown", "html", "json"} {
				var out bytes.Buffer
				if err := b.Render(&out, format); err != nil {
					t.Fatal(err)
				}
				want := "1 pause granted, 5m0s in all"
				if format == "json" {
					want = `"reason": "fire alarm"`
				}
				if !strings.Contains(out.String(), want) {
					t.Errorf("the %s board has no %q", format, want)
				}
			}
			continue
		}
		h, ok := rows["human · baseline: alice, bob"]
		if !ok || h.N != 3 || h.Failed != 1 || h.Ledger == nil || !h.Ledger.Accounted || h.Ledger.Runs != 3 || h.MeanPct == nil || h.SEPct == nil {
			t.Fatalf("the baseline row: %+v (rows %v)", h, keysOf(rows))
		}
		if _, ok := rows["human · alice"]; ok {
			t.Error("a person's own row beside the baseline")
		}
		var md bytes.Buffer
		if err := b.Render(&md, "markdown"); err != nil || !strings.Contains(md.String(), "human · baseline: alice, bob") {
			t.Errorf("the markdown board: %v\n%s", err, md.String())
		}
	}
}

func keysOf(m map[string]Row) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// With ledgers, the head each attestation carries is settled against them (ledger.DeferredHeads):
// a head the verified ledger holds needs no signature of its own; a head no given ledger
// vouches for is verified, and an attestation whose head fails is rejected as attest.Verify
// rejects it, with the same reason.
func TestLedgerHeadsSettled(t *testing.T) {
	f, _, results := ledgerScenario(t, "sealrun.ledger/host-a")
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	f.ref = func(r *ledger.Ref) { // the head's text kept, its signature broken (signed over by the envelope)
		i := len(r.Checkpoint) - 10
		c := byte('A')
		if r.Checkpoint[i] == 'A' {
			c = 'B'
		}
		r.Checkpoint = r.Checkpoint[:i] + string(c) + r.Checkpoint[i+1:]
	}
	f.write(filepath.Join("results", "b-1", "result.att.json"), f.attestation(runSpec{ari, "beta", "high", 1, "b-1", "", "graded", 30, 40, nil, ""}))
	f.ref = nil
	lpath := exportLedger(t, f.led, filepath.Join(f.dir, "ledger.jsonl"))
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	rejected := func(in *Inputs) string {
		for _, r := range in.Rejected {
			if strings.Contains(r.Path, "b-1") {
				return r.Reason
			}
		}
		return ""
	}
	// The ledger vouches: every run counts, b-1 too.
	in, lerr, err := LoadWithLedgers([]string{results}, keys, nil, []string{lpath}, LoadOptions{})
	if err != nil || lerr != nil || len(in.Entries) != 6 || len(in.Rejected) != 0 {
		t.Fatalf("with its ledger: %v %v: %d entries, rejected %+v", err, lerr, len(in.Entries), in.Rejected)
	}
	// No ledger: the head's own signature, which fails.
	in, err = Load([]string{results}, keys, nil)
	want := rejected(in)
	if err != nil || len(in.Entries) != 5 || !strings.Contains(want, "not valid (ledger): ledger.checkpoint: ") {
		t.Fatalf("without a ledger: %v: %d entries, b-1 %q", err, len(in.Entries), want)
	}
	// Another host's ledger vouches for nothing here: the same rejection, the same reason.
	g, _, _ := ledgerScenario(t, "sealrun.ledger/host-b")
	other := exportLedger(t, g.led, filepath.Join(g.dir, "ledger.jsonl"))
	in, _, err = LoadWithLedgers([]string{results}, keys, nil, []string{other}, LoadOptions{})
	if err != nil || rejected(in) != want {
		t.Fatalf("with another host's ledger: %v: b-1 %q, want %q (rejected %+v)", err, rejected(in), want, in.Rejected)
	}
	for _, e := range in.Entries {
		if e.Predicate.Run.ID == "b-1" {
			t.Fatal("b-1 is both rejected and counted")
		}
	}
}
