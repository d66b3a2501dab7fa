package attest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
)

func amendmentFixture(t *testing.T, action string) (*AmendmentStatement, digest.Hex) {
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
