package transcript

// Reading model exchanges: a request body into its conversation (messages and the tools it
// offers), a response body — JSON or a server-sent event stream — into the messages the model
// answered. This file is what the formats share (the message, its key, the dispatch by API);
// each provider's wire format is a file of its own: openai_chat.go, openai_responses.go,
// anthropic.go, gemini.go. The messages are read whole (msg); only what a transcript shows is
// cut (Part).

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// reader reads bodies into messages. It remembers the form of each tool call's arguments it has
// made (normJSON is slow, and a scaffold resends the same arguments with every request).
type reader struct {
	norm     map[string]string
	normSize int
	// msgs: the message each request message's bytes were read into, by API and those bytes.
	// A scaffold sends the whole conversation again with every request, almost always in the
	// same bytes: each is read once (a 2,000-turn hour's requests are 236 MB, nearly all
	// repeated).
	msgs     map[string]map[string]msg
	msgsSize int
}

func newReader() *reader {
	return &reader{norm: map[string]string{}, msgs: map[string]map[string]msg{}}
}

// memoMsg returns the message raw was read into before under api, or reads it with read and
// remembers it (while the memo holds under maxNormMemo bytes of keys).
func (rd *reader) memoMsg(api string, raw json.RawMessage, read func() (msg, error)) (msg, error) {
	if m, ok := rd.msgs[api][string(raw)]; ok {
		return m, nil
	}
	m, err := read()
	if err == nil && rd.msgsSize+len(raw) <= maxNormMemo {
		m.k, m.keyed = m.key(), true
		if rd.msgs[api] == nil {
			rd.msgs[api] = map[string]msg{}
		}
		rd.msgs[api][string(raw)] = m
		rd.msgsSize += len(raw)
	}
	return m, err
}

// maxNormMemo bounds what the memo of argument forms holds (bytes of keys and values).
const maxNormMemo = 64 << 20

// msg is one message, whole.
type msg struct {
	role  string
	parts []part
	// k is key's value once known (keyed): a remembered message carries it.
	k     [32]byte
	keyed bool
}

type part struct {
	typ, text, name, id string
	err                 bool
}

