package attest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

// MaxEnvelopeBytes bounds an envelope. A real one (100 questions, 50 candidates) is about 30 KiB.
const MaxEnvelopeBytes = 4 << 20

// Reason names the check an attestation failed. Verifiers branch on it; --json prints it.
type Reason string

// The checks of Verify, in the order they run.
const (
	ReasonEnvelopeSize   Reason = "envelope-size"   // larger than MaxEnvelopeBytes
	ReasonEnvelopeSyntax Reason = "envelope-syntax" // not a DSSE envelope: JSON, keys, base64
	ReasonSignatureCount Reason = "signature-count" // not exactly one signature
	ReasonPayloadType    Reason = "payload-type"    // not application/vnd.in-toto+json
	ReasonSignature      Reason = "signature"       // the signature does not verify with the key
	ReasonStatementType  Reason = "statement-type"  // payload is not an in-toto Statement v1
	ReasonPredicateType  Reason = "predicate-type"  // predicate type not on the allow-list
	ReasonSubject        Reason = "subject"         // subjects malformed, or a given file's digest differs
	ReasonAudit          Reason = "audit"           // the given audit log's head or count differs
	ReasonPredicate      Reason = "predicate"       // the predicate is malformed or inconsistent
	ReasonTrack          Reason = "track"           // the given track's id or pins differ
	ReasonLedger         Reason = "ledger"          // the run's ledger entry, head or inclusion proof is wrong
	ReasonExport         Reason = "export"          // (verify --export) the export is not what the run's transcript gives
	ReasonWitnessed      Reason = "witnessed"       // (verify --witness) the run's witnessed proof is missing, or not cosigned by the quorum over this run's entries
	ReasonTPM            Reason = "tpm"             // (verify --tpm) the run's TPM quote, or the host's enrollment, does not check
	ReasonTranscript     Reason = "transcript"      // (verify --transcript) a body the audit log hashes is missing or altered, or the transcript is not what they give
)

// VerificationFailure is a verdict: the attestation is not valid, for Reason. Any other error
// from Verify means the check could not be made (for example an unreadable file).
type VerificationFailure struct {
	Reason Reason
	Detail string
}

func (e *VerificationFailure) Error() string {
	return fmt.Sprintf("not valid (%s): %s", e.Reason, e.Detail)
}

