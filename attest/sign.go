package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// Sign checks the statement (the same checks Verify makes of a predicate), canonicalizes it
// (RFC 8785) and signs it in a DSSE envelope with payloadType PayloadType. It returns the
// envelope's JSON, indented for people; the signature covers only the DSSE PAE of the payload.
func Sign(ctx context.Context, st *Statement, signer signature.Signer) ([]byte, error) {
	if st == nil || st.Predicate == nil {
		return nil, fmt.Errorf("sign: the statement has no predicate")
	}
	if st.Type != StatementType || st.PredicateType != st.Predicate.Type() {
		return nil, fmt.Errorf("sign: statement type %q / predicate type %q; expected %s / %s", st.Type, st.PredicateType, StatementType, st.Predicate.Type())
	}
	if err := checkSubjects(st.Subject); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	if err := CheckPredicate(st.Predicate, st.Subject); err != nil {
		return nil, fmt.Errorf("sign: the verifier would reject this predicate: %w", err)
	}
	payload, err := st.Canonical()
	if err != nil {
		return nil, err
	}
	env, err := dsse.WrapSigner(signer, PayloadType).SignMessage(bytes.NewReader(payload), options.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sign statement: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, env, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