// key is the message's identity for finding what a request repeats: its role and parts, whole.
func (m *msg) key() [32]byte {
	if m.keyed {
		return m.k
	}
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(m.role)
	for _, p := range m.parts {
		field(p.typ)
		field(p.name)
		field(p.id)
		field(p.text)
		if p.err {
			h.Write([]byte{1})
		} else {
			h.Write([]byte{0})
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// show is the message as a transcript carries it: each text cut to HeadBytes + TailBytes.
func (m *msg) show() Message {
	out := Message{Role: m.role, Parts: make([]Part, 0, len(m.parts))}
	for _, p := range m.parts {
		head, tail, cut := cutText(p.text)
		out.Parts = append(out.Parts, Part{Type: p.typ, Text: head, Tail: tail, Cut: cut, Name: p.name, ID: p.id, Error: p.err})
	}
	return out
}

// cutText keeps the first HeadBytes and the last TailBytes of s (on rune boundaries where the
// text is UTF-8), and counts the bytes between; invalid UTF-8 becomes U+FFFD.
func cutText(s string) (head, tail string, cut int64) {
	if len(s) <= HeadBytes+TailBytes {
		return strings.ToValidUTF8(s, "\uFFFD"), "", 0
	}
	h := HeadBytes
	for h > HeadBytes-4 && h > 0 && !runeStart(s[h]) {
		h--
	}
	t := len(s) - TailBytes
	for t < len(s)-TailBytes+4 && t < len(s) && !runeStart(s[t]) {
		t++
	}
	return strings.ToValidUTF8(s[:h], "\uFFFD"), strings.ToValidUTF8(s[t:], "\uFFFD"), int64(t - h)
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// conversation is what one request asks: its messages in order and the tools it offers.
type conversation struct {
	api   string
	msgs  []msg
	tools []string
}

// geminiMethod is the method of a Gemini API path: /v1beta/models/MODEL:METHOD.
var geminiMethod = regexp.MustCompile(`^/(v1beta|v1)/models/[^/:]+:(generateContent|streamGenerateContent|countTokens)$`)

// apiOf names the API a gateway path speaks ("" for one this version does not read).
func apiOf(path string) string {
	switch path {
	case "/v1/chat/completions":
		return APIChat
	case "/v1/responses":
		return APIResponses
	case "/v1/messages":
		return APIMessages
	}
	if geminiMethod.MatchString(path) {
		return APIGemini
	}
	return ""
}

// readRequest reads a request body of api into its conversation.
func (rd *reader) readRequest(api string, body []byte) (*conversation, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("the request is not a JSON object")
	}
	// One typed decode of the whole body a request: the messages are most of it, and a
	// scaffold sends them all again with every request.
	c := &conversation{api: api}
	var err error
	switch api {
	case APIChat:
		var chat struct {
			Messages  []json.RawMessage `json:"messages"`
			Tools     json.RawMessage   `json:"tools"`
			Functions json.RawMessage   `json:"functions"`
		}
		other := make([]json.RawMessage, 2)
		var ok bool
		if chat.Messages, ok = rd.requestMembers(api, body, "messages", []string{"tools", "functions"}, other); ok {
			chat.Tools, chat.Functions = other[0], other[1]
		} else if err := json.Unmarshal(body, &chat); err != nil {
			return c, fmt.Errorf("messages: %v", err)
		}
		for _, raw := range chat.Messages {
			m, err := rd.memoMsg(api, raw, func() (msg, error) {
				var cm chatMessage
				if err := json.Unmarshal(raw, &cm); err != nil {
					return msg{}, err
				}
				return rd.chatMsg(cm), nil
			})
			if err != nil {
				return c, fmt.Errorf("messages: %v", err)
			}
			c.msgs = append(c.msgs, m)
		}
		c.readChatRequest(rd, nil, chat.Tools, chat.Functions)
	case APIResponses:
		var req struct {
			Instructions json.RawMessage `json:"instructions"`
			Input        json.RawMessage `json:"input"`
			Tools        json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			return c, fmt.Errorf("input: %v", err)
		}
		err = c.readResponsesRequest(rd, req.Instructions, req.Input, req.Tools)
	case APIMessages:
		var m struct {
			System   json.RawMessage   `json:"system"`
			Messages []json.RawMessage `json:"messages"`
			Tools    json.RawMessage   `json:"tools"`
		}
		other := make([]json.RawMessage, 2)
		var ok bool
		if m.Messages, ok = rd.requestMembers(api, body, "messages", []string{"system", "tools"}, other); ok {
			m.System, m.Tools = other[0], other[1]
		} else if err := json.Unmarshal(body, &m); err != nil {
			return c, fmt.Errorf("messages: %v", err)
		}
		c.readMessagesRequest(rd, m.System, nil, m.Tools)
		for _, raw := range m.Messages {
			am, err := rd.memoMsg(api, raw, func() (msg, error) {
				var a anthropicMessage
				if err := json.Unmarshal(raw, &a); err != nil {
					return msg{}, err
				}
				out := msg{role: a.Role}
				rd.anthropicBlocks(&out, a.Content)
				return out, nil
			})
			if err != nil {
				return c, fmt.Errorf("messages: %v", err)
			}
			c.msgs = append(c.msgs, am)
		}
	case APIGemini:
		var g struct {
			SystemInstruction *geminiContent  `json:"systemInstruction"`
			Contents          []geminiContent `json:"contents"`
			Tools             []struct {
				FunctionDeclarations []struct {
					Name string `json:"name"`
				} `json:"functionDeclarations"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &g); err != nil {
			return c, fmt.Errorf("contents: %v", err)
		}
		if g.SystemInstruction != nil {
			m := rd.geminiMsg(*g.SystemInstruction)
			m.role = "system"
			if len(m.parts) > 0 {
				c.msgs = append(c.msgs, m)
			}
		}
		for _, gc := range g.Contents {
			c.msgs = append(c.msgs, rd.geminiMsg(gc))
		}
		for _, t := range g.Tools {
			for _, f := range t.FunctionDeclarations {
				c.tools = append(c.tools, f.Name)
			}
		}
	default:
		return nil, fmt.Errorf("this version does not read the API of this path")
	}
	return c, err
}

// str is a JSON string's value ("" for anything else).
func str(r json.RawMessage) string {
	var s string
	if len(r) > 0 && r[0] == '"' {
		json.Unmarshal(r, &s)
	}
	return s
}

// compactJSON is a JSON value's text in one form (a tool call's arguments): compact, its strings
// escaped one way, its keys in their order; a JSON string that holds JSON is that JSON's form,
// and one that does not, its text. The same arguments sent escaped one way by a provider's
// stream and another by the scaffold's next request are then the same.
func (rd *reader) compactJSON(r json.RawMessage) string {
	if len(r) == 0 || string(r) == "null" {
		return ""
	}
	if r[0] == '"' {
		return rd.compactString(str(r))
	}
	return rd.compactString(string(r))
}

// compactString is compactJSON of a string that may hold JSON (streamed arguments).
func (rd *reader) compactString(s string) string {
	if n, ok := rd.norm[s]; ok {
		return n
	}
	n, ok := normJSON([]byte(s))
	if !ok {
		n = s
	}
	if rd.normSize+len(s)+len(n) <= maxNormMemo {
		rd.norm[s] = n
		rd.normSize += len(s) + len(n)
	}
	return n
}

// normJSON re-writes one JSON value token by token: compact, strings re-escaped (no HTML
// escaping), numbers as written, keys in order. ok is false for anything but one JSON value.
func normJSON(b []byte) (string, bool) {
	if !json.Valid(b) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	type frame struct {
		obj   bool
		n     int
		isKey bool
	}
	var stack []frame
	sep := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.obj {
			if f.isKey {
				if f.n > 0 {
					out.WriteByte(',')
				}
			} else {
				out.WriteByte(':')
			}
		} else if f.n > 0 {
			out.WriteByte(',')
		}
	}
	after := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.obj {
			if !f.isKey {
				f.n++
			}
			f.isKey = !f.isKey
		} else {
			f.n++
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				sep()
				out.WriteByte(byte(v))
				stack = append(stack, frame{obj: v == '{', isKey: true})
			default:
				out.WriteByte(byte(v))
				stack = stack[:len(stack)-1]
				after()
			}
		case string:
			sep()
			enc.Encode(v)
			out.Truncate(out.Len() - 1) // the encoder's newline
			after()
		case json.Number:
			sep()
			out.WriteString(v.String())
			after()
		case bool:
			sep()
			out.WriteString(map[bool]string{true: "true", false: "false"}[v])
			after()
		case nil:
			sep()
			out.WriteString("null")
			after()
		}
	}
	return out.String(), true
}

func toolNames(raw json.RawMessage) []string {
	var tools []struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tools) != nil {
		return nil
	}
	var out []string
	for _, t := range tools {
		switch {
		case t.Function.Name != "":
			out = append(out, t.Function.Name)
		case t.Name != "":
			out = append(out, t.Name)
		case t.Type != "":
			out = append(out, t.Type)
		}
	}
	return out
}

func (m *msg) add(p part) {
	if p.typ == PartText && p.text == "" {
		return
	}
	m.parts = append(m.parts, p)
}

// readResponse reads a response body of api (status 2xx).
func (rd *reader) readResponse(api string, body []byte, streamed bool) ([]msg, string, error) {
	switch api {
	case APIGemini:
		return rd.readGeminiResponse(body, streamed)
	case APIChat:
		return rd.readChatResponse(body, streamed)
	case APIResponses:
		return rd.readResponsesResponse(body, streamed)
	case APIMessages:
		return rd.readMessagesResponse(body, streamed)
	}
	return nil, "", fmt.Errorf("this version does not read the API of this path")
}

// errorMessage is the message of an error body ({"error": {"message": ...}} or {"error": "..."}),
// or its start.
func errorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		if s := str(e.Error); s != "" {
			return s
		}
		var m struct{ Message string }
		if json.Unmarshal(e.Error, &m) == nil && m.Message != "" {
			return m.Message
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