func failf(r Reason, format string, args ...any) error {
	return &VerificationFailure{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// Verified is what a valid attestation says, from the verified payload bytes only.
type Verified struct {
	Statement *Statement
	Payload   []byte   // the exact signed payload
	KeyID     string   // SHA-256 of the verifying public key's DER
	Checks    []string // what was checked, in order
	Warnings  []string // valid, but worth saying (for example a withdrawn track)
	// Ledger is the signed ledger head the run's entry is included under (nil when the
	// attestation has no ledger reference).
	Ledger *ledger.Checkpoint
}

// VerifyOption adds an optional check.
type VerifyOption func(*verifyConfig)

type verifyConfig struct {
	bundleSHA256, reportSHA256 string
	audit                      io.Reader
	track                      *policy.Track
	heads                      *ledger.Heads
}

// WithBundleDigest checks the bundle subject against a file's SHA-256 (lowercase hex).
func WithBundleDigest(hex string) VerifyOption {
	return func(c *verifyConfig) { c.bundleSHA256 = hex }
}

// WithReportDigest checks the report subject against a file's SHA-256 (lowercase hex).
func WithReportDigest(hex string) VerifyOption {
	return func(c *verifyConfig) { c.reportSHA256 = hex }
}

// WithAuditLog checks the audit log's chain head and entry count.
func WithAuditLog(r io.Reader) VerifyOption { return func(c *verifyConfig) { c.audit = r } }

// WithTrack checks the track id and every pin against a track file.
func WithTrack(t *policy.Track) VerifyOption { return func(c *verifyConfig) { c.track = t } }

// WithHeads opens the ledger head an attestation carries through heads: a reader of many
// attestations under one head verifies its signature once.
func WithHeads(h *ledger.Heads) VerifyOption { return func(c *verifyConfig) { c.heads = h } }

// envelope is the DSSE envelope, decoded strictly.
type envelope struct {
	PayloadType *string       `json:"payloadType"`
	Payload     *string       `json:"payload"`
	Signatures  []envelopeSig `json:"signatures"`
}

// envelopeSig is one of an envelope's signatures.
type envelopeSig struct {
	KeyID string  `json:"keyid"`
	Sig   *string `json:"sig"`
}

// Verify checks an attestation offline against a public key, in this order: envelope size and
// syntax; exactly one signature; payloadType; the signature over the DSSE PAE; the statement's
// _type; the predicate type; subjects (and given files' digests); the given audit log; predicate
// consistency; the given track. Everything after the signature is read from the verified payload
// bytes only. It returns *VerificationFailure when the attestation is not valid.
func Verify(env []byte, v signature.Verifier, opts ...VerifyOption) (*Verified, error) {
	var cfg verifyConfig
	for _, o := range opts {
		o(&cfg)
	}
	out := &Verified{}
	payload, err := verifyEnvelope(env, v, out)
	if err != nil {
		return nil, err
	}
	out.Payload = payload
	// From here on, only the verified payload bytes.
	st, err := readStatement(payload, cfg, out)
	if err != nil {
		return nil, err
	}
	out.Statement = st
	if cfg.audit != nil {
		facts, err := ReadAudit(cfg.audit, nil)
		if err != nil {
			return nil, failf(ReasonAudit, "the given audit log cannot be the attested one: %v", err)
		}
		used, h, n := facts.Usage, facts.Head, facts.Entries
		if h != st.Predicate.Audit.Head || n != st.Predicate.Audit.Entries {
			return nil, failf(ReasonAudit, "the given audit log has %d entries with head %s; the attestation says %d entries with head %s", n, h, st.Predicate.Audit.Entries, st.Predicate.Audit.Head)
		}
		out.check("audit log")
		if err := checkUsageAgainstAudit(st.Predicate.Usage, used); err != nil {
			return nil, err
		}
		if st.Predicate.Usage != nil {
			out.check("model usage")
		}
		if err := checkHumanAgainstAudit(st.Predicate.Human, facts.Attaches, st.Predicate.Timeline.Finished); err != nil {
			return nil, err
		}
		if st.Predicate.Human != nil {
			out.check("attaches")
		}
	}
	if err := CheckPredicate(st.Predicate, st.Subject); err != nil {
		return nil, err
	}
	out.check("predicate consistency")
	if p := st.Predicate; p.Ledger != nil {
		if out.Ledger, err = checkLedger(p, v, cfg.heads); err != nil {
			return nil, err
		}
		out.check("ledger inclusion")
	}
	if b := st.Predicate.Build; b != nil && (b.TestSeams || len(b.SeamsUsed) > 0) {
		w := "built by a test build of sealrund (test seams compiled in): not a release"
		if len(b.SeamsUsed) > 0 {
			w = "this run used test seams (" + strings.Join(b.SeamsUsed, ", ") + "): its scaffold is not the pinned image's as it stands"
		}
		out.Warnings = append(out.Warnings, w)
	}
	if cfg.track != nil {
		warn, err := checkTrack(st.Predicate, cfg.track)
		if err != nil {
			return nil, err
		}
		out.Warnings = append(out.Warnings, warn...)
		out.check("track")
	}
	return out, nil
}

// check records a check passed.
func (out *Verified) check(name string) { out.Checks = append(out.Checks, name) }

// verifyEnvelope checks the DSSE envelope (size, syntax, exactly one signature, payloadType) and
// its signature with v, and returns the verified payload.
func verifyEnvelope(env []byte, v signature.Verifier, out *Verified) ([]byte, error) {
	return verifyEnvelopeOf(env, PayloadType, MaxEnvelopeBytes, v, out)
}

// verifyEnvelopeOf is verifyEnvelope for an envelope of payloadType, of at most max bytes.
func verifyEnvelopeOf(env []byte, payloadType string, max int, v signature.Verifier, out *Verified) ([]byte, error) {
	e, payload, sigs, err := readEnvelope(env, max)
	if err != nil {
		return nil, err
	}
	out.check("envelope")
	if n := len(e.Signatures); n != 1 {
		if n == 0 {
			return nil, failf(ReasonSignatureCount, "the envelope has no signature")
		}
		return nil, failf(ReasonSignatureCount, "the envelope has %d signatures; a sealrun attestation has exactly one", n)
	}
	out.check("one signature")
	if *e.PayloadType != payloadType {
		return nil, failf(ReasonPayloadType, "payloadType is %q; expected %q", *e.PayloadType, payloadType)
	}
	out.check("payload type")
	pub, err := v.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	if out.KeyID, err = KeyID(pub); err != nil {
		return nil, fmt.Errorf("verification key: %w", err)
	}
	// The signature over the DSSE pre-authentication encoding, checked directly: keyid is only a
	// hint (other DSSE tools fill in the key's id, a fingerprint or a KMS name) and never part of
	// the verdict.
	msg := paeBuffers.Get().(*[]byte)
	*msg = appendPAE((*msg)[:0], payloadType, payload)
	err = verifySignature(v, sigs[0], *msg)
	paeBuffers.Put(msg)
	if err != nil {
		return nil, failf(ReasonSignature, "the signature does not verify with key %s (%v); the envelope was altered or signed by another key", out.KeyID, err)
	}
	out.check("signature")
	return payload, nil
}

// readEnvelope reads a DSSE envelope of at most max bytes: its syntax (duplicate keys refused),
// its payload type and payload, and its signatures decoded (each sig in canonical base64).
// Nothing is verified.
func readEnvelope(env []byte, max int) (e envelope, payload []byte, sigs [][]byte, err error) {
	if len(env) > max {
		return e, nil, nil, failf(ReasonEnvelopeSize, "envelope is %d bytes; at most %d are accepted", len(env), max)
	}
	// The one form signers write, read in one pass (fastEnvelope); any other, one decode (which
	// checks the syntax) and one pass for duplicate keys; when the decode fails, strictDecode
	// says why as it always has.
	e, ok := fastEnvelope(env)
	if !ok {
		e = envelope{}
		if json.Unmarshal(env, &e) != nil {
			if err := strictDecode(env, &e, false); err != nil {
				return e, nil, nil, failf(ReasonEnvelopeSyntax, "not a DSSE envelope: %v", err)
			}
		}
		if err := duplicateKeys(env); err != nil {
			return e, nil, nil, failf(ReasonEnvelopeSyntax, "not a DSSE envelope: %v", err)
		}
	}
	switch {
	case e.PayloadType == nil:
		return e, nil, nil, failf(ReasonEnvelopeSyntax, "envelope has no payloadType")
	case e.Payload == nil:
		return e, nil, nil, failf(ReasonEnvelopeSyntax, "envelope has no payload")
	}
	if payload, err = canonicalBase64(*e.Payload); err != nil {
		return e, nil, nil, failf(ReasonEnvelopeSyntax, "payload: %v", err)
	}
	sigs = make([][]byte, len(e.Signatures))
	for i, s := range e.Signatures {
		if s.Sig == nil {
			return e, nil, nil, failf(ReasonEnvelopeSyntax, "signatures[%d] has no sig", i)
		}
		if sigs[i], err = canonicalBase64(*s.Sig); err != nil {
			return e, nil, nil, failf(ReasonEnvelopeSyntax, "signatures[%d].sig: %v", i, err)
		}
	}
	return e, payload, sigs, nil
}

// readStatement reads the in-toto statement from the verified payload: its type, the predicate
// type, the subjects (against the given files' digests) and the predicate.
func readStatement(payload []byte, cfg verifyConfig, out *Verified) (*Statement, error) {
	st := onePassStatement(payload)
	if st == nil {
		st = fastStatement(payload)
	}
	if st != nil {
		if err := checkTypes(&st.Type, &st.PredicateType, out); err != nil {
			return nil, err
		}
		if err := checkSubjectsGiven(st.Subject, cfg, out); err != nil {
			return nil, err
		}
		return st, checkPredicateType(st)
	}
	return slowStatement(payload, cfg, out)
}

// slowStatement is readStatement member by member, each with its own verdict.
func slowStatement(payload []byte, cfg verifyConfig, out *Verified) (*Statement, error) {
	var head struct {
		Type          *string         `json:"_type"`
		Subject       json.RawMessage `json:"subject"`
		PredicateType *string         `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
	}
	if err := strictDecode(payload, &head, false); err != nil {
		return nil, failf(ReasonStatementType, "the payload is not an in-toto statement: %v", err)
	}
	if err := checkTypes(head.Type, head.PredicateType, out); err != nil {
		return nil, err
	}
	st := &Statement{Type: *head.Type, PredicateType: *head.PredicateType}
	// The subject and the predicate are parts of the payload, whose keys were all checked above.
	if err := decodeChecked(head.Subject, &st.Subject, true); err != nil {
		return nil, failf(ReasonSubject, "subject is malformed: %v", err)
	}
	if err := checkSubjectsGiven(st.Subject, cfg, out); err != nil {
		return nil, err
	}
	st.Predicate = new(Predicate)
	if err := decodeChecked(head.Predicate, st.Predicate, true); err != nil {
		return nil, failf(ReasonPredicate, "predicate is malformed: %v", err)
	}
	return st, checkPredicateType(st)
}

// fastStatement decodes a payload that is an in-toto statement with exactly its four members in
// one strict pass (and one for duplicate keys), or returns nil: then readStatement's member by
// member reading judges it, and names what is wrong. Whatever this accepts, that reading accepts
// and reads the same.
func fastStatement(payload []byte) *Statement {
	var full statementFields
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if dec.Decode(&full) != nil || full.Type == nil || full.PredicateType == nil || full.Subject == nil || full.Predicate == nil {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF || duplicateKeys(payload) != nil {
		return nil
	}
	return &Statement{Type: *full.Type, Subject: full.Subject, PredicateType: *full.PredicateType, Predicate: full.Predicate}
}

// checkTypes checks the statement's _type and predicateType.
func checkTypes(typ, predicateType *string, out *Verified) error {
	if typ == nil || *typ != StatementType {
		return failf(ReasonStatementType, "_type is %s; expected %q", quoteOrMissing(typ), StatementType)
	}
	out.check("statement type")
	if predicateType == nil || !slices.Contains(AllowedPredicateTypes, *predicateType) {
		return failf(ReasonPredicateType, "predicateType is %s; this verifier accepts %s", quoteOrMissing(predicateType), strings.Join(AllowedPredicateTypes, ", "))
	}
	out.check("predicate type")
	return nil
}

// checkSubjectsGiven checks the subjects, and the digests of the files given to compare.
func checkSubjectsGiven(subjects []Subject, cfg verifyConfig, out *Verified) error {
	if err := checkSubjects(subjects); err != nil {
		return err
	}
	for _, c := range []struct{ name, want string }{{SubjectBundle, cfg.bundleSHA256}, {SubjectReport, cfg.reportSHA256}} {
		if c.want == "" {
			continue
		}
		got, ok := subjectDigest(subjects, c.name)
		if !ok {
			return failf(ReasonSubject, "a %s file was given but the attestation has no %q subject", c.name, c.name)
		}
		if got != c.want {
			return failf(ReasonSubject, "the given %s has sha256 %s but the attestation binds %s", c.name, c.want, got)
		}
		out.check(c.name + " digest")
	}
	out.check("subjects")
	return nil
}

// checkPredicateType checks that the predicate is of the statement's predicateType.
func checkPredicateType(st *Statement) error {
	if want := st.Predicate.Type(); st.PredicateType != want {
		return failf(ReasonPredicateType, "predicateType is %q but the predicate is a %s run's (%s)", st.PredicateType, map[bool]string{true: "task", false: "exam"}[st.Predicate.Task != nil], want)
	}
	return nil
}

// verifySignature checks sig over msg with v. An ed25519 verifier's check is made here as
// sigstore's ED25519Verifier makes it (ed25519.Verify over the message itself), without its
// copy of the message through a reader: at a board of ten thousand runs that copy was a tenth
// of the verification.
func verifySignature(v signature.Verifier, sig, msg []byte) error {
	if ev, ok := v.(*signature.ED25519Verifier); ok {
		if pub, err := ev.PublicKey(); err == nil {
			if k, ok := pub.(ed25519.PublicKey); ok && len(k) == ed25519.PublicKeySize {
				if !ed25519.Verify(k, msg, sig) {
					return errors.New("failed to verify signature")
				}
				return nil
			}
		}
	}
	return v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg), options.WithContext(context.Background()))
}

// checkLedger verifies the run's ledger reference (the entry's inclusion under a head signed by
// the same key) and that the entry is this run's.
func checkLedger(p *Predicate, v signature.Verifier, heads *ledger.Heads) (*ledger.Checkpoint, error) {
	c, e, err := ledger.VerifyRefUnder(p.Ledger, []signature.Verifier{v}, heads)
	if err != nil {
		return nil, failf(ReasonLedger, "%v", err)
	}
	for _, f := range []struct{ field, got, want string }{
		{"run", e.Run, p.Run.ID}, {"rerun_of", e.RerunOf, p.Run.RerunOf}, {"track", e.Track, p.Track.ID},
		{"agent", e.Agent, p.LedgerAgent()}, {"scaffold", e.Scaffold, p.LedgerScaffold()},
		{"seed", fmt.Sprint(e.Seed), fmt.Sprint(p.Seed)},
	} {
		if f.got != f.want {
			return nil, failf(ReasonLedger, "ledger.entry.%s is %q but the run's is %q: the entry is another run's", f.field, f.got, f.want)
		}
	}
	return &c, nil
}

func quoteOrMissing(s *string) string {
	if s == nil {
		return "missing"
	}
	return fmt.Sprintf("%q", *s)
}

// PAE is the DSSE v1 pre-authentication encoding that is signed:
// "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal.
func PAE(payloadType string, body []byte) []byte { return appendPAE(nil, payloadType, body) }

func appendPAE(b []byte, payloadType string, body []byte) []byte {
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(append(append(b, ' '), payloadType...), ' ')
	b = strconv.AppendInt(b, int64(len(body)), 10)
	return append(append(b, ' '), body...)
}

// paeBuffers keeps the buffers envelopes' signatures are checked over: a board checks thousands,
// and the signature check keeps nothing of its message.
var paeBuffers = sync.Pool{New: func() any { return new([]byte) }}

// canonicalBase64 decodes standard base64 with padding and refuses any other spelling of the same
// bytes (URL alphabet, missing padding, non-zero trailing bits, whitespace).
func canonicalBase64(s string) ([]byte, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not standard base64 with padding (%v)", err)
	}
	// Strict decoding with padding refuses non-zero trailing bits; it skips CR and LF, which
	// make the text longer than the canonical encoding of what it decodes to.
	if base64.StdEncoding.EncodedLen(len(b)) != len(s) {
		return nil, errors.New("base64 is not in canonical form")
	}
	return b, nil
}

// strictDecode decodes one JSON value into v, refusing duplicate object keys anywhere, trailing
// data and, when strict, unknown fields.
func strictDecode(data []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty")
	}
	if err := noDuplicateKeys(data); err != nil {
		return err
	}
	return decodeChecked(data, v, strict)
}

// decodeChecked is strictDecode for a part of a document noDuplicateKeys already passed whole.
func decodeChecked(data []byte, v any, strict bool) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("empty")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// noDuplicateKeys refuses JSON with a repeated key in any object: two parsers must never read
// two different things from the same signed bytes. It is one pass over the bytes; keys with
// escapes are unescaped first, so "a" and "\u0061" are the same key, and keys are compared as
// encoding/json matches them to fields, without case ("run" and "RUN" are the same key).
func noDuplicateKeys(data []byte) error {
	if !json.Valid(data) {
		var v any
		return json.Unmarshal(data, &v) // the syntax error, with its offset
	}
	return duplicateKeys(data)
}

// duplicateKeys is noDuplicateKeys for bytes known to be one valid JSON value (a decoder took
// them whole). An object's keys are compared in a list while it has few (no allocation), in a
// set once it has many (a hostile object of a million keys stays linear).
func duplicateKeys(data []byte) error {
	const listed = 16 // keys an object keeps in the list before it gets a set
	type frame struct {
		object, wantKey bool
		first           int // the object's first key in spans
		set             map[string]struct{}
	}
	type span struct{ from, to int } // a folded key in arena
	var (
		stack []frame
		spans []span
		arena []byte
	)
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			if len(stack) == 64 {
				return errors.New("nested more than 64 levels deep")
			}
			stack = append(stack, frame{object: data[i] == '{', wantKey: data[i] == '{', first: len(spans)})
		case '}', ']':
			top := stack[len(stack)-1]
			if top.object && top.first < len(spans) {
				arena = arena[:spans[top.first].from]
				spans = spans[:top.first]
			}
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				top.wantKey = true
			}
		case '"':
			j, escaped := stringEnd(data, i+1)
			if len(stack) > 0 && stack[len(stack)-1].wantKey {
				top := &stack[len(stack)-1]
				key := data[i+1 : j]
				if escaped {
					var k string
					if err := json.Unmarshal(data[i:j+1], &k); err != nil {
						return err
					}
					key = []byte(k)
				}
				from := len(arena)
				arena = foldKey(arena, key)
				fold := arena[from:]
				dup := false
				if top.set != nil {
					_, dup = top.set[string(fold)]
					top.set[string(fold)] = struct{}{}
				} else {
					for _, sp := range spans[top.first:] {
						if bytes.Equal(arena[sp.from:sp.to], fold) {
							dup = true
							break
						}
					}
					spans = append(spans, span{from, len(arena)})
					if len(spans)-top.first > listed {
						top.set = make(map[string]struct{}, 2*listed)
						for _, sp := range spans[top.first:] {
							top.set[string(arena[sp.from:sp.to])] = struct{}{}
						}
					}
				}
				if dup {
					return fmt.Errorf("key %q appears twice in one object (keys are matched without case)", key)
				}
				top.wantKey = false
			}
			i = j
		}
	}
	return nil
}

// stringEnd returns the index of the quote that ends the JSON string starting at from (just
// after its opening quote) in valid JSON, and whether the string has escapes.
func stringEnd(data []byte, from int) (end int, escaped bool) {
	q := bytes.IndexByte(data[from:], '"')
	if q >= 0 && bytes.IndexByte(data[from:from+q], '\\') < 0 {
		return from + q, false
	}
	j := from
	for ; data[j] != '"'; j++ {
		if data[j] == '\\' {
			j++
		}
	}
	return j, true
}

// foldKey appends key with each character replaced by the least of its simple case folds, so
// that two keys bytes.EqualFold (as encoding/json matches a key to a field) fold the same.
func foldKey(dst, key []byte) []byte {
	for len(key) > 0 {
		if c := key[0]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			key = key[1:]
			continue
		}
		r, n := utf8.DecodeRune(key)
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		dst = utf8.AppendRune(dst, least)
		key = key[n:]
	}
	return dst
}

func subjectDigest(subjects []Subject, name string) (string, bool) {
	for _, s := range subjects {
		if s.Name == name {
			return s.Digest["sha256"], true
		}
	}
	return "", false
}

func checkSubjects(subjects []Subject) error {
	seen := map[string]bool{}
	for i, s := range subjects {
		if s.Name == "" {
			return failf(ReasonSubject, "subject[%d] has no name", i)
		}
		if seen[s.Name] {
			return failf(ReasonSubject, "subject %q appears twice", s.Name)
		}
		seen[s.Name] = true
		if d, ok := s.Digest["sha256"]; !ok || !digest.IsHex(d) {
			return failf(ReasonSubject, "subject %q has no sha256 digest of 64 lowercase hex", s.Name)
		}
	}
	if !seen[SubjectReport] {
		return failf(ReasonSubject, "no %q subject; every attestation binds its result report", SubjectReport)
	}
	return nil
}

// ReadUnverified reads the statement of an envelope without checking its signature or
// anything it binds: for showing a run (a transcript's header), never for judging one. Verify
// is the check.
func ReadUnverified(env []byte) (*Statement, error) {
	if len(env) > MaxEnvelopeBytes {
		return nil, failf(ReasonEnvelopeSize, "envelope is %d bytes; at most %d are accepted", len(env), MaxEnvelopeBytes)
	}
	var e envelope
	if err := strictDecode(env, &e, false); err != nil || e.Payload == nil {
		return nil, failf(ReasonEnvelopeSyntax, "not a DSSE envelope: %v", err)
	}
	payload, err := canonicalBase64(*e.Payload)
	if err != nil {
		return nil, failf(ReasonEnvelopeSyntax, "payload: %v", err)
	}
	return readStatement(payload, verifyConfig{}, &Verified{})
}
