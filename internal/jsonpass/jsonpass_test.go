package jsonpass

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sample has a field of every kind Decode reads.
type sample struct {
	S   string            `json:"s"`
	B   bool              `json:"b"`
	I   int64             `json:"i"`
	I8  int8              `json:"i8"`
	U   uint32            `json:"u"`
	F   float64           `json:"f"`
	P   *string           `json:"p"`
	L   []inner           `json:"l"`
	M   map[string]int    `json:"m"`
	T   time.Time         `json:"t"`
	N   inner             `json:"n"`
	PN  *inner            `json:"pn"`
	LL  [][]string        `json:"ll"`
	MP  map[string]*inner `json:"mp"`
	Def int               // no tag: its Go name
	Not string            `json:"-"`
	un  int
}

type inner struct {
	A string `json:"a,omitempty"`
	Z int    `json:"z"`
}

// strictJSON is what Decode is held to: encoding/json with unknown fields refused, one value
// and only whitespace after it, and no object with two keys alike (encoding/json keeps the last;
// Decode refuses, so that such a document is read by the caller's encoding/json path).
func strictJSON(data []byte, v any) error {
	if dupKeys(data) {
		return errors.New("duplicate key")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	if _, err := dec.Token(); err == nil {
		return errors.New("trailing data")
	}
	return nil
}

// dupKeys reports whether an object in data has two keys equal without case (as encoding/json
// matches keys to fields).
func dupKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []map[string]bool
	var inObject []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
				inObject = append(inObject, true)
				expectKey = true
				continue
			case '[':
				inObject = append(inObject, false)
			case '}', ']':
				if t == '}' {
					stack = stack[:len(stack)-1]
				}
				inObject = inObject[:len(inObject)-1]
			}
		case string:
			if len(inObject) > 0 && inObject[len(inObject)-1] && expectKey {
				k := strings.ToLower(t)
				if stack[len(stack)-1][k] {
					return true
				}
				stack[len(stack)-1][k] = true
				expectKey = false
				continue
			}
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

const full = `{"s":"plain é","b":true,"i":-42,"i8":7,"u":9,"f":1.5e3,"p":"x","l":[{"a":"1","z":2},{"z":3}],
 "m":{"k":1,"K2":2},"t":"2026-11-29T08:00:00.5+01:00","n":{"z":1},"pn":null,"ll":[[],["a"]],"mp":{"x":null},"Def":3}`

func TestDecode(t *testing.T) {
	var got, want sample
	if !Decode([]byte(full), &got) {
		t.Fatal("not read in one pass")
	}
	if err := strictJSON([]byte(full), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || got.un != 0 {
		t.Fatalf("the readings differ:\n%+v\n%+v", got, want)
	}
	if !Reads(reflect.TypeFor[sample]()) {
		t.Fatal("Reads says no")
	}
	// A string with escapes or bytes that are not UTF-8 is read as encoding/json reads it.
	for _, doc := range []string{`{"s":"\u00e9\n\ud83d\ude00"}`, "{\"s\":\"a\xffb\"}", `{"m":{"\u006b":1}}`} {
		var one, std sample
		if !Decode([]byte(doc), &one) {
			t.Errorf("%q not read in one pass", doc)
		}
		if err := strictJSON([]byte(doc), &std); err != nil || !reflect.DeepEqual(one, std) {
			t.Errorf("%q: the readings differ (%v):\n%+v\n%+v", doc, err, one, std)
		}
	}
}

// TestDecodeRefuses: what is outside the subset is reported, for encoding/json to decide.
func TestDecodeRefuses(t *testing.T) {
	for _, doc := range []string{
		``, ` `, `null`, `{`, `{"s":"a"`, `{"s":"a"} {}`, `{"s":"a"}x`, `[]`,
		`{"S":"a"}`,              // case differs
		`{"s":"a","s":"b"}`,      // twice
		`{"x":1}`,                // not a field
		`{"Not":"a"}`,            // json:"-"
		`{"un":1}`,               // unexported
		`{"s":null}`,             // null for a string
		`{"i":1.5}`, `{"i":"1"}`, // not an integer
		`{"i8":300}`,           // overflow
		`{"u":-1}`,             // negative unsigned
		`{"f":01}`, `{"f":1.}`, // not JSON numbers
		`{"f":1e999}`,             // out of range
		"{\"s\":\"\x01\"}",        // a control character
		`{"t":null}`, `{"t":"x"}`, // not a time
		`{"m":{"k":1,"K":2}}`, // map keys alike without case
		`{"l":[1]}`, `{"l":[{}],}`, `{"n":[]}`,
		strings.Repeat(`{"pn":`, 70) + `null` + strings.Repeat(`}`, 70), // too deep
	} {
		var v sample
		if Decode([]byte(doc), &v) {
			t.Errorf("%.60q read in one pass; it is outside the subset", doc)
		}
	}
	var notPtr sample
	if Decode([]byte(`{}`), notPtr) || Decode([]byte(`{}`), (*sample)(nil)) {
		t.Error("a value that is not a pointer, or a nil one, was read into")
	}
	type unread struct {
		C chan int `json:"c"`
	}
	if Reads(reflect.TypeFor[unread]()) || Decode([]byte(`{}`), &unread{}) {
		t.Error("a type with a channel is said to be read")
	}
}

// FuzzDecode: whatever Decode accepts, encoding/json's strict reading accepts too and reads the
// same.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(`{"l":[],"m":{},"ll":null}`))
	f.Add([]byte(` {"s":"a\tb"} `))
	f.Add([]byte(`{"f":-0.0e-0,"i":-0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var one sample
		if !Decode(data, &one) {
			return
		}
		var std sample
		if err := strictJSON(data, &std); err != nil {
			t.Fatalf("read in one pass, refused by encoding/json (%v): %q", err, data)
		}
		if !reflect.DeepEqual(one, std) {
			t.Fatalf("the readings differ for %q:\n%+v\n%+v", data, one, std)
		}
	})
}

func TestScanner(t *testing.T) {
	s := NewScanner([]byte(` { "a" : "b c" } `))
	if !s.Take('{') {
		t.Fatal("no {")
	}
	k, ok := s.Str()
	if !ok || k != "a" || !s.Take(':') {
		t.Fatalf("key %q %v", k, ok)
	}
	v, ok := s.Plain()
	if !ok || string(v) != "b c" || !s.Take('}') || !s.End() {
		t.Fatalf("value %q %v", v, ok)
	}
	for _, doc := range []string{`"a\"b"`, `"é"`, "\"\x1f\"", `"open`, `x`} {
		if _, ok := NewScanner([]byte(doc)).Str(); ok {
			t.Errorf("%q read as a plain string", doc)
		}
	}
}
