package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/jsonpass"
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
	_, golden := goldenStatement(f)
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

// FuzzEnvelopePaths: whatever envelope the one-pass reading (fastEnvelope) accepts, the general
// one (encoding/json and the duplicate-key pass) accepts too and reads the same; so the fast
// path changes no verdict, only the time to reach it.
func FuzzEnvelopePaths(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if err != nil {
		f.Fatal(err)
	}
	s := string(b)
	f.Add(b)
	for _, edit := range [][2]string{
		{`"payloadType"`, `"PayloadType"`},
		{`"payloadType"`, `"payload\u0054ype"`},
		{`"payload":`, `"payload":"e30=","payload":`},
		{`"signatures": [`, `"signatures": null, "x": [`},
		{`"signatures": [`, `"signatures": [], "signatures": [`},
		{`"sig":`, `"sig": "AA==", "sig":`},
		{`"sig":`, `"SIG":`},
		{`"keyid": "`, `"keyid": "\"`},
		{`"keyid"`, `"extra": 1, "keyid"`},
		{`{`, "\ufeff{"},
		{`"payload": "`, `"payload": "\n`},
		{`"payload": "`, "\"payload\": \"\x7f"},
		{`"payload": "`, `"payload": "é`},
	} {
		f.Add([]byte(strings.Replace(s, edit[0], edit[1], 1)))
	}
	for _, x := range []string{"", "{}", "[]", "null", `{"payloadType":"a","payload":"b","signatures":[]}`, `{"payloadType":"a","payload":"b","signatures":[{}]}`, `{"payloadType":"a","payload":"b","signatures":[{"keyid":"k"}]}`, `{"payloadType":"a","payload":"b","signatures":[{"sig":"s"},]}`, `{"payloadType":"a","payload":"b","signatures":[{"sig":"s"}]} x`, `{"payloadType":"a","payload":"b","signatures":[{"sig":"s"}],}`, `{"payloadType":"a","payload":"b"}`} {
		f.Add([]byte(x))
	}
	f.Fuzz(func(t *testing.T, env []byte) {
		fast, ok := fastEnvelope(env)
		if !ok {
			return
		}
		var slow envelope
		if err := json.Unmarshal(env, &slow); err != nil {
			t.Fatalf("read in one pass, refused by encoding/json: %v", err)
		}
		if err := duplicateKeys(env); err != nil {
			t.Fatalf("read in one pass, refused by the duplicate-key pass: %v", err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("the two readings differ:\n%+v\n%+v", fast, slow)
		}
	})
}

// TestEnvelopeFastPath: the form Sign writes is the one read in one pass.
func TestEnvelopeFastPath(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fastEnvelope(b); !ok {
		t.Fatal("the golden envelope (as Sign writes it) is not read by the one-pass reading")
	}
}

// TestDuplicateKeysManyKeys: an object past the listed keys switches to a set and still finds
// a duplicate, in it and in objects nested in it.
func TestDuplicateKeysManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":{"a":1,"b":2},`, i)
	}
	ok := b.String() + `"z":0}`
	if err := noDuplicateKeys([]byte(ok)); err != nil {
		t.Fatalf("no duplicate: %v", err)
	}
	for _, bad := range []string{b.String() + `"K3":0}`, b.String() + `"z":{"a":1,"A":2}}`, strings.Replace(ok, `"k0":{"a":1,"b":2}`, `"k0":{"a":1,"b":2,"a":3}`, 1)} {
		if err := noDuplicateKeys([]byte(bad)); err == nil {
			t.Errorf("duplicate not found in %.60s…", bad[len(bad)-60:])
		}
	}
}

// FuzzDuplicateKeys: the one-pass duplicate-key check agrees with a plain reading of the tokens
// (encoding/json's decoder, keys compared with bytes.EqualFold as it matches them to fields).
func FuzzDuplicateKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`, `{"a":1,"A":2}`, `{"a":"\"","b":{"k":1,"K":2}}`, `{"\u212a":1,"k":2}`, `[{"x":{}},{"x":[]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		want, deep := tokenDuplicates(data)
		if deep {
			return
		}
		if got := duplicateKeys(data) != nil; got != want {
			t.Fatalf("duplicateKeys says %v, the tokens say %v: %s", got, want, data)
		}
	})
}

