package attest

import "bytes"

// fastEnvelope reads a DSSE envelope in the form signers write it, in one pass: an object of
// the members payloadType, payload and signatures, each once and spelled so; signatures an
// array of objects of sig and, optionally, keyid, each once; every string printable ASCII
// without escapes; only JSON whitespace between tokens. Anything else (another member, an
// escape, a null, a duplicate, different case) returns ok false, and the general reading
// (encoding/json and the duplicate-key pass) decides, with its own error. What this reading
// accepts, that one accepts too and reads the same (FuzzEnvelopePaths): the form is a subset
// of JSON on which both read the same values.
func fastEnvelope(b []byte) (e envelope, ok bool) {
	s := jsonScan{b: b}
	if !s.take('{') {
		return envelope{}, false
	}
	var seen [3]bool
	for {
		k, ok := s.str()
		if !ok || !s.take(':') {
			return envelope{}, false
		}
		switch k {
		case "payloadType", "payload":
			i := 0
			if k == "payload" {
				i = 1
			}
			v, ok := s.str()
			if !ok || seen[i] {
				return envelope{}, false
			}
			seen[i] = true
			if i == 0 {
				e.PayloadType = &v
			} else {
				e.Payload = &v
			}
		case "signatures":
			if seen[2] || !s.take('[') {
				return envelope{}, false
			}
			seen[2] = true
			e.Signatures = []envelopeSig{}
			if !s.take(']') {
				for {
					sig, ok := s.signature()
					if !ok {
						return envelope{}, false
					}
					e.Signatures = append(e.Signatures, sig)
					if s.take(']') {
						break
					}
					if !s.take(',') {
						return envelope{}, false
					}
				}
			}
		default:
			return envelope{}, false
		}
		if s.take('}') {
			break
		}
		if !s.take(',') {
			return envelope{}, false
		}
	}
	s.space()
	return e, s.i == len(b) && seen == [3]bool{true, true, true}
}

// signature reads {"keyid":"...","sig":"..."} (keyid optional, either order).
func (s *jsonScan) signature() (sig envelopeSig, ok bool) {
	if !s.take('{') {
		return sig, false
	}
	var keyid bool
	for {
		k, ok := s.str()
		if !ok || !s.take(':') {
			return sig, false
		}
		v, ok := s.str()
		switch {
		case !ok:
			return sig, false
		case k == "keyid" && !keyid:
			keyid, sig.KeyID = true, v
		case k == "sig" && sig.Sig == nil:
			sig.Sig = &v
		default:
			return sig, false
		}
		if s.take('}') {
			return sig, sig.Sig != nil
		}
		if !s.take(',') {
			return sig, false
		}
	}
}

// jsonScan reads the subset of JSON fastEnvelope accepts.
type jsonScan struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// take skips whitespace and then c, if c is next.
func (s *jsonScan) take(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes (the only strings whose JSON text is
// their value byte for byte).
func (s *jsonScan) str() (string, bool) {
	v, ok := s.plain()
	return string(v), ok
}

// plain is str without the copy: the string's bytes where they lie.
func (s *jsonScan) plain() ([]byte, bool) {
	if !s.take('"') {
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

// plainASCII: the bytes a JSON string holds as themselves (printable ASCII but the backslash;
// the quote ends it).
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '\\'
	}
	return t
}()
