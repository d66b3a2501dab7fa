// Package jsonpass reads JSON into Go values in one pass over the bytes, for the documents
// sealrun verifies by the thousand (attestations, ledger entries). It reads a subset of JSON:
// keys spelled exactly as the fields' names and each once, every key a field, no null but for a
// pointer, slice or map, no value of another type than its field's. On anything else Decode
// reports false and the caller reads the bytes with encoding/json, which then decides with its
// own error. What Decode accepts, encoding/json (with unknown fields disallowed and duplicate
// keys refused) accepts too and reads the same: each caller holds its types to that with a fuzz
// test against its encoding/json reading. It exists for speed: encoding/json's decoder, with a
// separate duplicate-key pass, took more of a board's time than the signatures.
package jsonpass

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Decode reads data, one JSON value and nothing but whitespace around it, into the value v
// points to; false if data is outside the subset or v's type has what Decode does not read
// (Reads). After false, *v is in no particular state: decode afresh into a new value.
func Decode(data []byte, v any) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false
	}
	c := codecFor(rv.Type().Elem())
	if c == nil {
		return false
	}
	d := decoder{b: data, s: string(data)}
	if !d.value(rv.Elem(), c) {
		return false
	}
	d.space()
	return d.i == len(d.b)
}

// Reads reports whether Decode can read t at all (every type in it is one it reads); where it
// cannot, Decode always reports false.
func Reads(t reflect.Type) bool { return codecFor(t) != nil }

// codecs: each type's codec, made once (nil: a type Decode does not read).
var codecs sync.Map // reflect.Type -> *codec

func codecFor(t reflect.Type) *codec {
	if c, ok := codecs.Load(t); ok {
		return c.(*codec)
	}
	c, ok := codecOf(t, map[reflect.Type]*codec{})
	if !ok {
		c = nil
	}
	codecs.Store(t, c)
	return c
}

type codecKind uint8

const (
	cString codecKind = iota
	cBool
	cInt
	cUint
	cFloat
	cPtr
	cSlice
	cMap // map[string]T
	cStruct
	cUnmarshaler // a json.Unmarshaler given a scalar's bytes (time.Time)
)

// codec is how Decode reads one Go type.
type codec struct {
	kind   codecKind
	typ    reflect.Type
	elem   *codec           // cPtr, cSlice, cMap
	fields map[string]field // cStruct: by the exact name encoding/json gives the field
}

type field struct {
	index int
	bit   uint64 // its bit in the object's seen keys
	c     *codec
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// codecOf makes t's codec; ok false if t, or a type in it, has what Decode does not read (an
// embedded field, the string option, an interface, an array, float32, a map keyed by other than
// string, a text unmarshaler, more than 64 fields).
func codecOf(t reflect.Type, made map[reflect.Type]*codec) (*codec, bool) {
	if c, ok := made[t]; ok {
		return c, true
	}
	c := &codec{typ: t}
	made[t] = c
	if pt := reflect.PointerTo(t); t.Kind() != reflect.Pointer {
		switch {
		case pt.Implements(jsonUnmarshaler): // (*T's methods include T's)
			c.kind = cUnmarshaler
			return c, true
		case pt.Implements(textUnmarshaler):
			return nil, false
		}
	}
	var ok bool
	switch t.Kind() {
	case reflect.String:
		c.kind = cString
	case reflect.Bool:
		c.kind = cBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.kind = cInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		c.kind = cUint
	case reflect.Float64:
		c.kind = cFloat
	case reflect.Pointer:
		c.kind = cPtr
		c.elem, ok = codecOf(t.Elem(), made)
		return c, ok
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, false // []byte is base64 to encoding/json
		}
		c.kind = cSlice
		c.elem, ok = codecOf(t.Elem(), made)
		return c, ok
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key() != reflect.TypeFor[string]() {
			return nil, false
		}
		c.kind = cMap
		c.elem, ok = codecOf(t.Elem(), made)
		return c, ok
	case reflect.Struct:
		c.kind, c.fields = cStruct, map[string]field{}
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				return nil, false
			}
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			for o := range strings.SplitSeq(opts, ",") {
				if o == "string" {
					return nil, false
				}
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := c.fields[name]; dup || len(c.fields) == 64 {
				return nil, false
			}
			fc, ok := codecOf(f.Type, made)
			if !ok {
				return nil, false
			}
			c.fields[name] = field{index: i, bit: 1 << len(c.fields), c: fc}
		}
	default:
		return nil, false
	}
	return c, true
}