// tokenDuplicates reads valid JSON token by token: does an object repeat a key (without case),
// and is it nested more than 64 levels deep?
func tokenDuplicates(data []byte) (dup, deep bool) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	type frame struct {
		object  bool
		keys    []string
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return dup, deep
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.wantKey = true
				}
				stack = append(stack, &frame{object: v == '{', wantKey: v == '{'})
				if len(stack) > 64 {
					deep = true
				}
				continue
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].wantKey = true
				}
				continue
			}
		case string:
			if top != nil && top.object && top.wantKey {
				for _, k := range top.keys {
					if bytes.EqualFold([]byte(k), []byte(v)) {
						dup = true
					}
				}
				top.keys = append(top.keys, v)
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.wantKey = true
		}
	}
}

// FuzzStatementOnePass: whatever statement the one-pass reading (onePassStatement) accepts,
// encoding/json's strict reading with its duplicate-key pass (fastStatement) accepts too and
// reads the same; so the one pass changes no verdict, only the time to reach it.
func FuzzStatementOnePass(f *testing.F) {
	b, golden := goldenStatement(f)
	s := string(golden)
	f.Add(golden)
	if e, ok := fastEnvelope(b); ok {
		if signed, err := canonicalBase64(*e.Payload); err == nil {
			f.Add(signed) // the bytes as signed (RFC 8785)
		}
	}
	for _, edit := range [][2]string{
		{`"_type"`, `"_TYPE"`},
		{`"_type"`, `"_typ\u0065"`},
		{`{"_type"`, `{"extra":1,"_type"`},
		{`"predicate":{`, `"predicate":{"seed":1,`},
		{`"predicate":{`, `"predicate":{"Seed":1,`},
		{`"seed":`, `"seed":1.5,"x":`},
		{`"seed":`, `"seed":01,"x":`},
		{`"seed":`, `"seed":"1","x":`},
		{`"seed":`, `"seed":null,"x":`},
		{`"sha256":"`, `"sha256":"\u00e9`},
		{`"sha256":"`, `"SHA256":"x","sha256":"`},
		{`"sha256":"`, "\"sha256\":\"\xff"},
		{`"sha256":"`, "\"sha256\":\"\x01"},
		{`"queued":"`, `"queued":"x`},
		{`"queued":`, `"queued":null,"x":`},
		{`"history":[`, `"history":null,"x":[`},
		{`"digest":{`, `"digest":{"SHA256":"a",`},
		{`"index":`, `"index":-1,"x":`},
		{`"bits_per_byte":`, `"bits_per_byte":1e999,"x":`},
	} {
		f.Add([]byte(strings.Replace(s, edit[0], edit[1], 1)))
	}
	f.Add([]byte(s + " {}"))
	f.Add([]byte(" \n" + s + "\t"))
	f.Add([]byte(`{"_type":"x","subject":[],"predicateType":"y","predicate":{}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		one := onePassStatement(payload)
		if one == nil {
			return
		}
		std := fastStatement(payload)
		if std == nil {
			t.Fatalf("read in one pass, refused by encoding/json's strict reading: %s", payload)
		}
		if !reflect.DeepEqual(one, std) {
			t.Fatalf("the two readings differ:\n%+v\n%+v", one.Predicate, std.Predicate)
		}
	})
}

// TestStatementOnePath: the statements sealrun signs are read in one pass, and every type of
// the statement is one it reads (else all would quietly take the slower reading).
func TestStatementOnePath(t *testing.T) {
	if !jsonpass.Reads(reflect.TypeFor[statementFields]()) {
		t.Fatal("the statement's types have one the one-pass reading does not read")
	}
	b, marshalled := goldenStatement(t)
	e, _ := fastEnvelope(b)
	signed, err := canonicalBase64(*e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range [][]byte{signed, marshalled} {
		one := onePassStatement(payload)
		if one == nil {
			t.Fatalf("the golden statement is not read in one pass: %.80s…", payload)
		}
		if std := fastStatement(payload); !reflect.DeepEqual(one, std) {
			t.Fatalf("the two readings differ:\n%+v\n%+v", one.Predicate, std.Predicate)
		}
	}
}

// goldenStatement returns the golden envelope and its statement as encoding/json writes it.
func goldenStatement(t testing.TB) (envelope, statement []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "envelope.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadUnverified(b)
	if err != nil {
		t.Fatal(err)
	}
	statement, _ = json.Marshal(st)
	return b, statement
}

// FuzzCanonicalSubmission holds appendCanonicalSubmission to what it replaces: json.Marshal of
// the submission, then RFC 8785 canonicalization by jsoncanonicalizer. Both fail or both give the
// same bytes.
func FuzzCanonicalSubmission(f *testing.F) {
	f.Add("sha256:"+strings.Repeat("ab", 32), int64(4096), int64(1767225600), int64(123456789), 0, 87.5, true)
	f.Add("a\"b\\c\b\f\n\r\t\x00\x01\x1f\x7f<>&\u2028\u2029é\xff\xfe", int64(1)<<53+1, int64(-62135596800), int64(0), 3600, math.Copysign(0, -1), false)
	f.Add("", int64(math.MaxInt64), int64(253402300800), int64(1), -45*60, 1e21, true) // year 10000: an error
	f.Add("x", int64(math.MinInt64), int64(0), int64(999999999), 14*3600, 5e-324, false)
	f.Add("y", int64(-1), int64(1), int64(10), 0, 1e-7, false)
	f.Add("z", int64(0), int64(2), int64(100), 0, math.NaN(), false)
	f.Add("z", int64(0), int64(2), int64(100), 0, math.Inf(1), false)
	f.Add("z", int64(9007199254740993), int64(2), int64(100), 59, 123456789012345680000.0, false)
	f.Fuzz(func(t *testing.T, dg string, size, sec, nsec int64, offset int, score float64, promoted bool) {
		s := Submission{Digest: digest.Digest(dg), Size: size, Time: time.Unix(sec, nsec).In(time.FixedZone("z", offset)), ValidationScore: score, Promoted: promoted}
		var want []byte
		plain, err := json.Marshal(&s)
		if err == nil {
			want, err = jsoncanonicalizer.Transform(plain)
		}
		got, gerr := appendCanonicalSubmission(nil, &s)
		if (err == nil) != (gerr == nil) {
			t.Fatalf("%+v: the reference's error %v, ours %v", s, err, gerr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nours      %s\nreference %s", s, got, want)
		}
	})
}

// FuzzContainsFoldASCII holds containsFoldASCII's skipping search to the plain one: at every
// place, every byte of the word compared with its case folded.
func FuzzContainsFoldASCII(f *testing.F) {
	f.Add([]byte("a MediaType b"), "mediatype")
	f.Add([]byte("mediatyp"), "mediatype")
	f.Add([]byte("xxmEDIATYPExx"), "mediatype")
	f.Add([]byte("mmediatypemediatyp"), "mediatype")
	f.Add([]byte("aaab"), "aab")
	f.Add([]byte("ME\x00IATYPE mediatype"), "mediatype")
	f.Fuzz(func(t *testing.T, data []byte, word string) {
		if word == "" || strings.ContainsFunc(word, func(r rune) bool { return r < 'a' || r > 'z' || r == 'k' || r == 's' }) {
			return
		}
		want := false
		for i := 0; i+len(word) <= len(data) && !want; i++ {
			want = true
			for j := range len(word) {
				want = want && data[i+j]|0x20 == word[j]
			}
		}
		if got := containsFoldASCII(data, word); got != want {
			t.Fatalf("containsFoldASCII(%q, %q) = %v; the plain search says %v", data, word, got, want)
		}
	})
}

// FuzzVerifyAmendment: any bytes as an amendment's envelope give a verdict or a
// *VerificationFailure, never a panic; one that verifies has its host signature, at most one
// other, and a statement that holds to its rules. A reviewer's check against a track that names
// reviewers gives a verdict too.
func FuzzVerifyAmendment(f *testing.F) {
	for _, s := range []string{"", "{}", `{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}`, `{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{"sig":"AA=="},{"sig":"AA=="},{"sig":"AA=="}]}`} {
		f.Add([]byte(s))
	}
	st, _ := amendmentFixture(f, "invalidate")
	if env, _, err := SignAmendment(context.Background(), st, signer(f, "ed25519")); err == nil {
		f.Add(env)
		if d, err := AmendmentDraft(st); err == nil {
			if r, _, err := ReviewAmendment(context.Background(), d, signer(f, "ecdsa")); err == nil {
				f.Add(r)
			}
		}
	}
	v := verifier(f, "ed25519")
	f.Fuzz(func(t *testing.T, env []byte) {
		va, err := VerifyAmendment(env, v)
		if err != nil {
			var vf *VerificationFailure
			if !errors.As(err, &vf) {
				t.Fatalf("not a verdict: %v", err)
			}
			return
		}
		if va.Signatures() < 1 || va.Signatures() > MaxAmendmentSignatures || va.Statement.Check() != nil {
			t.Fatalf("verified: %d signatures, %v", va.Signatures(), va.Statement.Check())
		}
	})
}
