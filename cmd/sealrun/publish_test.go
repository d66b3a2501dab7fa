package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/transcript/transcripttest"
	"github.com/sealrun/sealrun/verify"
)

// pubFixture gathers three signed runs (seeds 1 to 3) of the flagship track into results/, as
// sealrun results gather lays them out, and a host ledger that holds them all.
type pubFixture struct {
	dir, results, ledger, key string
	runs                      []string
}

func newPubFixture(t *testing.T) *pubFixture { return newPubFixtureWith(t) }

// newAmendedPubFixture is newPubFixture with two runs amended after they ended, as sealrund
// amends them: the first run noted, the second invalidated; each signed with the host key, kept
// in the run's amendments/ and appended to the ledger, which is exported again.
func newAmendedPubFixture(t *testing.T) *pubFixture {
	t.Helper()
	f := newPubFixtureWith(t)
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(f.dir, "state")
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), "sealrun.ledger/pub-host", signer)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, a := range []attest.Amendment{
		{Action: ledger.ActionNote, Reason: "a contamination report against this model is under review", Link: "https://example.org/reports/7"},
		{Action: ledger.ActionInvalidate, Reason: "the host's memory failed memtest86+ a week after the run", Link: "https://status.example.org/incident/42"},
	} {
		f.amend(t, l, signer, f.runs[i], a)
	}
	f.exportLedger(t)
	return f
}

// exportLedger exports the fixture's ledger again (sealrun ledger export), over the last export.
func (f *pubFixture) exportLedger(t *testing.T) {
	t.Helper()
	os.Remove(f.ledger)
	if r := sealrun(t, "--state-dir", filepath.Join(f.dir, "state"), "ledger", "export", "--out", f.ledger); r.code != 0 {
		t.Fatalf("ledger export: %+v", r)
	}
}

// amend signs amendment a of run id (gathered in results/) with signer, writes it into the run's
// amendments/ and appends its entry to l; it returns the file.
func (f *pubFixture) amend(t *testing.T, l *ledger.Log, signer signature.Signer, id string, a attest.Amendment) string {
	t.Helper()
	return f.write(t, l, f.statement(t, id, a), signer)
}

