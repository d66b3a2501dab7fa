package attest

import "github.com/sealrun/sealrun/internal/jsonpass"

// fastEnvelope reads a DSSE envelope in the form signers write it, in one pass: an object of
// the members payloadType, payload and signatures, each once and spelled so; signatures an
// array of objects of sig and, optionally, keyid, each once; every string printable ASCII
// without escapes; only JSON whitespace between tokens. Anything else (another member, an
// escape, a null, a duplicate, different case) returns ok false, and the general reading
// (encoding/json and the duplicate-key pass) decides, with its own error. What this reading
// accepts, that one accepts too and reads the same (FuzzEnvelopePaths): the form is a subset
// of JSON on which both read the same values.
func fastEnvelope(b []byte) (e envelope, ok bool) {
	s := jsonpass.NewScanner(b)
	if !s.Take('{') {
		return envelope{}, false
	}
	var seen [3]bool
	for {
		k, ok := s.Str()
		if !ok || !s.Take(':') {
			return envelope{}, false
		}
		switch k {
		case "payloadType", "payload":
			i := 0
			if k == "payload" {
				i = 1
			}
			v, ok := s.Str()
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
			if seen[2] || !s.Take('[') {
				return envelope{}, false
			}
			seen[2] = true
			e.Signatures = []envelopeSig{}
			if !s.Take(']') {
				for {
					sig, ok := envelopeSignature(s)
					if !ok {
						return envelope{}, false
					}
					e.Signatures = append(e.Signatures, sig)
					if s.Take(']') {
						break
					}
					if !s.Take(',') {
						return envelope{}, false
					}
				}
			}
		default:
			return envelope{}, false
		}
		if s.Take('}') {
			break
		}
		if !s.Take(',') {
			return envelope{}, false
		}
	}
	return e, s.End() && seen == [3]bool{true, true, true}
}

// envelopeSignature reads {"keyid":"...","sig":"..."} (keyid optional, either order).
func envelopeSignature(s *jsonpass.Scanner) (sig envelopeSig, ok bool) {
	if !s.Take('{') {
		return sig, false
	}
	var keyid bool
	for {
		k, ok := s.Str()
		if !ok || !s.Take(':') {
			return sig, false
		}
		v, ok := s.Str()
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
		if s.Take('}') {
			return sig, sig.Sig != nil
		}
		if !s.Take(',') {
			return sig, false
		}
	}
}