// decoder reads JSON for codecs; each method reports false for anything outside the subset
// (and then Decode's result is thrown away).
type decoder struct {
	b     []byte
	s     string // the same bytes as one string: a string or number is a piece of it, not a copy
	i     int
	depth int
}

// space skips JSON whitespace.
func (d *decoder) space() { d.i = skipSpace(d.b, d.i) }

// peek skips whitespace and returns the next byte (0 at the end).
func (d *decoder) peek() byte {
	d.space()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// literal reads word (true, false, null) if it is next.
func (d *decoder) literal(word string) bool {
	if d.peek() == word[0] && bytes.HasPrefix(d.b[d.i:], []byte(word)) {
		d.i += len(word)
		return true
	}
	return false
}

func (d *decoder) value(v reflect.Value, c *codec) bool {
	switch c.kind {
	case cPtr, cSlice, cMap:
		if d.literal("null") {
			v.SetZero()
			return true
		}
	}
	switch c.kind {
	case cString:
		s, ok := d.str()
		if ok {
			v.SetString(s)
		}
		return ok
	case cBool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
		case d.literal("false"):
			v.SetBool(false)
		default:
			return false
		}
		return true
	case cInt:
		n, err := strconv.ParseInt(d.number(), 10, 64)
		if err != nil || v.OverflowInt(n) {
			return false
		}
		v.SetInt(n)
		return true
	case cUint:
		n, err := strconv.ParseUint(d.number(), 10, 64)
		if err != nil || v.OverflowUint(n) {
			return false
		}
		v.SetUint(n)
		return true
	case cFloat:
		f, err := strconv.ParseFloat(d.number(), 64)
		if err != nil {
			return false
		}
		v.SetFloat(f)
		return true
	case cUnmarshaler:
		if d.peek() != '"' {
			return false // only a string's bytes (time.Time's): encoding/json gives null and others other paths
		}
		from := d.i
		if _, ok := d.str(); !ok {
			return false
		}
		return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(d.b[from:d.i]) == nil
	case cPtr:
		p := reflect.New(c.elem.typ)
		if !d.value(p.Elem(), c.elem) {
			return false
		}
		v.Set(p)
		return true
	case cSlice:
		return d.slice(v, c)
	case cMap:
		return d.object(v, c)
	case cStruct:
		return d.object(v, c)
	}
	return false
}

func (d *decoder) slice(v reflect.Value, c *codec) bool {
	if d.peek() != '[' || d.depth == 64 {
		return false
	}
	d.i++
	d.depth++
	defer func() { d.depth-- }()
	if d.peek() == ']' {
		d.i++
		v.Set(reflect.MakeSlice(c.typ, 0, 0)) // [] is an empty slice, not nil, as encoding/json reads it
		return true
	}
	s := reflect.MakeSlice(c.typ, 0, 4)
	for n := 0; ; n++ {
		if n == s.Cap() {
			grown := reflect.MakeSlice(c.typ, n, 2*n)
			reflect.Copy(grown, s)
			s = grown
		}
		s = s.Slice(0, n+1)
		if !d.value(s.Index(n), c.elem) { // an element is addressable where it lies
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			v.Set(s)
			return true
		default:
			return false
		}
	}
}

