package attest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

func amendmentFixture(t testing.TB, action string) (*AmendmentStatement, digest.Hex) {
	t.Helper()
	run, _ := fixture(t, 3, 10)
	run.Predicate.Ledger = &ledger.Ref{Origin: "sealrun.ledger/host-a"}
	runDigest := digest.Hex(strings.Repeat("ab", 32))
	st, err := NewAmendment(run, runDigest, Amendment{Run: "r-20261124-031500-a1b2c3", Action: action, Reason: "the host's memory failed memtest86+ on 2026-11-30",
		Link: "https://status.example.org/incident/42", Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return st, runDigest
}

// An amendment signed with the host key verifies with it, and its ledger entry is the one the
// ledger holds; edited, re-pointed, or signed with another key, it does not; an amendment is no
// run attestation to a run's verifier.
func TestAmendmentSignVerify(t *testing.T) {
	st, runDigest := amendmentFixture(t, ledger.ActionInvalidate)
	env, sum, err := SignAmendment(context.Background(), st, signer(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyAmendment(env, verifier(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != sum || got.Statement.Amended() != runDigest || got.Statement.Predicate.Track.ID != st.Predicate.Track.ID || got.Statement.Predicate.Agent != "example-model-2026-10@high" {
		t.Fatalf("verified: %+v", got)
	}
	e := got.Statement.Entry(got.Digest)
	if err := e.Check(); err != nil || e.Kind != ledger.KindAmended || e.Attestation != runDigest || e.Amendment != sum {
		t.Fatalf("its ledger entry: %+v %v", e, err)
	}
	// The payload, edited and re-encoded under the same signature.
	var envelope map[string]any
	json.Unmarshal(env, &envelope)
	payload, _ := base64.StdEncoding.DecodeString(envelope["payload"].(string))
	for name, edit := range map[string][2]string{
		"reason edited":   {"memtest86+", "nothing"},
		"re-pointed":      {strings.Repeat("ab", 32), strings.Repeat("cd", 32)},
		"action softened": {`"action":"invalidate"`, `"action":"note"`},
	} {
		if !bytes.Contains(payload, []byte(edit[0])) {
			t.Fatalf("%s: the payload has no %q", name, edit[0])
		}
		envelope["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(edit[0]), []byte(edit[1]), 1))
		forged, _ := json.Marshal(envelope)
		if _, err := VerifyAmendment(forged, verifier(t, "ed25519")); reason(t, err) != ReasonSignature {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := VerifyAmendment(env, verifier(t, "ecdsa")); reason(t, err) != ReasonSignature {
		t.Errorf("another key: %v", err)
	}
	if _, err := Verify(env, verifier(t, "ed25519")); err == nil || reason(t, err) != ReasonPredicateType {
		t.Errorf("an amendment given to a run's verifier: %v", err)
	}
	if _, err := VerifyAmendment(bytes.Repeat([]byte(" "), MaxAmendmentBytes+1), verifier(t, "ed25519")); reason(t, err) != ReasonEnvelopeSize {
		t.Errorf("oversized: %v", err)
	}
}

// What an amendment's statement may not be, each refused before it is signed and, signed
// anyway, when it is verified; the field named.
func TestAmendmentRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*AmendmentStatement)
		want string
	}{
		{"no reason", func(s *AmendmentStatement) { s.Predicate.Reason = "" }, "predicate.reason: an amendment says why"},
		{"a reason over its bound", func(s *AmendmentStatement) { s.Predicate.Reason = strings.Repeat("x", 1025) }, "predicate.reason: is longer than 1024 bytes"},
		{"an unknown action", func(s *AmendmentStatement) { s.Predicate.Action = "erase" }, `predicate.action: "erase"`},
		{"a link that is a script", func(s *AmendmentStatement) { s.Predicate.Link = "javascript:alert(1)" }, "predicate.link"},
		{"two subjects", func(s *AmendmentStatement) { s.Subject = append(s.Subject, s.Subject[0]) }, "subject: an amendment has one subject"},
		{"another predicate type", func(s *AmendmentStatement) { s.PredicateType = PredicateTypeV1 }, "predicateType"},
		{"no time", func(s *AmendmentStatement) { s.Predicate.Time = time.Time{} }, "predicate.time: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, _ := amendmentFixture(t, ledger.ActionInvalidate)
			c.edit(st)
			if _, _, err := SignAmendment(context.Background(), st, signer(t, "ed25519")); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("sign: %v; want %q", err, c.want)
			}
		})
	}
	// Unknown fields and duplicate keys in a signed payload: refused.
	st, _ := amendmentFixture(t, ledger.ActionNote)
	for name, payload := range map[string]func([]byte) []byte{
		"unknown field": func(p []byte) []byte { return bytes.Replace(p, []byte(`{"_type"`), []byte(`{"extra":1,"_type"`), 1) },
		"duplicate keys": func(p []byte) []byte {
			return bytes.Replace(p, []byte(`"action":"note"`), []byte(`"action":"note","action":"invalidate"`), 1)
		},
	} {
		p, _ := st.Canonical()
		env := resign(t, PayloadType, payload(p))
		if _, err := VerifyAmendment(env, verifier(t, "ed25519")); reason(t, err) != ReasonStatementType {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// reviewedTrack is a track of the fixture's id whose amendments need one of the given keys
// (testdata's, by name) beside the host's.
func reviewedTrack(t *testing.T, st *AmendmentStatement, keys ...string) *policy.Track {
	t.Helper()
	tr := &policy.Track{ID: st.Predicate.Track.ID, Name: st.Predicate.Track.Name}
	if len(keys) == 0 {
		return tr
	}
	tr.Amendments = &policy.Amendments{}
	for _, k := range keys {
		pub, err := verifier(t, k).PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		r, err := policy.ParseReviewer(base64.StdEncoding.EncodeToString(der))
		if err != nil {
			t.Fatal(err)
		}
		tr.Amendments.Reviewers = append(tr.Amendments.Reviewers, r)
	}
	return tr
}

// The two-key flow: the host's draft, unsigned; the reviewer's signature; the host's last. A
// track that names the reviewer takes it, and refuses an amendment without it, with another
// reviewer's, or with the host's key counted twice; a track that names none refuses a second
// signature; a draft is never an amendment.
func TestAmendmentReviewed(t *testing.T) {
	ctx := context.Background()
	st, _ := amendmentFixture(t, ledger.ActionInvalidate)
	draft, err := AmendmentDraft(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyAmendment(draft, verifier(t, "ed25519")); reason(t, err) != ReasonSignatureCount {
		t.Errorf("a draft: %v", err)
	}
	reviewed, got, err := ReviewAmendment(ctx, draft, signer(t, "ecdsa"))
	if err != nil || got.Predicate.Reason != st.Predicate.Reason {
		t.Fatalf("review: %v %+v", err, got)
	}
	if _, _, err := ReviewAmendment(ctx, reviewed, signer(t, "ecdsa")); err == nil || !strings.Contains(err.Error(), "signed already") {
		t.Errorf("reviewed twice: %v", err)
	}
	_, _, sigs, err := ReadAmendmentEnvelope(reviewed)
	if err != nil || len(sigs) != 1 {
		t.Fatalf("the reviewed draft: %v %d", err, len(sigs))
	}
	env, sum, err := SignAmendment(ctx, st, signer(t, "ed25519"), sigs...)
	if err != nil {
		t.Fatal(err)
	}
	va, err := VerifyAmendment(env, verifier(t, "ed25519"))
	if err != nil || va.Digest != sum {
		t.Fatalf("verify: %v", err)
	}
	if err := va.CheckReviewer(reviewedTrack(t, st, "ed25519", "ecdsa")); err != nil || va.Reviewer == "" {
		t.Errorf("the track's reviewer: %v %q", err, va.Reviewer)
	}
	if err := va.CheckReviewer(reviewedTrack(t, st)); reason(t, err) != ReasonSignatureCount {
		t.Errorf("a track naming no reviewer: %v", err)
	}
	// The host's key alone, where the track names the host's key as a reviewer too: one
	// signature is not two.
	alone, _, err := SignAmendment(ctx, st, signer(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	va, err = VerifyAmendment(alone, verifier(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	if err := va.CheckReviewer(reviewedTrack(t, st, "ed25519")); reason(t, err) != ReasonSignatureCount {
		t.Errorf("no reviewer's signature: %v", err)
	}
	// The host signing twice: the second is not a reviewer's (the track names ecdsa).
	hostSig, err := signAmendmentPayload(ctx, va.Payload, signer(t, "ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	twice, _, _ := SignAmendment(ctx, st, signer(t, "ed25519"), hostSig)
	if va, err = VerifyAmendment(twice, verifier(t, "ed25519")); err != nil {
		t.Fatal(err)
	}
	if err := va.CheckReviewer(reviewedTrack(t, st, "ecdsa")); reason(t, err) != ReasonSignature {
		t.Errorf("the host's signature twice: %v", err)
	}
	// ... where the track names the host's key a reviewer too: still not two people.
	if err := va.CheckReviewer(reviewedTrack(t, st, "ed25519")); reason(t, err) != ReasonSignature {
		t.Errorf("the host's signature twice, its key a reviewer: %v", err)
	}
	// Another track's file: refused, not judged.
	if err := va.CheckReviewer(&policy.Track{ID: strings.Repeat("0", 64)}); reason(t, err) != ReasonTrack {
		t.Errorf("another track: %v", err)
	}
	// Three signatures: refused before any is checked.
	three, _, _ := SignAmendment(ctx, st, signer(t, "ed25519"), sigs[0], sigs[0])
	if _, err := VerifyAmendment(three, verifier(t, "ed25519")); reason(t, err) != ReasonSignatureCount {
		t.Errorf("three signatures: %v", err)
	}
	// The reviewer's signature over another payload (the reason edited after review).
	other := *st
	p := *st.Predicate
	p.Reason = "a milder reason"
	other.Predicate = &p
	env2, _, _ := SignAmendment(ctx, &other, signer(t, "ed25519"), sigs...)
	if va, err = VerifyAmendment(env2, verifier(t, "ed25519")); err != nil {
		t.Fatal(err)
	}
	if err := va.CheckReviewer(reviewedTrack(t, st, "ecdsa")); reason(t, err) != ReasonSignature {
		t.Errorf("the reason edited after review: %v", err)
	}
}
