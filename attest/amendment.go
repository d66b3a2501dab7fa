package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
)

// PredicateTypeAmendmentV1 is the predicate of an amendment: what an operator found about a run
// after it ended, signed by the host (attest/PREDICATE.md, "Amendments"). A type of its own, so
// that no verifier takes an amendment for a run.
const PredicateTypeAmendmentV1 = "https://sealrun.dev/attestation/amendment/v1"

// SubjectAmendedRun names an amendment's one subject: the amended run's signed statement, by the
// SHA-256 of its DSSE payload (what the ledger's ended entry holds).
const SubjectAmendedRun = "sealed-run statement"

// MaxAmendmentBytes bounds an amendment's envelope.
const MaxAmendmentBytes = 64 << 10

// AmendmentStatement is an in-toto Statement v1 with an amendment predicate.
type AmendmentStatement struct {
	Type          string     `json:"_type"`
	Subject       []Subject  `json:"subject"`
	PredicateType string     `json:"predicateType"`
	Predicate     *Amendment `json:"predicate"`
}

// Amendment is what an amendment says of one run. Its fields are the ledger entry's
// (ledger.KindAmended) and what a reader needs beside them to find the run's row.
type Amendment struct {
	Run    string    `json:"run"`
	Action string    `json:"action"` // ledger.ActionInvalidate, ActionLegacy or ActionNote
	Reason string    `json:"reason"`
	Link   string    `json:"link,omitempty"`
	Time   time.Time `json:"time"`
	// The amended run's row, as its attestation names it.
	Track struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"track"`
	Agent string `json:"agent"`
	// Ledger is the origin of the host ledger the amendment is appended to.
	Ledger string `json:"ledger"`
}

// NewAmendment makes the statement of an amendment of the run whose attestation statement
// (verified) is run and whose payload's SHA-256 is runDigest; a.Ledger, when empty, is the
// origin of the ledger the run's attestation names.
func NewAmendment(run *Statement, runDigest digest.Hex, a Amendment) (*AmendmentStatement, error) {
	if run == nil || run.Predicate == nil {
		return nil, fmt.Errorf("amend: no run statement")
	}
	p := run.Predicate
	a.Track.ID, a.Track.Name, a.Track.Version = p.Track.ID, p.Track.Name, p.Track.Version
	a.Agent = p.LedgerAgent()
	if a.Ledger == "" && p.Ledger != nil {
		a.Ledger = p.Ledger.Origin
	}
	st := &AmendmentStatement{Type: StatementType, Subject: []Subject{NewSubject(SubjectAmendedRun, string(runDigest))}, PredicateType: PredicateTypeAmendmentV1, Predicate: &a}
	if err := st.Check(); err != nil {
		return nil, err
	}
	return st, nil
}

// Amended is the digest of the run statement st amends (its one subject's).
func (st *AmendmentStatement) Amended() digest.Hex {
	if len(st.Subject) != 1 {
		return ""
	}
	return digest.Hex(st.Subject[0].Digest["sha256"])
}

// Entry is the ledger entry of the amendment whose signed payload has the SHA-256 payloadDigest.
func (st *AmendmentStatement) Entry(payloadDigest digest.Hex) *ledger.Entry {
	a := st.Predicate
	return &ledger.Entry{Kind: ledger.KindAmended, Run: a.Run, Time: a.Time.UTC(), Action: a.Action, Reason: a.Reason, Link: a.Link,
		Attestation: st.Amended(), Amendment: payloadDigest}
}

// Check says what is wrong with the statement, naming the field: the same rules as its ledger
// entry's, and a row a reader can find.
func (st *AmendmentStatement) Check() error {
	switch {
	case st.Type != StatementType:
		return fmt.Errorf("_type: %q; expected %s", st.Type, StatementType)
	case st.PredicateType != PredicateTypeAmendmentV1:
		return fmt.Errorf("predicateType: %q; expected %s", st.PredicateType, PredicateTypeAmendmentV1)
	case st.Predicate == nil:
		return fmt.Errorf("predicate: missing")
	case len(st.Subject) != 1 || st.Subject[0].Name != SubjectAmendedRun || len(st.Subject[0].Digest) != 1 || !digest.IsHex(st.Subject[0].Digest["sha256"]):
		return fmt.Errorf("subject: an amendment has one subject, %q, by its sha256 (64 lowercase hex)", SubjectAmendedRun)
	case st.Predicate.Time.IsZero():
		return fmt.Errorf("predicate.time: missing")
	case !digest.IsHex(st.Predicate.Track.ID):
		return fmt.Errorf("predicate.track.id: %q is not a track id", st.Predicate.Track.ID)
	case st.Predicate.Agent == "" || st.Predicate.Ledger == "":
		return fmt.Errorf("predicate: names the run's agent and the ledger it is appended to")
	}
	if err := st.Entry(digest.Hex(st.Subject[0].Digest["sha256"])).Check(); err != nil {
		return fmt.Errorf("predicate.%w", err)
	}
	return nil
}

// Canonical is the statement's RFC 8785 canonical JSON: the payload that is signed.
func (st *AmendmentStatement) Canonical() ([]byte, error) {
	plain, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return jsoncanonicalizer.Transform(plain)
}

// SignAmendment checks the statement and signs its canonical JSON in a DSSE envelope, as Sign
// does a run's. It returns the envelope and the SHA-256 of its payload (the ledger entry's
// amendment digest).
func SignAmendment(ctx context.Context, st *AmendmentStatement, signer signature.Signer) ([]byte, digest.Hex, error) {
	if err := st.Check(); err != nil {
		return nil, "", fmt.Errorf("amendment: %w", err)
	}
	payload, err := st.Canonical()
	if err != nil {
		return nil, "", fmt.Errorf("amendment: %w", err)
	}
	env, err := dsse.WrapSigner(signer, PayloadType).SignMessage(bytes.NewReader(payload), options.WithContext(ctx))
	if err != nil {
		return nil, "", fmt.Errorf("sign amendment: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, env, "", "  "); err != nil {
		return nil, "", err
	}
	out.WriteByte('\n')
	return out.Bytes(), digest.SumHex(payload), nil
}

// VerifiedAmendment is an amendment whose signature verified.
type VerifiedAmendment struct {
	Statement *AmendmentStatement
	Payload   []byte
	Digest    digest.Hex // SHA-256 of Payload: what its ledger entry names
	KeyID     string
}

// VerifyAmendment checks an amendment's envelope with v, as Verify checks a run's (one
// signature over the DSSE PAE, the in-toto payload type), and its statement strictly: unknown
// fields and duplicate keys are refused, and the predicate holds to its ledger entry's rules.
func VerifyAmendment(env []byte, v signature.Verifier) (*VerifiedAmendment, error) {
	var checks Verified
	payload, err := verifyEnvelopeOf(env, PayloadType, MaxAmendmentBytes, v, &checks)
	if err != nil {
		return nil, err
	}
	st, err := decodeAmendment(payload)
	if err != nil {
		return nil, err
	}
	return &VerifiedAmendment{Statement: st, Payload: payload, Digest: digest.SumHex(payload), KeyID: checks.KeyID}, nil
}

// decodeAmendment reads an amendment's statement from its payload strictly (unknown fields and
// duplicate keys refused) and checks it.
func decodeAmendment(payload []byte) (*AmendmentStatement, error) {
	var st AmendmentStatement
	if err := strictDecode(payload, &st, true); err != nil {
		return nil, failf(ReasonStatementType, "the amendment's statement: %v", err)
	}
	if err := st.Check(); err != nil {
		return nil, failf(ReasonPredicate, "the amendment's statement: %v", err)
	}
	return &st, nil
}

// ReadAmendmentUnverified reads an amendment's statement without checking its signature: for
// showing what a run's amendments say (its transcript), never for judging them. VerifyAmendment
// is the check.
func ReadAmendmentUnverified(env []byte) (*AmendmentStatement, digest.Hex, error) {
	if len(env) > MaxAmendmentBytes {
		return nil, "", failf(ReasonEnvelopeSize, "envelope is %d bytes; at most %d are accepted", len(env), MaxAmendmentBytes)
	}
	var e envelope
	if err := strictDecode(env, &e, false); err != nil || e.Payload == nil {
		return nil, "", failf(ReasonEnvelopeSyntax, "not a DSSE envelope: %v", err)
	}
	payload, err := canonicalBase64(*e.Payload)
	if err != nil {
		return nil, "", failf(ReasonEnvelopeSyntax, "payload: %v", err)
	}
	st, err := decodeAmendment(payload)
	if err != nil {
		return nil, "", err
	}
	return st, digest.SumHex(payload), nil
}
