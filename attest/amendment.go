package attest

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
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
// does a run's, beside the signatures of others already made over the same payload (a
// reviewer's, ReviewAmendment). It returns the envelope and the SHA-256 of its payload (the
// ledger entry's amendment digest).
func SignAmendment(ctx context.Context, st *AmendmentStatement, signer signature.Signer, others ...AmendmentSignature) ([]byte, digest.Hex, error) {
	if err := st.Check(); err != nil {
		return nil, "", fmt.Errorf("amendment: %w", err)
	}
	payload, err := st.Canonical()
	if err != nil {
		return nil, "", fmt.Errorf("amendment: %w", err)
	}
	sig, err := signAmendmentPayload(ctx, payload, signer)
	if err != nil {
		return nil, "", fmt.Errorf("sign amendment: %w", err)
	}
	return amendmentEnvelope(payload, append([]AmendmentSignature{sig}, others...)), digest.SumHex(payload), nil
}

// AmendmentSignature is one signature of an amendment's envelope.
type AmendmentSignature struct {
	KeyID string // a hint only (the signer's key id): never part of a verdict
	Sig   []byte
}

// MaxAmendmentSignatures: the host's, and one reviewer's where the run's track asks for one.
const MaxAmendmentSignatures = 2

// signAmendmentPayload signs the DSSE pre-authentication encoding of an amendment's payload.
func signAmendmentPayload(ctx context.Context, payload []byte, signer signature.Signer) (AmendmentSignature, error) {
	pub, err := signer.PublicKey()
	if err != nil {
		return AmendmentSignature{}, err
	}
	id, err := KeyID(pub)
	if err != nil {
		return AmendmentSignature{}, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(appendPAE(nil, PayloadType, payload)), options.WithContext(ctx))
	if err != nil {
		return AmendmentSignature{}, err
	}
	return AmendmentSignature{KeyID: id, Sig: sig}, nil
}

// amendmentEnvelope writes an amendment's DSSE envelope, indented, with its signatures in order
// (none: a draft for a reviewer).
func amendmentEnvelope(payload []byte, sigs []AmendmentSignature) []byte {
	type sigJSON struct {
		KeyID string `json:"keyid"`
		Sig   string `json:"sig"`
	}
	e := struct {
		PayloadType string    `json:"payloadType"`
		Payload     string    `json:"payload"`
		Signatures  []sigJSON `json:"signatures"`
	}{PayloadType, base64.StdEncoding.EncodeToString(payload), []sigJSON{}}
	for _, s := range sigs {
		e.Signatures = append(e.Signatures, sigJSON{s.KeyID, base64.StdEncoding.EncodeToString(s.Sig)})
	}
	out, _ := json.MarshalIndent(e, "", "  ")
	return append(out, '\n')
}

// AmendmentDraft is the envelope of st with no signature: what the host hands a reviewer where
// the run's track asks for one (ReviewAmendment signs it; the host signs last, when it appends
// the entry).
func AmendmentDraft(st *AmendmentStatement) ([]byte, error) {
	if err := st.Check(); err != nil {
		return nil, fmt.Errorf("amendment: %w", err)
	}
	payload, err := st.Canonical()
	if err != nil {
		return nil, err
	}
	return amendmentEnvelope(payload, nil), nil
}

