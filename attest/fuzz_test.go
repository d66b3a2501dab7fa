package attest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzVerify: any bytes as an envelope give a valid verdict or a *VerificationFailure, never a
// panic and never another error (the key is fine and nothing else is read).
func FuzzVerify(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json")); err == nil {
		f.Add(b)
	}
	for _, s := range []string{"", "{}", "[]", "null", `{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AA=="}]}`, `{"payload":"","payload":""}`, `{"signatures":[{"sig":null}]}`} {
		f.Add([]byte(s))
	}
	v := verifier(f, "ed25519")
	f.Fuzz(func(t *testing.T, env []byte) {
		_, err := Verify(env, v)
		if err != nil {
			var vf *VerificationFailure
			if !errors.As(err, &vf) {
				t.Fatalf("not a verdict: %v", err)
			}
		}
	})
}

func TestNoDuplicateKeys(t *testing.T) {
	tests := []struct {
		doc string
		ok  bool
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, true},
		{`{"a":1,"a":2}`, false},
		{`{"a":1,"\u0061":2}`, false},
		{`{"x":{"k":"v","k":"w"}}`, false},
		{`[{"k":1},{"k":1}]`, true},
		{`{"s":"a,\"b\":1","b":2}`, true},
		{`{"a":"}","a":1}`, false},
		{`{"a" 1}`, false},
		{`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, false},
	}
	for _, tc := range tests {
		if err := noDuplicateKeys([]byte(tc.doc)); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.doc, err)
		}
	}
}
