package attest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
		{`{"run":1,"RUN":2}`, false},
		{`{"k":1,"\u212a":2}`, false},
		{`{"s":1,"ſ":2}`, false},
		{`{"a":{"k":1},"b":{"K":1}}`, true},
		{`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, false},
	}
	for _, tc := range tests {
		if err := noDuplicateKeys([]byte(tc.doc)); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.doc, err)
		}
	}
}

// FuzzStatementPaths: whatever statement the one-pass reading accepts, the member-by-member
// reading accepts too and reads the same; what that reading refuses, the one-pass one refuses.
func FuzzStatementPaths(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if err != nil {
		f.Fatal(err)
	}
	env, err := ReadUnverified(b)
	if err != nil {
		f.Fatal(err)
	}
	golden, _ := json.Marshal(env)
	s := string(golden)
	f.Add(golden)
	for _, edit := range [][2]string{
		{`"_type"`, `"_TYPE"`},
		{`{"_type"`, `{"extra":1,"_type"`},
		{`"predicateType"`, `"subject":[],"predicateType"`},
		{`"predicateType"`, `"Predicate":{},"predicateType"`},
		{`"subject":[`, `"subject":null,"x":[`},
		{`"predicate":{`, `"predicate":{"unknown":1,`},
		{`"predicate":{`, `"predicate":{"run":{},`},
	} {
		f.Add([]byte(strings.Replace(s, edit[0], edit[1], 1)))
	}
	f.Add([]byte(s + " {}"))
	f.Add([]byte(`{"_type":"x","subject":null,"predicateType":"y","predicate":null}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		fast := fastStatement(payload)
		slow, err := slowStatement(payload, verifyConfig{}, &Verified{})
		var vf *VerificationFailure
		if err != nil && !errors.As(err, &vf) {
			t.Fatalf("not a verdict: %v", err)
		}
		if fast == nil {
			return
		}
		if err != nil && vf.Reason != ReasonSubject && vf.Reason != ReasonPredicateType && vf.Reason != ReasonStatementType {
			t.Fatalf("read in one pass, refused member by member: %v", err)
		}
		if err == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("the two readings differ:\n%+v\n%+v", fast, slow)
		}
	})
}
