package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/ledger"
)

// Amendments as readers meet them: the board applies them (the invalidated run out of the mean,
// listed with its reason and link; the note shown), the ledger accounts for them, the
// publication verifies with them, and the run's transcript, page and ATIF export say them. An
// amendment by a key the reader does not trust is shown, not applied; one the ledger lacks
// leaves its row not accounted for; two that conflict are refused by publish.
func TestAmendedPublication(t *testing.T) {
	f := newAmendedPubFixture(t)
	noted, invalidated, plain := f.runs[0], f.runs[1], f.runs[2]
	r := sealrun(t, "leaderboard", "--key", f.key, f.results, "--ledger", f.ledger)
	for _, want := range []string{
		invalidated + " (seed 2): invalidated 2026-12-01: the host's memory failed memtest86+ a week after the run (https://status.example.org/incident/42)",
		noted + " (seed 1): note 2026-12-01: a contamination report against this model is under review (https://example.org/reports/7)",
		"every run accounted for (3 in sealrun.ledger/pub-host)",
		"2/",                        // two valid seeds: the invalidated one left the mean
		"Amendments (sealrun amend", // the rule
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("leaderboard: exit %d, no %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	// A run's own amendments, in its gathered directory: verify --transcript checks them.
	if r := sealrun(t, "verify", filepath.Join(f.results, invalidated, "result.att.json"), "--key", f.key, "--transcript", filepath.Join(f.results, invalidated)); r.code != 0 {
		t.Errorf("verify --transcript of an amended run: %+v", r)
	}
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID") {
		t.Fatalf("verify-publication: %+v", r)
	}
	board := mustRead(t, filepath.Join(pub, "leaderboard.json"))
	for _, want := range []string{`"reason": "invalidated by amendment: the host's memory failed`, `"action": "note"`, `"valid_seeds": 2`} {
		if !strings.Contains(board, want) {
			t.Errorf("leaderboard.json lacks %q", want)
		}
	}
	for file, want := range map[string]string{
		"runs/" + noted + "/transcript.json":       `"amendments":[{"time":"2026-12-01T09:`,
		"runs/" + noted + "/transcript.html":       "Amended after it ended",
		"runs/" + invalidated + "/transcript.html": "invalidated: out of every mean",
		"runs/" + noted + "/trajectory.json":       `"amendments"`,
		"leaderboard.html":                         "amended: note 2026-12-01",
	} {
		if b := mustRead(t, filepath.Join(pub, file)); !strings.Contains(b, want) {
			t.Errorf("%s lacks %q", file, want)
		}
	}
	if b := mustRead(t, filepath.Join(pub, "runs", plain, "transcript.json")); strings.Contains(b, "amendments") {
		t.Errorf("a run never amended has amendments in its transcript")
	}

	// A ledger whose amended entry names the signed amendment's digest but says another reason:
	// the row is not accounted for.
	v, _, _ := attest.LoadVerifier(f.key)
	lf, err := os.Open(f.ledger)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := ledger.Read(lf, f.ledger, []signature.Verifier{v})
	lf.Close()
	if err != nil {
		t.Fatal(err)
	}
	forged, err := ledger.Open(filepath.Join(t.TempDir(), "ledger.jsonl"), orig.Origin, hostSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range orig.Entries {
		if e.Kind == ledger.KindAmended && e.Action == ledger.ActionInvalidate {
			e.Reason = "a routine check"
		}
		if _, err := forged.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	forgedFile := filepath.Join(t.TempDir(), "forged.jsonl")
	out, _ := os.Create(forgedFile)
	forged.Export(out)
	out.Close()
	forged.Close()
	if r := sealrun(t, "leaderboard", "--key", f.key, f.results, "--ledger", forgedFile); r.code != 1 || !strings.Contains(r.stdout, `the ledger's entry of amendment sha256 `) || !strings.Contains(r.stdout, `says invalidate: "a routine check", the signed amendment invalidate: "the host's memory`) {
		t.Errorf("a ledger entry that says another reason than its amendment: %+v", r)
	}

	// By another key (the ECDSA test key, not trusted): shown among the rejected, not applied.
	ecdsa, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ecdsa.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	stranger := f.amend(t, nil, ecdsa, plain, attest.Amendment{Action: ledger.ActionInvalidate, Reason: "signed by someone else"})
	r = sealrun(t, "leaderboard", "--key", f.key, f.results)
	if !strings.Contains(r.stdout, "an amendment, not applied: not valid (signature): the signature does not verify") || strings.Contains(r.stdout, "signed by someone else") {
		t.Errorf("an amendment by an untrusted key: %+v", r)
	}
	if r := sealrun(t, "publish", "--out", pub+"-2", "--key", f.key, f.results); r.code == 0 || !strings.Contains(r.stderr, "did not verify") {
		t.Errorf("publish with an amendment no key given verifies: %+v", r)
	}
	// A reader handed the run's directory with it: verify --transcript names the file.
	if r := sealrun(t, "verify", filepath.Join(f.results, plain, "result.att.json"), "--key", f.key, "--transcript", filepath.Join(f.results, plain)); r.code != 1 || !strings.Contains(r.stdout, "amendments/"+filepath.Base(stranger)+": an amendment that does not verify with the key") {
		t.Errorf("verify --transcript of a run beside an amendment by another key: %+v", r)
	}
	os.Remove(stranger)

	// By the host's key but never in its ledger: the row is not accounted for.
	unledgered := f.amend(t, nil, hostSigner(t), plain, attest.Amendment{Action: ledger.ActionNote, Reason: "added after the ledger was exported"})
	r = sealrun(t, "leaderboard", "--key", f.key, f.results, "--ledger", f.ledger)
	if r.code != 1 || !strings.Contains(r.stdout, "not in any given ledger: the amendment of "+plain+" (note, sha256 ") {
		t.Errorf("an amendment no ledger holds: %+v", r)
	}
	os.Remove(unledgered)

	// Two that conflict (a legacy label beside the invalidation): the board applies neither, and
	// publish refuses them.
	f.amend(t, nil, hostSigner(t), invalidated, attest.Amendment{Action: ledger.ActionLegacy, Reason: "graded under ari 0.9's rules"})
	r = sealrun(t, "leaderboard", "--key", f.key, f.results)
	if !strings.Contains(r.stdout, "run "+invalidated+" has 2 amendments that invalidate it or label it legacy; a run takes one: none is applied") {
		t.Errorf("two amendments that conflict: %+v", r)
	}
	if r := sealrun(t, "publish", "--out", pub+"-3", "--key", f.key, f.results); r.code == 0 || !strings.Contains(r.stderr, "amendment(s) do not apply") {
		t.Errorf("publish with conflicting amendments: %+v", r)
	}
}

// hostSigner is the host's key of the fixtures (the Ed25519 test key).
func hostSigner(t *testing.T) signature.Signer {
	t.Helper()
	s, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
