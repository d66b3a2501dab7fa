package policy

import (
	"encoding/json"
	"fmt"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// CanonicalJSON returns the RFC 8785 (JCS) canonical JSON of a track's TOML data: tables become
// objects, strings, integers and booleans stay as they are, keys are sorted by UTF-16 code units,
// and there is no insignificant whitespace. Parse accepts only data for which this is exact
// (no floats, no datetimes, integers within ±(2^53-1)).
func CanonicalJSON(data map[string]any) ([]byte, error) {
	plain, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encode track data as JSON: %w", err)
	}
	canon, err := jsoncanonicalizer.Transform(plain)
	if err != nil {
		return nil, fmt.Errorf("canonicalize track JSON (RFC 8785): %w", err)
	}
	return canon, nil
}
