package main

import (
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/publish/publishtest"
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
	if r := sealrun(t, "verify-publication", pub, "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID") || !strings.Contains(r.stdout, "amendments: 2 applied (1 invalidated, 0 legacy, 1 note(s); 0 signed by a reviewer") {
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
	if !strings.Contains(r.stdout, "an amendment, not applied: not valid (signature): no signature verifies with key") || strings.Contains(r.stdout, "signed by someone else") {
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

	// Its run's track neither given nor beside it: whether it needed a reviewer cannot be told,
	// so it is not applied.
	own := filepath.Join(f.results, noted, "track.toml")
	os.Rename(own, own+".away")
	r = sealrun(t, "leaderboard", "--key", f.key, f.results)
	if !strings.Contains(r.stdout, "an amendment, not applied: its run's track") || strings.Contains(r.stdout, noted+" (seed 1): note") {
		t.Errorf("an amendment whose run's track is not there: %+v", r)
	}
	os.Rename(own+".away", own)

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

// A track that asks for a reviewer: the reviewer's key made by openssl (someone else's tool),
// named in the track by the line openssl prints; the host's draft, signed by the reviewer with
// sealrun amend review (checked against the track), then by the host. Readers apply it; an
// amendment of such a run signed by the host alone, or by the host and a key the track does not
// name, is caught by the board, verify --transcript and verify-publication, and publish refuses
// it.
func TestReviewedAmendments(t *testing.T) {
	openssl := testenv.RequireTool(t, "openssl", "openssl")
	dir := t.TempDir()
	reviewerKey := filepath.Join(dir, "reviewer.key")
	if out, err := exec.Command(openssl, "genpkey", "-algorithm", "ed25519", "-out", reviewerKey).CombinedOutput(); err != nil {
		t.Fatalf("openssl genpkey: %v %s", err, out)
	}
	der, err := exec.Command(openssl, "pkey", "-in", reviewerKey, "-pubout", "-outform", "DER").Output()
	if err != nil {
		t.Fatalf("openssl pkey: %v", err)
	}
	ari, err := os.ReadFile("../../tracks/ari-v1.toml")
	if err != nil {
		t.Fatal(err)
	}
	trackTOML := append(ari, []byte("\n[amendments]\nreviewers = [\""+base64.StdEncoding.EncodeToString(der)+"\"]\n")...)
	f := newPubFixtureTrack(t, trackTOML)
	trackFile := filepath.Join(f.results, f.runs[0], "track.toml")
	state := filepath.Join(f.dir, "state")
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), "sealrun.ledger/pub-host", hostSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// The host's draft, as sealrund writes it for --draft.
	st := f.statement(t, f.runs[1], attest.Amendment{Action: ledger.ActionInvalidate, Reason: "the grader's bug of 2026-11-28 touched this run", Link: "https://example.org/reports/9"})
	draft, err := attest.AmendmentDraft(st)
	if err != nil {
		t.Fatal(err)
	}
	draftFile := filepath.Join(dir, "amend.json")
	os.WriteFile(draftFile, draft, 0o644)
	// The reviewer, with a key the track does not name: refused before anything is signed.
	if r := sealrun(t, "amend", "review", draftFile, "--key", "../../attest/testdata/ecdsa.key", "--track", trackFile); r.code != 1 || !strings.Contains(r.stderr, "is not one of the 1 reviewer(s) track ari-v1 names") {
		t.Errorf("review with a key the track does not name: %+v", r)
	}
	if r := sealrun(t, "amend", "review", draftFile, "--key", reviewerKey, "--track", "../../tracks/ari-v1.toml"); r.code != 1 || !strings.Contains(r.stderr, "give the run's track file") {
		t.Errorf("review against another track: %+v", r)
	}
	if b, _ := os.ReadFile(draftFile); string(b) != string(draft) {
		t.Fatal("a refused review wrote the draft")
	}
	r := sealrun(t, "amend", "review", draftFile, "--key", reviewerKey, "--track", trackFile)
	if r.code != 0 || !strings.Contains(r.stdout, "reason:  the grader's bug of 2026-11-28 touched this run") || !strings.Contains(r.stdout, "action:  invalidate") {
		t.Fatalf("review: %+v", r)
	}
	if r := sealrun(t, "amend", "review", draftFile, "--key", reviewerKey); r.code != 1 || !strings.Contains(r.stderr, "signed already") {
		t.Errorf("review twice: %+v", r)
	}
	if r := sealrun(t, "amend", "review", f.ledger, "--key", reviewerKey); r.code != 1 || !strings.Contains(r.stderr, "is not a drafted amendment") {
		t.Errorf("review of a file that is no draft: %+v", r)
	}
	// The host signs last, and appends it (as sealrund does for --reviewed).
	reviewed, err := os.ReadFile(draftFile)
	if err != nil {
		t.Fatal(err)
	}
	_, _, sigs, err := attest.ReadAmendmentEnvelope(reviewed)
	if err != nil || len(sigs) != 1 {
		t.Fatalf("the reviewed draft: %v", err)
	}
	f.write(t, l, st, hostSigner(t), sigs...)
	f.exportLedger(t)
	r = sealrun(t, "leaderboard", "--key", f.key, f.results, "--track", trackFile, "--ledger", f.ledger)
	if r.code != 0 || !strings.Contains(r.stdout, f.runs[1]+" (seed 2): invalidated 2026-12-01: the grader's bug") {
		t.Errorf("leaderboard with the reviewed amendment: %+v", r)
	}
	if r := sealrun(t, "verify", filepath.Join(f.results, f.runs[1], "result.att.json"), "--key", f.key, "--transcript", filepath.Join(f.results, f.runs[1])); r.code != 0 {
		t.Errorf("verify --transcript of a run amended with review: %+v", r)
	}
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID") || !strings.Contains(r.stdout, "amendments: 1 applied (1 invalidated, 0 legacy, 0 note(s); 1 signed by a reviewer the track names too)") {
		t.Fatalf("verify-publication: %+v", r)
	}
	if b := mustRead(t, filepath.Join(pub, "leaderboard.json")); !strings.Contains(b, `"reviewer": "`) {
		t.Errorf("leaderboard.json does not name the reviewer")
	}

	// The host alone, on a run of the track that asks for a reviewer; then the host and a key
	// the track does not name. Each in the ledger, so only the missing review can catch it.
	for _, c := range []struct {
		name, action string
		others       func(*attest.AmendmentStatement) []attest.AmendmentSignature
		want         string
	}{
		{"the host alone", ledger.ActionLegacy, func(*attest.AmendmentStatement) []attest.AmendmentSignature { return nil }, "asks for a reviewer's signature on an amendment beside the host's, and it has none"},
		{"a reviewer the track does not name", ledger.ActionNote, func(st *attest.AmendmentStatement) []attest.AmendmentSignature {
			ecdsa, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ecdsa.key", nil)
			if err != nil {
				t.Fatal(err)
			}
			d, _ := attest.AmendmentDraft(st)
			env, _, err := attest.ReviewAmendment(context.Background(), d, ecdsa)
			if err != nil {
				t.Fatal(err)
			}
			_, _, s, _ := attest.ReadAmendmentEnvelope(env)
			return s
		}, "the second signature verifies with none of the 1 reviewer key(s) track ari-v1 ("},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := f.statement(t, f.runs[2], attest.Amendment{Action: c.action, Reason: "graded before the fix: " + c.name})
			path := f.write(t, l, st, hostSigner(t), c.others(st)...)
			defer os.Remove(path)
			f.exportLedger(t)
			r := sealrun(t, "leaderboard", "--key", f.key, f.results, "--track", trackFile)
			if !strings.Contains(r.stdout, "an amendment, not applied: not valid") || !strings.Contains(r.stdout, c.want) || strings.Contains(r.stdout, "graded before the fix") {
				t.Errorf("leaderboard: %+v", r)
			}
			if r := sealrun(t, "verify", filepath.Join(f.results, f.runs[2], "result.att.json"), "--key", f.key, "--transcript", filepath.Join(f.results, f.runs[2])); r.code != 1 || !strings.Contains(r.stdout, c.want) {
				t.Errorf("verify --transcript: %+v", r)
			}
			if r := sealrun(t, "publish", "--out", filepath.Join(t.TempDir(), "pub"), "--key", f.key, "--ledger", f.ledger, f.results); r.code == 0 {
				t.Errorf("publish took it: %+v", r)
			}
			// Planted in the valid publication (its sums written again, as a forger would): caught.
			forged := filepath.Join(t.TempDir(), "pub")
			plant := publishtest.Tampering{Name: c.name, Change: func(dir string) error {
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				at := filepath.Join(dir, "runs", f.runs[2], "amendments", filepath.Base(path))
				os.MkdirAll(filepath.Dir(at), 0o755)
				return os.WriteFile(at, b, 0o644)
			}}
			if err := publishtest.Forge(pub, forged, plant); err != nil {
				t.Fatal(err)
			}
			if r := sealrun(t, "verify-publication", forged, "--key", f.key); r.code != 1 || !strings.Contains(r.stdout, c.want) {
				t.Errorf("verify-publication of a publication with it planted: %+v", r)
			}
		})
	}
}