// statement is the statement of amendment a of run id, as its host makes it.
func (f *pubFixture) statement(t *testing.T, id string, a attest.Amendment) *attest.AmendmentStatement {
	t.Helper()
	env, err := os.ReadFile(filepath.Join(f.results, id, "result.att.json"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := attest.ReadUnverified(env)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Payload string }
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	a.Run, a.Time, a.Ledger = id, time.Date(2026, 12, 1, 9, len(id)%60, 0, 0, time.UTC), "sealrun.ledger/pub-host"
	st, err := attest.NewAmendment(run, digest.Hex(sumOf(string(payload))), a)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// write signs st with signer beside others (a reviewer's), writes it into its run's
// amendments/ and appends its entry to l (nil: to no ledger); it returns the file.
func (f *pubFixture) write(t *testing.T, l *ledger.Log, st *attest.AmendmentStatement, signer signature.Signer, others ...attest.AmendmentSignature) string {
	t.Helper()
	signed, sum, err := attest.SignAmendment(context.Background(), st, signer, others...)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.results, st.Predicate.Run, "amendments")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, string(sum)+".att.json")
	if err := os.WriteFile(path, signed, 0o644); err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if _, err := l.Append(st.Entry(sum)); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// newPubFixtureWith gathers the runs with their trajectories: each run directory holds an audit
// log of a synthetic agent loop (model exchanges and calls), the bodies it hashes, and its
// transcript, and its attestation carries that log's head (a publication holds what the
// agent did: a run without it does not verify). With people, seed N's run is theirs (agent
// human/PERSON), not a model's.
func newPubFixtureWith(t *testing.T, people ...string) *pubFixture {
	t.Helper()
	b, err := os.ReadFile("../../tracks/ari-v1.toml")
	if err != nil {
		t.Fatal(err)
	}
	return newPubFixtureTrack(t, b, people...)
}

// newPubFixtureTrack is newPubFixtureWith with the runs made under the track trackTOML (the
// golden's, ari-v1, with tables added: its pins the same, its id its own).
func newPubFixtureTrack(t *testing.T, trackTOML []byte, people ...string) *pubFixture {
	t.Helper()
	f := &pubFixture{dir: t.TempDir(), key: "../../attest/testdata/ed25519.pub"}
	f.results = filepath.Join(f.dir, "results")
	pred, _ := goldenPredicate(t)
	var p map[string]any
	if err := json.Unmarshal(pred, &p); err != nil {
		t.Fatal(err)
	}
	tr, err := policy.Parse("track.toml", trackTOML)
	if err != nil {
		t.Fatal(err)
	}
	p["track"].(map[string]any)["id"] = tr.ID
	track := tr.ID
	state := filepath.Join(f.dir, "state")
	os.MkdirAll(state, 0o755)
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), "sealrun.ledger/pub-host", signer)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for seed := 1; seed <= 3; seed++ {
		id := fmt.Sprintf("r-20261124-09000%d-abc%d", seed, seed)
		f.runs = append(f.runs, id)
		rd := filepath.Join(f.results, id)
		os.MkdirAll(rd, 0o755)
		report := fmt.Sprintf(`{"run":%q,"seed":%d}`+"\n", id, seed)
		os.WriteFile(filepath.Join(rd, "report.json"), []byte(report), 0o644)
		os.WriteFile(filepath.Join(rd, "summary.txt"), []byte("run "+id+"\n"), 0o644)
		os.WriteFile(filepath.Join(rd, "track.toml"), trackTOML, 0o644)
		p["run"] = map[string]any{"id": id, "rerun_of": ""}
		p["seed"] = seed
		agent := "example-model-2026-10@high"
		if len(people) > 0 {
			agent = "human/" + people[seed-1]
			p["agent"] = map[string]any{"model": agent, "reasoning_effort": ""}
			// Who it was for and who attached, as sealrund attests it.
			tl := p["timeline"].(map[string]any)
			p["human"] = map[string]any{"person": map[string]any{"account": people[seed-1]}, "proctors": []string{"carol"}, "attaches": []map[string]any{
				{"account": people[seed-1] + " (uid 1001)", "role": "person", "watch": false, "start": tl["started"], "end": tl["finished"]},
				{"account": "carol (uid 1003)", "role": "proctor", "watch": true, "start": tl["started"], "end": tl["started"]},
			}}
		}
		{
			started, _ := time.Parse(time.RFC3339, "2026-11-21T12:00:10Z")
			tr, err := transcripttest.New(rd, started)
			if err != nil {
				t.Fatal(err)
			}
			transcripttest.Conversation(tr, 3+seed, 500, 200, func(i int) string { return fmt.Sprintf("SEED-%d-TURN-%d-OUTPUT\n", seed, i) })
			if len(people) > 0 { // the attaches its attestation lists, as sealrund logs them
				from, _ := time.Parse(time.RFC3339Nano, p["timeline"].(map[string]any)["started"].(string))
				tr.Record(audit.KindAttach, audit.Attach{Time: from, Event: audit.AttachStart, User: people[seed-1] + " (uid 1001, pid 42), the person"})
				tr.Record(audit.KindAttach, audit.Attach{Time: from, Event: audit.AttachWatch, User: "carol (uid 1003, pid 43), a proctor"})
				tr.Record(audit.KindAttach, audit.Attach{Time: from, Event: audit.AttachUnwatch, User: "carol (uid 1003, pid 43), a proctor"})
			}
			head, n := tr.Head()
			tr.Close()
			p["audit"] = map[string]any{"head": head, "entries": n}
		}
		res := p["result"].(map[string]any)
		res["passed"], res["score"] = 70+5*seed, 70+5*seed
		pj, _ := json.Marshal(p)
		os.WriteFile(filepath.Join(f.dir, "pred.json"), pj, 0o600)
		r := sealrun(t, "attest", "sign", "--predicate", filepath.Join(f.dir, "pred.json"), "--key", "../../attest/testdata/ed25519.key", "--out", filepath.Join(rd, "result.att.json"),
			"--subject", "bundle.tar.gz=sha256:8694ff758e31db8ecef363d4bfd657ea3a361da85c37d5ba32c7edec188e664d", // the golden's promoted candidate (its file is not gathered here)
			"--subject", "report.json=sha256:"+sumOf(report))
		if r.code != 0 {
			t.Fatalf("sign: %+v", r)
		}
		env, _ := os.ReadFile(filepath.Join(rd, "result.att.json"))
		var e struct{ Payload string }
		json.Unmarshal(env, &e)
		payload, _ := base64.StdEncoding.DecodeString(e.Payload)
		sc := p["scaffold"].(map[string]any)
		l.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: id, Time: time.Now(), Track: track, Scaffold: fmt.Sprint(sc["name"], " ", sc["version"]), Agent: agent, Seed: int64(seed)})
		l.Append(&ledger.Entry{Kind: ledger.KindEnded, Run: id, Time: time.Now(), State: "graded", Attestation: digest.Hex(sumOf(string(payload)))})
	}
	f.ledger = filepath.Join(f.dir, "ledger-pub-host.jsonl")
	if r := sealrun(t, "--state-dir", state, "ledger", "export", "--out", f.ledger); r.code != 0 {
		t.Fatalf("ledger export: %+v", r)
	}
	return f
}

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// An operator publishes three gathered runs with their ledger; a reader checks the directory in
// one step. Every way of changing it afterwards (a file removed, added or edited, a run withheld
// with the lists redone) is rejected with the reason.
func TestPublishAndVerify(t *testing.T) {
	f := newPubFixture(t)
	pub := filepath.Join(f.dir, "pub")
	os.WriteFile(f.ledger+".tsr", []byte("a timestamp"), 0o644) // ledger export --tsa's: published beside the ledger
	r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--sign-key", "../../attest/testdata/ed25519.key", "--ledger", f.ledger, f.results)
	if r.code != 0 || !strings.Contains(r.stdout, "3 runs, 1 tracks, 1 keys, 1 ledgers") {
		t.Fatalf("publish: %+v", r)
	}
	for _, n := range []string{"VERIFY.md", "SHA256SUMS", "publication.json", "leaderboard.json", "leaderboard.md", "leaderboard.html", "keys/ed25519.pub", "ledgers/ledger-pub-host.jsonl", "ledgers/ledger-pub-host.jsonl.tsr", "runs/" + f.runs[0] + "/report.json"} {
		if _, err := os.Stat(filepath.Join(pub, n)); err != nil {
			t.Errorf("publication lacks %s", n)
		}
	}
	verifyMD := mustRead(t, filepath.Join(pub, "VERIFY.md"))
	for _, want := range []string{"sealrun verify-publication . --key", "sha256sum -c SHA256SUMS", "sealrun verify runs/" + f.runs[0] + "/result.att.json --key keys/ed25519.pub --report runs/" + f.runs[0] + "/report.json --track", "cosign verify-blob-attestation --key keys/ed25519.pub --signature runs/" + f.runs[2], "--tsa-chain TSA-CHAIN.pem"} {
		if !strings.Contains(verifyMD, want) {
			t.Errorf("VERIFY.md lacks %q:\n%s", want, verifyMD)
		}
	}
	// VERIFY.md's by-hand check of the signed list, run as written with jq, base64 and openssl,
	// in a copy: it verifies, and leaves nothing behind.
	_, rest, ok := strings.Cut(verifyMD, "## The list of files, signed")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	script, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("VERIFY.md has no by-hand check of the signed list:\n%s", verifyMD)
	}
	byHand := filepath.Join(f.dir, "by-hand")
	if out, err := execCommand("cp", "-a", pub, byHand); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = byHand
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Signature Verified Successfully") {
		t.Errorf("VERIFY.md's check of the signed list: %v\n%s\n%s", err, script, out)
	}
	if out, err := execCommand("diff", "-r", pub, byHand); err != nil {
		t.Errorf("VERIFY.md's check of the signed list left files behind: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(byHand, "extra.txt"), []byte("x\n"), 0o644)
	sums, _, _ := publish.SumTree(byHand)
	os.WriteFile(filepath.Join(byHand, "SHA256SUMS"), sums, 0o644)
	cmd = exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = byHand
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("VERIFY.md's check of the signed list passed a list written again:\n%s", out)
	}
	// Strict: the ledger's timestamp cannot be checked without the authority's chain, so the
	// publication is not valid until the reader gives it, or accepts it unchecked by name.
	r = sealrun(t, "verify-publication", pub, "--key", f.key)
	if r.code != 1 || !strings.Contains(r.stdout, "ledgers/ledger-pub-host.jsonl.tsr: unchecked: the timestamp of a ledger's head, checked only with the authority's chain (--tsa-chain)") {
		t.Fatalf("verify-publication with a timestamp it cannot check: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--key", f.key, "--tsa-chain", "../../attest/testdata/ed25519.pub"); r.code != 2 || !strings.Contains(r.stderr, "--tsa-chain") {
		t.Errorf("verify-publication with a chain that is not one: %+v", r)
	}
	// A real timestamp of the ledger's head, by sigstore's timestamp-authority: with its chain
	// the .tsr is checked and the publication VALID; the placeholder above is not one.
	tsaURL, tsaChain := testenv.TimestampAuthority(t)
	if r := sealrun(t, "verify-publication", pub, "--key", f.key, "--tsa-chain", tsaChain); r.code != 1 || !strings.Contains(r.stdout, "ledgers/ledger-pub-host.jsonl.tsr: ") {
		t.Errorf("verify-publication --tsa-chain of a .tsr that is no timestamp: %+v", r)
	}
	realTS := filepath.Join(f.dir, "pub-tsr")
	os.WriteFile(f.ledger+".tsr", ledgerHeadTimestamp(t, f.ledger, f.key, tsaURL, tsaChain), 0o644)
	if r := sealrun(t, "publish", "--out", realTS, "--key", f.key, "--sign-key", "../../attest/testdata/ed25519.key", "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish with a real timestamp: %+v", r)
	}
	if r := sealrun(t, "verify-publication", realTS, "--key", f.key, "--tsa-chain", tsaChain); r.code != 0 || !strings.Contains(r.stdout, "ledgers/ledger-pub-host.jsonl.tsr: a head of ledgers/ledger-pub-host.jsonl, timestamped by") || !strings.Contains(r.stdout, "publication: VALID\n") {
		t.Errorf("verify-publication --tsa-chain: %+v", r)
	}
	r = sealrun(t, "verify-publication", pub, "--key", f.key, "--allow-unchecked", "ledgers/*.tsr")
	if r.code != 0 || !strings.Contains(r.stdout, "publication: VALID, 1 file(s) unchecked (allowed with --allow-unchecked):\n  ledgers/ledger-pub-host.jsonl.tsr: the timestamp") || !strings.Contains(r.stdout, "80.0 ± 2.9  (3 valid seeds, 0 failed, 0 invalid; official)") || !strings.Contains(r.stdout, "every run they hold of these tracks ended and is published here") {
		t.Fatalf("verify-publication: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--key", f.key, "--allow-unchecked", "ledgers/[.tsr"); r.code != 2 || !strings.Contains(r.stderr, "not a pattern") {
		t.Errorf("a bad pattern: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--allow-unchecked", "ledgers/*.tsr"); r.code != 0 || !strings.Contains(r.stdout, "the publication's own keys/ are trusted") {
		t.Errorf("verify-publication without --key: %+v", r)
	}
	// The command in VERIFY.md that rebuilds the board gives leaderboard.json's bytes.
	r = sealrunIn(t, pub, "leaderboard", "--key", "keys/", "--suite", "exam", "--ledger", "ledgers/ledger-pub-host.jsonl", "runs/", "--format", "json")
	if r.code != 0 || r.stdout != mustRead(t, filepath.Join(pub, "leaderboard.json")) {
		t.Errorf("VERIFY.md's leaderboard command does not reproduce leaderboard.json: %+v", r)
	}
	// The board's verification as data: every check passed, the ledger's size given.
	r = sealrunIn(t, pub, "leaderboard", "--key", "keys/", "--ledger", "ledgers/ledger-pub-host.jsonl", "runs/", "--json")
	var res verify.Result
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.Kind != "board" || res.Verdict != "VALID" || res.Board == nil || len(res.Board.Ledgers) != 1 || res.Board.Ledgers[0].Size == 0 || res.Board.Attestations == 0 {
		t.Errorf("leaderboard --json: %v %+v", err, r)
	}
	for _, c := range []string{"ledgers", "attestations", "accounting"} {
		if got := res.Check(c); got == nil || got.Outcome != verify.Passed {
			t.Errorf("leaderboard --json: check %s: %+v", c, got)
		}
	}
	// A ledger cut short of the heads the attestations carry: the ledgers check fails, no board.
	cut := filepath.Join(f.dir, "cut-ledger.jsonl")
	lines := strings.SplitAfter(mustRead(t, filepath.Join(pub, "ledgers/ledger-pub-host.jsonl")), "\n")
	os.WriteFile(cut, []byte(strings.Join(lines[:len(lines)/2], "")), 0o644)
	r = sealrunIn(t, pub, "leaderboard", "--key", "keys/", "--ledger", cut, "runs/", "--json")
	res = verify.Result{}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 1 || err != nil || res.Valid || res.Reason != "ledgers" {
		t.Errorf("leaderboard --json with a cut ledger: %v %+v", err, r)
	}
	if r := sealrunIn(t, pub, "leaderboard", "--key", "keys/", "--ledger", cut, "runs/"); r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "ledgers            FAILED") || !strings.Contains(r.stderr, "board: NOT VALID") {
		t.Errorf("leaderboard with a cut ledger: %+v", r)
	}

	tamper := func(name string, change func(dir string)) string {
		dir := filepath.Join(f.dir, "t-"+name)
		if out, err := execCommand("cp", "-a", pub, dir); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		change(dir)
		return dir
	}
	relist := func(dir string) {
		sums, _, err := publish.SumTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644)
	}
	run0 := filepath.Join("runs", f.runs[0])
	cases := []struct {
		name   string
		change func(dir string)
		want   []string
	}{
		{"removed", func(d string) { os.Remove(filepath.Join(d, run0, "track.toml")) }, []string{run0 + "/track.toml: removed: SHA256SUMS lists it"}},
		{"added", func(d string) { os.WriteFile(filepath.Join(d, "runs", "extra.txt"), []byte("x"), 0o644) }, []string{"runs/extra.txt: added: not in SHA256SUMS"}},
		{"edited", func(d string) { os.WriteFile(filepath.Join(d, run0, "report.json"), []byte("{}\n"), 0o644) }, []string{run0 + "/report.json: edited: sha256"}},
		// The same edit with SHA256SUMS redone: the attestation's subject still catches it.
		{"edited and relisted", func(d string) { os.WriteFile(filepath.Join(d, run0, "report.json"), []byte("{}\n"), 0o644); relist(d) }, []string{run0 + ": the attestation or a file it binds does not verify"}},
		{"board edited and relisted", func(d string) {
			b, _ := os.ReadFile(filepath.Join(d, "leaderboard.md"))
			os.WriteFile(filepath.Join(d, "leaderboard.md"), []byte(strings.Replace(string(b), "80.0", "90.0", 1)), 0o644)
			relist(d)
		}, []string{"leaderboard.md: not what the attestations give"}},
		// A run withheld, every list redone: the ledger names it.
		{"withheld", func(d string) {
			os.RemoveAll(filepath.Join(d, "runs", f.runs[1]))
			var m publish.Publication
			json.Unmarshal([]byte(mustRead(t, filepath.Join(d, "publication.json"))), &m)
			m.Runs = []string{f.runs[0], f.runs[2]}
			mj, _ := json.MarshalIndent(m, "", "  ")
			os.WriteFile(filepath.Join(d, "publication.json"), append(mj, '\n'), 0o644)
			relist(d)
		}, []string{f.runs[1] + " (seed 2, graded on sealrun.ledger/pub-host): its attestation is not in the published set"}},
		{"untrusted key added", func(d string) {
			b, _ := os.ReadFile("../../attest/testdata/ecdsa.pub")
			os.WriteFile(filepath.Join(d, "keys", "other.pub"), b, 0o644)
			relist(d)
		}, []string{"keys/other.pub (key id"}},
		{"no sums", func(d string) { os.Remove(filepath.Join(d, "SHA256SUMS")) }, []string{"SHA256SUMS"}},
		{"hostile sums", func(d string) {
			os.WriteFile(filepath.Join(d, "SHA256SUMS"), []byte(strings.Repeat("ab", 32)+"  ../../etc/passwd\n"), 0o644)
		}, []string{`line 1: "../../etc/passwd" is not a relative path inside the publication`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := tamper(strings.ReplaceAll(c.name, " ", "-"), c.change)
			r := sealrun(t, "verify-publication", d, "--key", f.key)
			if r.code != 1 {
				t.Errorf("exit %d, want 1\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout+r.stderr, w) {
					t.Errorf("output lacks %q:\n%s%s", w, r.stdout, r.stderr)
				}
			}
		})
	}

	// publish itself refuses what a reader would reject.
	os.RemoveAll(filepath.Join(f.dir, "partial"))
	os.MkdirAll(filepath.Join(f.dir, "partial"), 0o755)
	execCommand("cp", "-a", filepath.Join(f.results, f.runs[0]), filepath.Join(f.dir, "partial"))
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"exists", []string{"publish", "--out", pub, "--key", f.key, f.results}, 2, "exists; a publication is written once"},
		{"no key", []string{"publish", "--out", filepath.Join(f.dir, "p2"), f.results}, 2, "--key"},
		{"no out", []string{"publish", "--key", f.key, f.results}, 2, "--out is required"},
		{"withheld at publish", []string{"publish", "--out", filepath.Join(f.dir, "p3"), "--key", f.key, "--ledger", f.ledger, filepath.Join(f.dir, "partial")}, 1, "its attestation is not in the published set"},
		{"wrong key", []string{"publish", "--out", filepath.Join(f.dir, "p4"), "--key", "../../attest/testdata/ecdsa.pub", f.results}, 1, "did not verify"},
		{"nothing", []string{"publish", "--out", filepath.Join(f.dir, "p5"), "--key", f.key, filepath.Join(f.dir, "state")}, 1, "no attestation found"},
		{"airs with ledger", []string{"publish", "--out", filepath.Join(f.dir, "p7"), "--key", f.key, "--suite", "airs", "--ledger", f.ledger, f.results}, 2, "--ledger is for the exam suite"},
		{"verify not a dir", []string{"verify-publication", f.ledger}, 2, "not a directory"},
		{"verify not a publication", []string{"verify-publication", f.results}, 1, "SHA256SUMS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.want) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant ~ %q", r.code, c.code, r.stdout, r.stderr, c.want)
			}
		})
	}
	// A refused publish leaves nothing behind.
	if left, _ := filepath.Glob(filepath.Join(f.dir, ".p*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	// Without a ledger the board is published, and a row short of seeds is named with them.
	r = sealrun(t, "publish", "--out", filepath.Join(f.dir, "p6"), "--key", f.key, filepath.Join(f.dir, "partial"))
	if r.code != 0 {
		t.Fatalf("publish one run: %+v", r)
	}
	if r := sealrun(t, "verify-publication", filepath.Join(f.dir, "p6"), "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "provisional: 1 of 3 seeds; seeds missing: 2, 3") || !strings.Contains(r.stdout, "a run the operator withheld cannot be detected") {
		t.Errorf("verify one run: %+v", r)
	}
}

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// Each run's trajectory travels with the publication and is checked against the signed audit
// log: every body present and intact, the transcript what they give, the page opening offline.
// A body changed by a byte, removed, or a transcript edited — each with SHA256SUMS redone — is
// caught and named. Withheld bodies (--redact) are not published, nor is their text in any
// transcript, and the publication still verifies, saying how many were withheld.
func TestPublishTrajectories(t *testing.T) {
	f := newPubFixtureWith(t)
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--sign-key", "../../attest/testdata/ed25519.key", "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish: %+v", r)
	}
	r := sealrun(t, "verify-publication", pub, "--key", f.key)
	if r.code != 0 || !strings.Contains(r.stdout, "runs/"+f.runs[0]+": 4 model exchanges, 4 calls; bodies 12 intact, 0 withheld, 0 missing, 0 altered; transcript.json is what they give, and transcript.html") ||
		!strings.Contains(r.stdout, "trajectories: 3 runs; bodies 45 intact") || !strings.Contains(r.stdout, "; trajectory.json (ATIF) is what the transcript gives") ||
		!strings.Contains(r.stdout, ": 3 samples, each exactly what its run's transcript gives") {
		t.Fatalf("verify-publication: %+v", r)
	}
	logs, _ := filepath.Glob(filepath.Join(pub, "inspect", "*.json"))
	if len(logs) != 1 {
		t.Fatalf("inspect logs %v", logs)
	}
	exporttest.InspectRules(t, []byte(mustRead(t, logs[0])))
	exporttest.ATIFRules(t, []byte(mustRead(t, filepath.Join(pub, "runs", f.runs[0], "trajectory.json"))))
	if !strings.Contains(mustRead(t, filepath.Join(pub, "leaderboard.html")), `href="runs/`+f.runs[0]+`/trajectory.json">ATIF</a>`) {
		t.Error("the published board does not link the runs' trajectory.json")
	}
	run0 := filepath.Join(pub, "runs", f.runs[0])
	if r := sealrun(t, "verify", filepath.Join(run0, "result.att.json"), "--key", f.key, "--transcript", run0); r.code != 0 || !strings.Contains(r.stdout, "transcript 4 model exchanges, 4 calls; bodies 12 intact") {
		t.Errorf("verify --transcript: %+v", r)
	}
	if !strings.Contains(mustRead(t, filepath.Join(pub, "VERIFY.md")), "--transcript runs/"+f.runs[0]) {
		t.Error("VERIFY.md does not check the transcripts")
	}
	relist := func(dir string) {
		sums, _, err := publish.SumTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644)
	}
	rel := "runs/" + f.runs[0]
	for _, c := range []struct {
		name   string
		change func(d string)
		want   string
	}{
		{"a call's output edited", func(d string) {
			p := filepath.Join(d, rel, "calls", "2.log")
			os.WriteFile(p, []byte(strings.Replace(mustRead(t, p), "OUTPUT", "OUTPUt", 1)), 0o644)
		}, rel + "/calls/2.log: altered"},
		{"a response edited inside its gzip", func(d string) {
			p := filepath.Join(d, rel, "gateway", "000002.response.gz")
			b := mustGunzip(t, p)
			mustGzip(t, p, []byte(strings.Replace(string(b), "Turn 2", "Turn 7", 1)))
		}, rel + "/gateway/000002.response.gz: altered"},
		{"a request removed", func(d string) { os.Remove(filepath.Join(d, rel, "gateway", "000003.request.json.gz")) }, rel + "/gateway/000003.request.json.gz: missing"},
		{"the transcript edited", func(d string) {
			p := filepath.Join(d, rel, "transcript.json")
			os.WriteFile(p, []byte(strings.Replace(mustRead(t, p), "SEED-1-TURN-2-OUTPUT", "SEED-1-TURN-2-CHANGED", 1)), 0o644)
		}, rel + "/transcript.json: not what the audit log and the bodies give"},
		{"the ATIF trajectory edited", func(d string) {
			p := filepath.Join(d, rel, "trajectory.json")
			os.WriteFile(p, []byte(strings.Replace(mustRead(t, p), "SEED-1-TURN-2-OUTPUT", "SEED-1-TURN-2-CHANGED", 1)), 0o644)
		}, rel + "/trajectory.json: the export differs from the one the run gives"},
		{"the Inspect log edited", func(d string) {
			ps, _ := filepath.Glob(filepath.Join(d, "inspect", "*.json"))
			os.WriteFile(ps[0], []byte(strings.Replace(mustRead(t, ps[0]), "SEED-1-TURN-2-OUTPUT", "SEED-1-TURN-2-CHANGED", 1)), 0o644)
		}, "run " + f.runs[0] + ": the export differs from the one the run gives"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(f.dir, "t-"+strings.ReplaceAll(c.name, " ", "-"))
			if out, err := execCommand("cp", "-a", pub, d); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			c.change(d)
			relist(d)
			r := sealrun(t, "verify-publication", d, "--key", f.key)
			if r.code != 1 || !strings.Contains(r.stdout, c.want) {
				t.Errorf("exit %d; want 1 and %q in:\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
		})
	}

	// Withheld: one exchange of run 1, the whole of run 2.
	red := filepath.Join(f.dir, "redacted")
	if r := sealrun(t, "publish", "--out", red, "--key", f.key, "--ledger", f.ledger, "--redact", f.runs[0]+":gateway-2,"+f.runs[0]+":call-1", "--redact", f.runs[1], f.results); r.code != 0 {
		t.Fatalf("publish --redact: %+v", r)
	}
	r = sealrun(t, "verify-publication", red, "--key", f.key)
	if r.code != 0 || !strings.Contains(r.stdout, "runs/"+f.runs[0]+": 4 model exchanges, 4 calls; bodies 9 intact, 3 withheld") ||
		!strings.Contains(r.stdout, "runs/"+f.runs[1]+": 5 model exchanges, 5 calls; bodies 0 intact, 15 withheld") {
		t.Fatalf("verify-publication of the redacted: %+v", r)
	}
	for _, gone := range []string{"runs/" + f.runs[0] + "/gateway/000002.request.json.gz", "runs/" + f.runs[0] + "/gateway/000002.response.gz", "runs/" + f.runs[0] + "/calls/1.log", "runs/" + f.runs[1] + "/gateway", "runs/" + f.runs[1] + "/calls"} {
		if _, err := os.Stat(filepath.Join(red, gone)); err == nil {
			t.Errorf("%s was published though withheld", gone)
		}
	}
	redLogs, _ := filepath.Glob(filepath.Join(red, "inspect", "*.json"))
	for _, p := range append([]string{filepath.Join(red, "runs", f.runs[1], "transcript.json"), filepath.Join(red, "runs", f.runs[1], "transcript.html"), filepath.Join(red, "runs", f.runs[1], "trajectory.json")}, redLogs...) {
		if b := mustRead(t, p); strings.Contains(b, "SEED-2-TURN") || strings.Contains(b, "Turn 1:") && !strings.Contains(p, "inspect") {
			t.Errorf("%s holds text of a withheld body", p)
		}
	}
	for _, c := range []struct {
		redact, want string
	}{
		{"r-nope", `no run "r-nope" among the inputs`},
		{f.runs[0] + ":gateway-x", "is not gateway-N"},
		{f.runs[0] + ":bodies-1", "is not gateway-N"},
		{f.runs[0] + ":call-01", "is not gateway-N"},
	} {
		if r := sealrun(t, "publish", "--out", filepath.Join(f.dir, "bad"), "--key", f.key, "--redact", c.redact, f.results); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("--redact %s: %+v; want exit 2 and %q", c.redact, r, c.want)
		}
	}
	// A results directory gathered without its bodies (an older sealrun) is refused by name.
	os.RemoveAll(filepath.Join(f.results, f.runs[2], "calls"))
	if r := sealrun(t, "publish", "--out", filepath.Join(f.dir, "nobodies"), "--key", f.key, f.results); r.code == 0 || !strings.Contains(r.stderr, "gather it again with this sealrun") || !strings.Contains(r.stderr, "--redact "+f.runs[2]) {
		t.Errorf("publish without the bodies: %+v", r)
	}
}

