package transcript

// Walking JSON that json.Valid passed, without decoding it: a request's members and the
// elements of its message array as sub-slices of the body. encoding/json's decode of a request
// into raw messages scanned each byte three times and copied each message; a scaffold's requests
// are nearly all resent history (236 MB in a 2,000-turn hour).

import (
	"bytes"
	"encoding/json"
	"strings"
)

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// valueEnd returns the index just past the JSON value that starts at i, found by its brackets
// and strings alone (whether it is valid is the caller's to check), or -1 where it runs past
// the end.
func valueEnd(data []byte, i int) int {
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				if i = stringEnd(data, i); i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for i < len(data) && !strings.ContainsRune(",:{}[]\" \t\r\n", rune(data[i])) {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string that starts at i, or -1. Each quote
// is found by bytes.IndexByte (a message's text is most of a request, and most of it strings);
// a quote ends the string unless an odd run of backslashes stands just before it, which is
// where a byte-by-byte walk that skips the byte after each backslash would stop too
// (stringEndBytewise, held to it by FuzzStringEnd).
func stringEnd(data []byte, i int) int {
	from := i + 1
	for j := from; j < len(data); {
		q := bytes.IndexByte(data[j:], '"')
		if q < 0 {
			return -1
		}
		q += j
		k := q
		for k > from && data[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// requestMembers reads a request body — one JSON object — as encoding/json's decode into
// json.RawMessage fields (names, into out) and a []json.RawMessage (messages) would: keys
// matched without case, the last of a repeated key kept. It checks the body as json.Valid
// does, member by member, but a message whose bytes rd read before for api (remembered in
// rd.msgs, valid when they were) is not scanned again. ok is false where the decode would
// refuse the body or this walk cannot say: then the caller decodes it, for its verdict.
func (rd *reader) requestMembers(api string, body []byte, messages string, names []string, out []json.RawMessage) (msgs []json.RawMessage, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	var list []byte
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			if i >= len(body) || body[i] != '"' {
				return nil, false
			}
			kend := stringEnd(body, i)
			if kend < 0 || !json.Valid(body[i:kend]) {
				return nil, false
			}
			var key string
			if bytes.IndexByte(body[i:kend], '\\') >= 0 {
				json.Unmarshal(body[i:kend], &key)
			} else {
				key = string(body[i+1 : kend-1])
			}
			if i = skipSpace(body, kend); i >= len(body) || body[i] != ':' {
				return nil, false
			}
			if i = skipSpace(body, i+1); i >= len(body) {
				return nil, false
			}
			isMessages := strings.EqualFold(key, messages) && body[i] == '['
			var vend int
			if isMessages { // split as it is walked: one pass over most of the body
				if msgs, vend, ok = rd.messageArray(api, body, i); !ok {
					return nil, false
				}
			} else if vend = valueEnd(body, i); vend <= i {
				return nil, false
			}
			val := body[i:vend]
			switch {
			case isMessages:
				list = val
			case !json.Valid(val):
				return nil, false
			case strings.EqualFold(key, messages):
				list, msgs = val, nil
			default:
				for j, n := range names {
					if strings.EqualFold(key, n) {
						out[j] = val
					}
				}
			}
			if i = skipSpace(body, vend); i < len(body) && body[i] == ',' {
				i = skipSpace(body, i+1)
				continue
			}
			if i < len(body) && body[i] == '}' {
				i++
				break
			}
			return nil, false
		}
	}
	if skipSpace(body, i) != len(body) {
		return nil, false // data after the object
	}
	switch {
	case list == nil || string(list) == "null":
		return nil, true
	case list[0] != '[':
		return nil, false // the decode refuses a message list that is no array
	}
	return msgs, true
}

// messageArray splits the JSON array that starts at data[start] into its elements, checking
// it as json.Valid does (an element rd read before is known valid), and returns where it ends:
// just past its closing bracket.
func (rd *reader) messageArray(api string, data []byte, start int) ([]json.RawMessage, int, bool) {
	msgs := []json.RawMessage{}
	i := skipSpace(data, start+1)
	if i < len(data) && data[i] == ']' {
		return msgs, i + 1, true
	}
	for {
		if i >= len(data) {
			return nil, 0, false
		}
		end := valueEnd(data, i)
		if end <= i {
			return nil, 0, false
		}
		el := data[i:end]
		if _, known := rd.msgs[api][string(el)]; !known && !json.Valid(el) {
			return nil, 0, false
		}
		msgs = append(msgs, el)
		if i = skipSpace(data, end); i < len(data) && data[i] == ',' {
			i = skipSpace(data, i+1)
			continue
		}
		if i < len(data) && data[i] == ']' {
			return msgs, i + 1, true
		}
		return nil, 0, false
	}
}