// ReadAmendmentEnvelope reads an amendment's envelope without verifying any signature: its
// statement (strictly decoded and checked), its payload and its signatures, at most
// MaxAmendmentSignatures of them.
func ReadAmendmentEnvelope(env []byte) (*AmendmentStatement, []byte, []AmendmentSignature, error) {
	e, payload, raw, err := readEnvelope(env, MaxAmendmentBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	switch {
	case *e.PayloadType != PayloadType:
		return nil, nil, nil, failf(ReasonPayloadType, "payloadType is %q; expected %q", *e.PayloadType, PayloadType)
	case len(raw) > MaxAmendmentSignatures:
		return nil, nil, nil, failf(ReasonSignatureCount, "the envelope has %d signatures; an amendment has the host's and at most one reviewer's", len(raw))
	}
	sigs := make([]AmendmentSignature, len(raw))
	for i, sig := range raw {
		sigs[i] = AmendmentSignature{KeyID: e.Signatures[i].KeyID, Sig: sig}
	}
	st, err := decodeAmendment(payload)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, payload, sigs, nil
}

// ReviewAmendment adds the reviewer's signature to an amendment's envelope (a host's draft,
// AmendmentDraft): it reads the statement the reviewer signs, and refuses an envelope the
// reviewer's key has signed already. It returns the envelope and the statement, to be shown to
// the reviewer.
func ReviewAmendment(ctx context.Context, env []byte, reviewer signature.Signer) ([]byte, *AmendmentStatement, error) {
	st, payload, sigs, err := ReadAmendmentEnvelope(env)
	if err != nil {
		return nil, nil, err
	}
	if len(sigs) != 0 {
		return nil, nil, fmt.Errorf("the envelope is signed already (%d signature(s)); a reviewer signs the host's draft (sealrun amend RUN ... --draft FILE), before the host", len(sigs))
	}
	sig, err := signAmendmentPayload(ctx, payload, reviewer)
	if err != nil {
		return nil, nil, fmt.Errorf("sign amendment: %w", err)
	}
	return amendmentEnvelope(payload, []AmendmentSignature{sig}), st, nil
}

// VerifiedAmendment is an amendment whose host signature verified.
type VerifiedAmendment struct {
	Statement *AmendmentStatement
	Payload   []byte
	Digest    digest.Hex // SHA-256 of Payload: what its ledger entry names
	KeyID     string     // the host's key
	// Reviewer is the key id of the reviewer whose signature CheckReviewer verified; "" before,
	// or where the run's track asks for none.
	Reviewer string
	others   []AmendmentSignature // the signatures that are not the host's
}

// VerifyAmendment checks an amendment's envelope with the host's key v: the in-toto payload
// type, one signature by v over the DSSE PAE, at most one other (a reviewer's, which
// CheckReviewer judges against the run's track), and its statement strictly: unknown fields and
// duplicate keys are refused, and the predicate holds to its ledger entry's rules.
func VerifyAmendment(env []byte, v signature.Verifier) (*VerifiedAmendment, error) {
	st, payload, sigs, err := ReadAmendmentEnvelope(env)
	if err != nil {
		return nil, err
	}
	if len(sigs) == 0 {
		return nil, failf(ReasonSignatureCount, "the envelope has no signature: a reviewer's draft the host never signed")
	}
	pub, err := v.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	msg := appendPAE(nil, PayloadType, payload)
	host := -1
	for i, s := range sigs {
		if verifySignature(v, s.Sig, msg) == nil {
			host = i
			break
		}
	}
	if host < 0 {
		return nil, failf(ReasonSignature, "no signature verifies with key %s; the envelope was altered or signed by another key", id)
	}
	out := &VerifiedAmendment{Statement: st, Payload: payload, Digest: digest.SumHex(payload), KeyID: id}
	out.others = append(append(out.others, sigs[:host]...), sigs[host+1:]...)
	return out, nil
}

// Signatures is how many signatures the amendment's envelope has: the host's, and a reviewer's
// where there are two.
func (va *VerifiedAmendment) Signatures() int { return 1 + len(va.others) }

// CheckReviewer judges the amendment's signatures beside the host's against what the amended
// run's track asks (t.Amendments; t is the track whose id the amendment names): where it names
// reviewers, one signature by one of them, and nothing else; where it names none, no other
// signature. It records the reviewer's key id.
func (va *VerifiedAmendment) CheckReviewer(t *policy.Track) error {
	if t == nil || t.ID != va.Statement.Predicate.Track.ID {
		return failf(ReasonTrack, "the amendment's run is of track %s; its reviewers are read from that track's file", va.Statement.Predicate.Track.ID)
	}
	if t.Amendments == nil {
		if len(va.others) > 0 {
			return failf(ReasonSignatureCount, "the amendment has a second signature, and track %s (%s) names no reviewer: a signature no one can check", t.Name, t.ID[:12])
		}
		return nil
	}
	if len(va.others) == 0 {
		return failf(ReasonSignatureCount, "track %s (%s) asks for a reviewer's signature on an amendment beside the host's, and it has none", t.Name, t.ID[:12])
	}
	msg := appendPAE(nil, PayloadType, va.Payload)
	for _, r := range t.Amendments.Reviewers {
		if r.KeyID == va.KeyID {
			continue // the host's own key, named a reviewer too, is not a second person
		}
		v, err := signature.LoadVerifier(r.Key, crypto.SHA256)
		if err != nil {
			continue
		}
		if verifySignature(v, va.others[0].Sig, msg) == nil {
			va.Reviewer = r.KeyID
			return nil
		}
	}
	return failf(ReasonSignature, "the second signature verifies with none of the %d reviewer key(s) track %s (%s) names", len(t.Amendments.Reviewers), t.Name, t.ID[:12])
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
	st, payload, _, err := ReadAmendmentEnvelope(env)
	if err != nil {
		return nil, "", err
	}
	return st, digest.SumHex(payload), nil
}