// object reads a struct (keys exactly its fields' names, each once) or a map[string]T (no two
// keys alike without case: the duplicate-key rule).
func (d *decoder) object(v reflect.Value, c *codec) bool {
	if d.peek() != '{' || d.depth == 64 {
		return false
	}
	d.i++
	d.depth++
	defer func() { d.depth-- }()
	var seen uint64
	var keys []string
	if c.kind == cMap {
		v.Set(reflect.MakeMap(c.typ))
	}
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		var k string
		var raw []byte
		var ok bool
		if c.kind == cMap {
			k, ok = d.str()
		} else {
			raw, ok = d.name() // a field's name: printable ASCII, no escape
		}
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if c.kind == cMap {
			for _, o := range keys {
				if strings.EqualFold(o, k) {
					return false
				}
			}
			keys = append(keys, k)
			e := reflect.New(c.elem.typ).Elem()
			if !d.value(e, c.elem) {
				return false
			}
			v.SetMapIndex(reflect.ValueOf(k), e)
		} else {
			f, ok := c.fields[string(raw)]
			if !ok || seen&f.bit != 0 {
				return false
			}
			seen |= f.bit
			if !d.value(v.Field(f.index), f.c) {
				return false
			}
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string: as itself when it has no escape and is valid UTF-8 without control
// characters, through encoding/json when it has escapes or other bytes (so that both read it
// alike).
func (d *decoder) str() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	from := d.i + 1
	n := bytes.IndexByte(d.b[from:], '"')
	if n < 0 {
		return "", false
	}
	raw := d.b[from : from+n]
	if bytes.IndexByte(raw, '\\') < 0 {
		plain := true
		for _, c := range raw {
			if c < 0x20 {
				return "", false
			}
			if c >= utf8.RuneSelf {
				plain = false
			}
		}
		if plain || utf8.Valid(raw) {
			d.i = from + n + 1
			return d.s[from : from+n], true
		}
	}
	j := from
	for ; j < len(d.b) && d.b[j] != '"'; j++ {
		if d.b[j] == '\\' {
			j++
		}
	}
	if j >= len(d.b) {
		return "", false
	}
	var s string
	if json.Unmarshal(d.b[d.i:j+1], &s) != nil {
		return "", false
	}
	d.i = j + 1
	return s, true
}

// number reads a number in JSON's grammar and returns its text ("" if none is next, which
// strconv then refuses).
func (d *decoder) number() string {
	d.space()
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return ""
	}
	digits := func() bool {
		from := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > from
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return ""
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return ""
		}
	}
	s := d.s[d.i:i]
	d.i = i
	return s
}

// name reads an object key of printable ASCII without escapes, where it lies.
func (d *decoder) name() ([]byte, bool) {
	s := Scanner{b: d.b, i: d.i}
	v, ok := s.Plain()
	d.i = s.i
	return v, ok
}

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Scanner reads a document token by token, for a reader written for one exact form (a DSSE
// envelope as signers write it): its strings are printable ASCII without escapes, the only
// strings whose JSON text is their value byte for byte.
type Scanner struct {
	b []byte
	i int
}

// NewScanner scans b from its start.
func NewScanner(b []byte) *Scanner { return &Scanner{b: b} }

// Take skips whitespace and then c, if c is next.
func (s *Scanner) Take(c byte) bool {
	s.i = skipSpace(s.b, s.i)
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Str reads a string of printable ASCII without escapes.
func (s *Scanner) Str() (string, bool) {
	v, ok := s.Plain()
	return string(v), ok
}

// Plain is Str without the copy: the string's bytes where they lie.
func (s *Scanner) Plain() ([]byte, bool) {
	if !s.Take('"') {
		return nil, false
	}
	n := bytes.IndexByte(s.b[s.i:], '"')
	if n < 0 {
		return nil, false
	}
	v := s.b[s.i : s.i+n]
	for _, c := range v {
		if !plainASCII[c] {
			return nil, false
		}
	}
	s.i += n + 1
	return v, true
}

// End skips whitespace and reports whether the document ends there.
func (s *Scanner) End() bool {
	s.i = skipSpace(s.b, s.i)
	return s.i == len(s.b)
}

// plainASCII: the bytes a JSON string holds as themselves (printable ASCII but the backslash;
// the quote ends it).
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '\\'
	}
	return t
}()
