package attest

import "github.com/sealrun/sealrun/internal/jsonpass"

// statementFields is a statement as read before its members are judged: each member's
// presence tells a missing member from an empty one.
type statementFields struct {
	Type          *string    `json:"_type"`
	Subject       []Subject  `json:"subject"`
	PredicateType *string    `json:"predicateType"`
	Predicate     *Predicate `json:"predicate"`
}

// onePassStatement reads a statement in one pass over its bytes (jsonpass), checking the JSON's
// syntax, that no object repeats a key and that every key is a field, as it goes. On anything
// outside jsonpass's subset it returns nil and the reading by encoding/json decides
// (fastStatement, slowStatement), with its own error; what this reading accepts, that one
// accepts too and reads the same (FuzzStatementOnePass). It exists for speed: a board verifies
// thousands of statements, and encoding/json's decoder with its duplicate-key pass took more of
// that time than the signatures.
func onePassStatement(payload []byte) *Statement {
	var full statementFields
	if !jsonpass.Decode(payload, &full) {
		return nil
	}
	if full.Type == nil || full.PredicateType == nil || full.Subject == nil || full.Predicate == nil {
		return nil
	}
	return &Statement{Type: *full.Type, Subject: full.Subject, PredicateType: *full.PredicateType, Predicate: full.Predicate}
}