func mustGunzip(t *testing.T, p string) []byte {
	t.Helper()
	b, err := transcripttest.ReadGzip(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustGzip(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := transcripttest.WriteGzip(p, b); err != nil {
		t.Fatal(err)
	}
}

// People's runs published with --human-baseline: one row over every person, recorded in
// publication.json so that verify-publication and VERIFY.md's command rebuild the same board.
func TestPublishHumanBaseline(t *testing.T) {
	f := newPubFixtureWith(t, "alice", "alice", "bob")
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--ledger", f.ledger, "--human-baseline", f.results); r.code != 0 {
		t.Fatalf("publish --human-baseline: %+v", r)
	}
	board := mustRead(t, filepath.Join(pub, "leaderboard.md"))
	if !strings.Contains(board, "human · baseline: alice, bob") || strings.Contains(board, "human · alice") {
		t.Errorf("the board:\n%s", board)
	}
	if !strings.Contains(mustRead(t, filepath.Join(pub, "publication.json")), `"human_baseline": true`) {
		t.Error("publication.json does not say the board has a human baseline")
	}
	// Each run's row details say who it was for and who attached, as its attestation says.
	page := mustRead(t, filepath.Join(pub, "leaderboard.html"))
	for _, want := range []string{"for alice; attached: alice (person) 1×, carol (proctor) 1×", "for bob; attached: bob (person) 1×, carol (proctor) 1×"} {
		if !strings.Contains(page, want) {
			t.Errorf("leaderboard.html has no %q", want)
		}
	}
	br := browsertest.New(t)
	if err := br.Do(60*time.Second, chromedp.Navigate("file://"+filepath.Join(pub, "leaderboard.html")), chromedp.WaitVisible(chromedp.CSS(`details.runs`)), chromedp.Click(`details.runs summary`)); err != nil {
		t.Fatal(err)
	}
	if got, err := browsertest.Eval[string](br, `document.querySelector('details.runs').textContent`); err != nil || !strings.Contains(got, "for bob; attached: bob (person) 1×") {
		t.Errorf("the page shows %q (%v)", got, err)
	}
	br.Screenshot("human-baseline-board-people")
	if r := sealrun(t, "verify-publication", pub, "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID") {
		t.Fatalf("verify-publication: %+v", r)
	}
	r := sealrunIn(t, pub, "leaderboard", "--key", "keys/", "--suite", "exam", "--ledger", "ledgers/ledger-pub-host.jsonl", "--human-baseline", "runs/", "--format", "json")
	if r.code != 0 || r.stdout != mustRead(t, filepath.Join(pub, "leaderboard.json")) || !strings.Contains(mustRead(t, filepath.Join(pub, "VERIFY.md")), "--human-baseline") {
		t.Errorf("VERIFY.md's leaderboard command does not reproduce leaderboard.json: %+v", r)
	}
}

// ledgerHeadTimestamp is an RFC 3161 timestamp of the ledger export's signed head from the
// authority at url (what ledger export --tsa writes beside it).
func ledgerHeadTimestamp(t *testing.T, ledgerPath, key, url, chainPath string) []byte {
	t.Helper()
	ks, err := leaderboard.LoadKeys([]string{key})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := leaderboard.LoadLedgers([]string{ledgerPath}, ks)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := attest.LoadTSAChain(chainPath)
	if err != nil {
		t.Fatal(err)
	}
	der, err := (&attest.TSA{URL: url, Chain: chain}).Timestamp(context.Background(), http.DefaultClient, []byte(ls[0].Signed))
	if err != nil {
		t.Fatal(err)
	}
	return der
}
