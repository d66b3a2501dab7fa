package leaderboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	sdigest "github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// basePredicate is the attest package's golden statement's predicate (air-gap evidence, host,
// timeline), re-pinned by each fixture.
func basePredicate(t testing.TB) attest.Predicate {
	t.Helper()
	b, err := os.ReadFile("../attest/testdata/statement.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Predicate attest.Predicate }
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st.Predicate
}

func loadTrack(t testing.TB, path string, edit func(string) string) *policy.Track {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if edit != nil {
		s = edit(s)
	}
	tr, err := policy.Parse(path, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// fixture signs attestations with a fixed key and clock.
type fixture struct {
	t    testing.TB
	dir  string
	base attest.Predicate
	key  string
	led  *ledger.Log       // when set, each run is appended (queued, ended) and its attestation carries its entry
	ref  func(*ledger.Ref) // when set, changes the ledger reference before the attestation is signed
}

type edSigner struct {
	t   testing.TB
	key string
}

func (s edSigner) sign(st *attest.Statement) []byte {
	signer, err := attest.LoadSigner(context.Background(), s.key, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	env, err := attest.Sign(context.Background(), st, signer)
	if err != nil {
		s.t.Fatal(err)
	}
	return env
}

type runSpec struct {
	track         *policy.Track
	model, effort string
	seed          int64
	id, rerunOf   string
	status        string // graded, failed, invalid
	passed        int
	validation    float64
	bpb           *float64
	key           string // signing key (default ed25519)
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// attestation builds and signs one run's statement.
func (f *fixture) attestation(r runSpec) []byte {
	p := f.base
	tp := attest.PredicateFromTrack(r.track)
	p.Track, p.Exam, p.Images, p.Kit, p.Scaffold, p.Budget = tp.Track, tp.Exam, tp.Images, tp.Kit, tp.Scaffold, tp.Budget
	p.Agent = attest.Agent{Model: r.model, ReasoningEffort: r.effort}
	p.Seed = r.seed
	p.Run = attest.RunInfo{ID: r.id, RerunOf: r.rerunOf}
	start := time.Date(2026, 11, 21, 12, 0, 10, 0, time.UTC)
	wall := r.track.Budget.Wall
	p.Timeline = attest.Timeline{Queued: start.Add(-10 * time.Second), Started: start, Deadline: start.Add(wall), Finished: start.Add(wall + time.Minute)}
	if strings.HasPrefix(r.model, "human/") && r.seed == 2 { // a person's run with a pause of 5 minutes
		p.Budget.Pauses = "10m0s"
		p.Timeline.Pauses = []attest.Pause{{Start: start.Add(20 * time.Minute), End: start.Add(25 * time.Minute), By: "root", Reason: "fire alarm"}}
		p.Timeline.Deadline, p.Timeline.Finished = p.Timeline.Deadline.Add(5*time.Minute), p.Timeline.Finished.Add(5*time.Minute)
	}
	bundle := digest(r.id)
	p.Submissions.History = []attest.Submission{{Digest: sdigest.Digest("sha256:" + bundle), Size: 1000, Time: start.Add(time.Minute), ValidationScore: r.validation, Promoted: r.status == "graded"}}
	p.Submissions.Head, _ = attest.HistoryHead(p.Submissions.History)
	q := int(r.track.Exam.Questions)
	p.Result = attest.Result{Status: outcome.Outcome(r.status), Questions: q, Passed: r.passed, Score: 100 * float64(r.passed) / float64(q), BitsPerByte: r.bpb}
	switch r.model {
	case "alpha", "beta": // alpha's host priced its model; beta's did not
		u := &attest.Usage{Requests: r.passed, Tokens: policy.Tokens{Input: int64(r.passed) * 10000, CachedInput: int64(r.passed) * 5000, Output: int64(r.passed) * 1000}}
		if r.model == "alpha" {
			price := policy.Price{Currency: "USD", Input: 3, CachedInput: 3, CacheWrite: 3, Output: 15, Taken: "2026-11-01"}
			u.Cost = &attest.Cost{Amount: price.Cost(u.Tokens), Price: price}
		}
		p.Usage = u
	}
	switch r.status {
	case "graded":
		p.Result.PassVectorSHA256 = sdigest.Hex(digest(fmt.Sprint(r.id, r.passed)))
	case "failed":
		p.Result.Reason = "no candidate was promoted"
	case "invalid":
		p.Result.Reason = "daemon restart"
	}
	subjects := []attest.Subject{attest.NewSubject(attest.SubjectReport, digest("report "+r.id))}
	if r.status == "graded" {
		subjects = append(subjects, attest.NewSubject(attest.SubjectBundle, bundle))
	}
	key := r.key
	if key == "" {
		key = f.key
	}
	if f.led != nil {
		q := &ledger.Entry{Kind: ledger.KindQueued, Run: r.id, Time: p.Timeline.Queued, Track: p.Track.ID, TrackName: p.Track.Name + " " + p.Track.Version,
			Scaffold: p.LedgerScaffold(), Agent: p.LedgerAgent(), Seed: r.seed, RerunOf: r.rerunOf}
		if !f.led.Has(r.id, ledger.KindQueued) {
			if _, err := f.led.Append(q); err != nil {
				f.t.Fatal(err)
			}
		}
		ref, err := f.led.Ref(r.id)
		if err != nil {
			f.t.Fatal(err)
		}
		if f.ref != nil {
			f.ref(ref)
		}
		p.Ledger = ref
	}
	st := attest.NewStatement(&p, subjects...)
	env := edSigner{f.t, key}.sign(st)
	if f.led != nil && !f.led.Has(r.id, ledger.KindEnded) {
		payload, _ := st.Canonical()
		sum := sha256.Sum256(payload)
		if _, err := f.led.Append(&ledger.Entry{Kind: ledger.KindEnded, Run: r.id, Time: p.Timeline.Finished, State: outcome.Outcome(r.status), Attestation: sdigest.Hex(hex.EncodeToString(sum[:]))}); err != nil {
			f.t.Fatal(err)
		}
	}
	return env
}

func (f *fixture) write(name string, data []byte) string {
	p := filepath.Join(f.dir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func fptr(v float64) *float64 { return &v }

// scenario: ari-v1 (100 questions, 3 seeds) with
//
//	alpha@high  40 50 60          mean 50, SE 10/√3 = 5.77    [44.23, 55.77]
//	beta@high   45 47 49          mean 47, SE 2/√3 = 1.15     [45.85, 48.15]  ties alpha: =1 =1
//	delta@low   30 (one seed)     mean 30, no SE, provisional  rank 3
//	gamma       10, failed 0, invalid (rerun: 14)  mean 8, SE √(52/3) = 4.16  rank 4
//
// alpha's runs are priced (1.80, 2.25, 2.70 USD: mean 2.25, SE 0.45/√3 = 0.2598); beta's carry
// tokens and no price (no cost shown).
//
// plus a legacy track with one run, a tampered file, one signed by another key, a truncated
// one, a duplicate copy and a report.json beside them.
func scenario(t testing.TB) (dir string, keys []Key) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	legacy := loadTrack(t, "../tracks/ari-v1.toml", func(s string) string {
		return strings.Replace(strings.Replace(s, `version = "1"`, `version = "0"`, 1), `status = "active"`, `status = "legacy"`, 1)
	})
	runs := []runSpec{
		{ari, "alpha", "high", 1, "a-1", "", "graded", 40, 55, fptr(1.5), ""},
		{ari, "alpha", "high", 2, "a-2", "", "graded", 50, 65, fptr(1.4), ""},
		{ari, "alpha", "high", 3, "a-3", "", "graded", 60, 95, fptr(1.3), ""},
		{ari, "beta", "high", 1, "b-1", "", "graded", 45, 45, nil, ""},
		{ari, "beta", "high", 2, "b-2", "", "graded", 47, 47, nil, ""},
		{ari, "beta", "high", 3, "b-3", "", "graded", 49, 49, nil, ""},
		{ari, "delta", "low", 1, "d-1", "", "graded", 30, 100, fptr(2.0), ""},
		{ari, "gamma", "", 1, "c-1", "", "graded", 10, 20, nil, ""},
		{ari, "gamma", "", 2, "c-2", "", "failed", 0, 0, nil, ""},
		{ari, "gamma", "", 3, "c-3", "", "invalid", 0, 0, nil, ""},
		{ari, "gamma", "", 3, "c-3r", "c-3", "graded", 14, 30, nil, ""},
		{legacy, "alpha", "high", 1, "l-1", "", "graded", 20, 20, nil, ""},
	}
	for _, r := range runs {
		f.write(filepath.Join("results", r.id, "result.att.json"), f.attestation(r))
		f.write(filepath.Join("results", r.id, "report.json"), []byte(`{"format":"sealrun-report/v1"}`))
	}
	// The same attestation gathered twice counts once.
	dup, _ := os.ReadFile(filepath.Join(f.dir, "results", "a-1", "result.att.json"))
	f.write("results/copies/a-1.att.json", dup)
	// Tampered: the payload edited after signing.
	var env map[string]any
	json.Unmarshal(dup, &env)
	payload, _ := decodeB64(env["payload"].(string))
	payload = bytes.Replace(payload, []byte(`"passed":40`), []byte(`"passed":99`), 1)
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	tampered, _ := json.Marshal(env)
	f.write("results/tampered.att.json", tampered)
	// Signed by another key.
	f.write("results/other-key.att.json", f.attestation(runSpec{ari, "eve", "", 1, "e-1", "", "graded", 100, 100, nil, "../attest/testdata/ecdsa.key"}))
	// Truncated.
	good, _ := os.ReadFile(filepath.Join(f.dir, "results", "b-1", "result.att.json"))
	f.write("results/truncated.att.json", good[:len(good)/2])
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(f.dir, "results"), keys
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test ./leaderboard -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./leaderboard -update to accept):\n--- got\n%s", name, got)
	}
}

func TestScenario(t *testing.T) {
	dir, keys := scenario(t)
	in, err := Load([]string{dir}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := Build(in, keys)
	if len(b.Tables) != 2 || b.Tables[0].Track.Status != "active" || b.Tables[1].Track.Status != "legacy" {
		t.Fatalf("tables: %+v", b.Tables)
	}
	rows := b.Tables[0].Rows
	got := []string{}
	for i := range rows {
		c := rows[i].cells()
		got = append(got, strings.Join(c, " | "))
	}
	expect := []string{
		"=1 | opencode 1.18.33 · alpha@high | 50.0 ± 5.8 | 3/3 | official | 0 | 0 | 71.7 | 1.400 | 2.2500 ± 0.2598 USD | ed25519.pub",
		"=1 | opencode 1.18.33 · beta@high | 47.0 ± 1.2 | 3/3 | official | 0 | 0 | 47.0 | — | — | ed25519.pub",
		"3 | opencode 1.18.33 · delta@low | 30.0 ± — | 1/3 | provisional, repeatability not tested | 0 | 0 | 100.0 | 2.000 | — | ed25519.pub",
		"4 | opencode 1.18.33 · gamma | 8.0 ± 4.2 | 3/3 | official | 1 | 1 (c-3 → c-3r) | 16.7 | — | — | ed25519.pub",
	}
	if strings.Join(got, "\n") != strings.Join(expect, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(expect, "\n"))
	}
	// Exact values, by hand.
	if rows[3].MeanExact != "2/25" || rows[0].MeanExact != "1/2" {
		t.Errorf("exact means %s %s", rows[0].MeanExact, rows[3].MeanExact)
	}
	if rows[3].se2.Cmp(big.NewRat(52, 30000)) != 0 { // var of fractions 52/10000 over n = 3
		t.Errorf("gamma SE² = %s", rows[3].se2.RatString())
	}
	reasons := map[string]string{}
	for _, r := range b.Rejected {
		reasons[filepath.Base(r.Path)] = r.Reason
	}
	for name, want := range map[string]string{
		"tampered.att.json":  "signature",
		"other-key.att.json": "signature",
		"truncated.att.json": "envelope",
	} {
		if !strings.Contains(reasons[name], want) {
			t.Errorf("%s: rejected with %q; want %q", name, reasons[name], want)
		}
	}
	if len(b.Rejected) != 3 {
		t.Errorf("rejected: %+v", b.Rejected)
	}
	skippedDup := false
	for _, s := range b.Skipped {
		skippedDup = skippedDup || strings.Contains(s.Reason, "counted once")
	}
	if !skippedDup || len(b.Skipped) != 13 { // 12 report.json + 1 duplicate
		t.Errorf("skipped: %d %+v", len(b.Skipped), b.Skipped)
	}
	for _, format := range Formats {
		var out bytes.Buffer
		if err := b.Render(&out, format); err != nil {
			t.Fatal(err)
		}
		golden(t, "scenario."+format, strings.ReplaceAll(out.String(), filepath.Dir(dir), "DIR"))
	}
}

// The interval rule at its boundary, decided exactly.
func TestAboveBoundary(t *testing.T) {
	row := func(mean, se2 *big.Rat) *Row { return &Row{mean: mean, se2: se2} }
	r := func(a, b int64) *big.Rat { return big.NewRat(a, b) }
	cases := []struct {
		a, b *Row
		want bool
	}{
		{row(r(1, 2), r(1, 100)), row(r(3, 10), r(1, 100)), false},     // 0.5−0.1 = 0.3+0.1: touching is overlap
		{row(r(501, 1000), r(1, 100)), row(r(3, 10), r(1, 100)), true}, // just apart
		{row(r(1, 2), r(0, 1)), row(r(1, 2), r(0, 1)), false},          // equal points tie
		{row(r(1, 2), r(0, 1)), row(r(49, 100), r(0, 1)), true},        // n = 1 points apart
		{row(r(1, 2), r(1, 400)), row(r(9, 20), r(0, 1)), false},       // 0.5−0.05 = 0.45: touching
		{row(r(3, 10), r(1, 100)), row(r(1, 2), r(1, 100)), false},     // below is never above
	}
	for i, c := range cases {
		if got := above(c.a, c.b); got != c.want {
			t.Errorf("case %d: above = %v, want %v", i, got, c.want)
		}
	}
	for _, c := range []struct {
		x    *big.Rat
		want string
	}{{big.NewRat(1, 3), "33.3"}, {big.NewRat(2, 3), "66.7"}, {big.NewRat(845, 2000), "42.3"}, {big.NewRat(0, 1), "0.0"}, {big.NewRat(1, 1), "100.0"}, {big.NewRat(1, 2000), "0.1"}} {
		if got := pctText(c.x); got != c.want {
			t.Errorf("pctText(%s) = %s, want %s", c.x.RatString(), got, c.want)
		}
	}
}

// All-failed rows, and a track given: attestations under another track are rejected.
func TestAllFailedAndTrackFilter(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	demo := loadTrack(t, "../tracks/demo.toml", nil)
	for i := 1; i <= 3; i++ {
		f.write(fmt.Sprintf("r/f-%d.att.json", i), f.attestation(runSpec{ari, "zero", "", int64(i), fmt.Sprintf("f-%d", i), "", "failed", 0, 0, nil, ""}))
	}
	f.write("r/demo.att.json", f.attestation(runSpec{demo, "zero", "", 1, "dm-1", "", "graded", 5, 0, nil, ""}))
	keys, _ := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	in, err := Load([]string{filepath.Join(f.dir, "r")}, keys, []*policy.Track{ari})
	if err != nil {
		t.Fatal(err)
	}
	b := Build(in, keys)
	if len(b.Tables) != 1 || len(b.Rejected) != 1 || !strings.Contains(b.Rejected[0].Reason, "not among the --track files") {
		t.Fatalf("tables %d rejected %+v", len(b.Tables), b.Rejected)
	}
	row := b.Tables[0].Rows[0]
	if row.MeanText() != "0.0" || row.SEText() != "0.0" || row.Failed != 3 || row.Rank != 1 || row.Tied || row.Provisional {
		t.Errorf("all-failed row: %+v", row)
	}
	// A track file whose pins differ from the attestation's: rejected, with the field.
	other := loadTrack(t, "../tracks/ari-v1.toml", nil)
	other.Exam.Questions = 99
	in, _ = Load([]string{filepath.Join(f.dir, "r", "f-1.att.json")}, keys, []*policy.Track{other})
	if len(in.Rejected) != 1 || !strings.Contains(in.Rejected[0].Reason, "exam.questions") {
		t.Errorf("mismatching track: %+v", in.Rejected)
	}
}

// A withdrawn track is shown unranked; two different statements for one run are both rejected;
// a keys directory trusts several signers and each run names its own.
func TestWithdrawnConflictsAndKeys(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	withdrawn := loadTrack(t, "../tracks/ari-v1.toml", func(s string) string {
		return strings.Replace(s, `status = "active"`, `status = "withdrawn"`, 1)
	})
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	f.write("r/w.att.json", f.attestation(runSpec{withdrawn, "alpha", "", 1, "w-1", "", "graded", 50, 0, nil, ""}))
	f.write("r/x1.att.json", f.attestation(runSpec{ari, "alpha", "", 1, "x-1", "", "graded", 50, 0, nil, ""}))
	f.write("r/x1-again.att.json", f.attestation(runSpec{ari, "alpha", "", 1, "x-1", "", "graded", 90, 0, nil, ""}))
	f.write("r/y1.att.json", f.attestation(runSpec{ari, "alpha", "", 2, "y-1", "", "graded", 40, 0, nil, "../attest/testdata/ecdsa.key"}))
	f.write("r/node2/z1.att.json", f.attestation(runSpec{ari, "alpha", "", 3, "z-1", "", "graded", 60, 0, nil, ""}))
	kd := filepath.Join(f.dir, "keys")
	os.MkdirAll(kd, 0o755)
	for _, k := range []string{"ed25519.pub", "ecdsa.pub"} {
		b, _ := os.ReadFile("../attest/testdata/" + k)
		os.WriteFile(filepath.Join(kd, k), b, 0o644)
	}
	keys, err := LoadKeys([]string{kd})
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys: %v %d", err, len(keys))
	}
	in, err := Load([]string{filepath.Join(f.dir, "r")}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := Build(in, keys)
	if len(b.Rejected) != 2 || !strings.Contains(b.Rejected[0].Reason+b.Rejected[1].Reason, "different attestation") {
		t.Errorf("conflict: %+v", b.Rejected)
	}
	var active, wd *Table
	for i := range b.Tables {
		switch b.Tables[i].Track.Status {
		case "active":
			active = &b.Tables[i]
		case "withdrawn":
			wd = &b.Tables[i]
		}
	}
	if wd == nil || wd.Ranked || wd.Rows[0].Rank != 0 || rankText(&wd.Rows[0]) != "-" {
		t.Errorf("withdrawn table: %+v", wd)
	}
	if active == nil || len(active.Rows[0].Runs) != 2 || active.Rows[0].Runs[0].Key != "ecdsa.pub" || active.Rows[0].Runs[1].Key != "ed25519.pub" {
		t.Errorf("active table (y-1 signed by the ECDSA key, z-1 by the Ed25519 one; x-1 conflicts): %+v", active)
	} else if c := active.Rows[0].cells(); c[len(c)-1] != "ecdsa.pub, ed25519.pub" || strings.Join(active.Rows[0].SignedBy, " ") != "ecdsa.pub ed25519.pub" {
		t.Errorf("the row's signers: %q %v; want both keys", c[len(c)-1], active.Rows[0].SignedBy)
	}
	if _, err := LoadKeys([]string{t.TempDir()}); err == nil || !strings.Contains(err.Error(), "has no *.pub") {
		t.Errorf("empty keys dir: %v", err)
	}
}

// A row is named by scaffold, model and effort; a scripted scaffold or a scripted model is never
// presented as a model.
func TestAgentName(t *testing.T) {
	for _, c := range []struct {
		a    Agent
		want string
	}{
		{Agent{"opencode", "1.18.33", "openai/gpt-x", "high"}, "opencode 1.18.33 · openai/gpt-x@high"},
		{Agent{"opencode", "1.18.33", "openai/gpt-x", ""}, "opencode 1.18.33 · openai/gpt-x"},
		{Agent{"scripted-demo", "1.0.0", "none/none", ""}, "scripted-demo 1.0.0 · no model (scripted)"},
		{Agent{"scripted-demo", "1.0.0", "human/alice", ""}, "human · alice"},
		{Agent{"opencode", "1.18.33", "scripted/scripted", ""}, "opencode 1.18.33 · scripted (not a model)"},
		{Agent{"opencode", "1.18.33", "scripted/scripted", "high"}, "opencode 1.18.33 · scripted (not a model)"},
		{Agent{"opencode", "1.18.33", "scriptedx/m", ""}, "opencode 1.18.33 · scriptedx/m"},
	} {
		if got := c.a.Name(); got != c.want {
			t.Errorf("%+v: %q; want %q", c.a, got, c.want)
		}
	}
}

// LoadWith: what a caller verified already is used only with a key of Load's and, tracks given,
// one of the attestation's track; anything else is verified here, as Load would. ReadFile is
// where the bytes come from.
func TestLoadWithVerified(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), base: basePredicate(t), key: "../attest/testdata/ed25519.key"}
	ari := loadTrack(t, "../tracks/ari-v1.toml", nil)
	demo := loadTrack(t, "../tracks/demo.toml", nil)
	f.write("r/a.att.json", f.attestation(runSpec{ari, "alpha", "", 1, "a-1", "", "graded", 50, 0, nil, ""}))
	keys, _ := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	att := filepath.Join(f.dir, "r", "a.att.json")
	real, err := os.ReadFile(att)
	if err != nil {
		t.Fatal(err)
	}
	truth, err := Load([]string{att}, keys, []*policy.Track{ari})
	if err != nil || len(truth.Entries) != 1 {
		t.Fatalf("%v %+v", err, truth)
	}
	forged := *truth.Entries[0].Predicate
	forged.Result.Passed = 40 // what a caller's memo would say if it lied: it must be one Load trusts
	env, err := attest.EnvelopeOf(real)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := attest.Verify(env, keys[0].Verifier)
	if err != nil {
		t.Fatal(err)
	}
	v := &attest.Verified{Statement: &attest.Statement{Predicate: &forged}, Payload: signed.Payload}
	for _, c := range []struct {
		name   string
		kid    string
		tracks []*policy.Track
		memo   bool // the caller's verification used
	}{
		{"its key, its track", keys[0].KeyID, []*policy.Track{ari}, true},
		{"no tracks pinned", keys[0].KeyID, nil, true},
		{"a key Load does not trust", "0000", []*policy.Track{ari}, false},
		{"another track pinned", keys[0].KeyID, []*policy.Track{demo}, false},
	} {
		read := 0
		in, err := LoadWith([]string{att}, keys, c.tracks, LoadOptions{
			ReadFile: func(string) ([]byte, error) { read++; return real, nil },
			Verified: func(p string, data []byte) (*attest.Verified, string) { return v, c.kid },
		})
		if err != nil || read != 1 {
			t.Fatalf("%s: %v, read %d times", c.name, err, read)
		}
		switch {
		case c.memo && (len(in.Entries) != 1 || in.Entries[0].Predicate.Result.Passed != 40):
			t.Errorf("%s: the caller's verification was not used: %+v", c.name, in)
		case !c.memo && c.tracks[0] == demo && (len(in.Entries) != 0 || len(in.Rejected) != 1):
			t.Errorf("%s: verified here, it is rejected: %+v", c.name, in)
		case !c.memo && c.tracks[0] == ari && (len(in.Entries) != 1 || in.Entries[0].Predicate.Result.Passed == 40):
			t.Errorf("%s: verified here, it is the signed one: %+v", c.name, in)
		}
	}
	// ReadFile's error is the file's rejection, named.
	in, _ := LoadWith([]string{att}, keys, nil, LoadOptions{ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }})
	if len(in.Rejected) != 1 || !strings.Contains(in.Rejected[0].Reason, "cannot read") {
		t.Errorf("unreadable: %+v", in.Rejected)
	}
}
