package transcript

// Reading model exchanges: a request body into its conversation (messages and the tools it
// offers), a response body — JSON or a server-sent event stream — into the messages the model
// answered, for OpenAI's chat completions, OpenAI's Responses API and Anthropic's messages. The
// messages are read whole here (msg); only what a transcript shows is cut (Part).

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

// --- OpenAI chat completions ---

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          string          `json:"refusal"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function_call"`
}

func (c *conversation) readChatRequest(rd *reader, msgs []chatMessage, tools, functions json.RawMessage) {
	for _, m := range msgs {
		c.msgs = append(c.msgs, rd.chatMsg(m))
	}
	c.tools = toolNames(tools)
	if len(c.tools) == 0 {
		c.tools = toolNames(functions)
	}
}

func (rd *reader) chatMsg(m chatMessage) msg {
	out := msg{role: m.Role}
	if out.role == "function" {
		out.role = "tool"
	}
	for _, r := range []string{m.ReasoningContent, m.Reasoning} {
		if r != "" {
			out.add(part{typ: PartReasoning, text: r})
		}
	}
	textType := PartText
	if out.role == "tool" {
		textType = PartToolResult
	}
	rd.contentParts(&out, m.Content, textType, m.ToolCallID)
	if m.Refusal != "" {
		out.add(part{typ: PartText, text: m.Refusal, name: "refusal"})
	}
	for _, tc := range m.ToolCalls {
		name := tc.Function.Name
		if name == "" {
			name = tc.Type
		}
		out.add(part{typ: PartToolCall, name: name, id: tc.ID, text: rd.compactJSON(tc.Function.Arguments)})
	}
	if m.FunctionCall != nil {
		out.add(part{typ: PartToolCall, name: m.FunctionCall.Name, text: rd.compactJSON(m.FunctionCall.Arguments)})
	}
	if out.role == "tool" && len(out.parts) == 0 {
		out.parts = append(out.parts, part{typ: PartToolResult, id: m.ToolCallID})
	}
	return out
}

// contentParts reads a content value: a string, or an array of typed parts (text, image,
// refusal, input_text, output_text, ...); text becomes parts of textType (a tool result's, with
// id).
func (rd *reader) contentParts(m *msg, content json.RawMessage, textType, id string) {
	if len(content) == 0 || string(content) == "null" {
		return
	}
	if content[0] == '"' {
		m.add(part{typ: textType, text: str(content), id: id})
		return
	}
	var items []json.RawMessage
	if json.Unmarshal(content, &items) != nil {
		m.add(part{typ: PartOther, name: "content", text: rd.compactJSON(content)})
		return
	}
	var texts []string
	flush := func() {
		if len(texts) > 0 {
			m.add(part{typ: textType, text: strings.Join(texts, "\n"), id: id})
			texts = nil
		}
	}
	for _, it := range items {
		var p struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Refusal string `json:"refusal"`
		}
		json.Unmarshal(it, &p)
		switch p.Type {
		case "text", "input_text", "output_text", "summary_text", "reasoning_text":
			texts = append(texts, p.Text)
		case "refusal":
			texts = append(texts, p.Refusal)
		case "image_url", "input_image", "image":
			flush()
			m.add(part{typ: PartImage, name: p.Type})
		default:
			flush()
			m.add(part{typ: PartOther, name: p.Type, text: rd.compactJSON(it)})
		}
	}
	flush()
}

// readChatResponse reads a chat completion (JSON) or its chunks (a stream).
func (rd *reader) readChatResponse(body []byte, streamed bool) ([]msg, string, error) {
	if !streamed {
		var r struct {
			Choices []struct {
				Message      chatMessage `json:"message"`
				FinishReason string      `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, "", fmt.Errorf("the response is not a chat completion: %v", err)
		}
		var out []msg
		stop := ""
		for _, ch := range r.Choices {
			if ch.Message.Role == "" {
				ch.Message.Role = "assistant"
			}
			out = append(out, rd.chatMsg(ch.Message))
			if stop == "" {
				stop = ch.FinishReason
			}
		}
		return out, stop, nil
	}
	type call struct{ id, name, args strings.Builder }
	var content, reasoning, refusal strings.Builder
	var calls []*call
	stop := ""
	err := eachEvent(body, func(_ string, data []byte) {
		var ch struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content          *string `json:"content"`
					ReasoningContent *string `json:"reasoning_content"`
					Reasoning        *string `json:"reasoning"`
					Refusal          *string `json:"refusal"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if json.Unmarshal(data, &ch) != nil {
			return
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			d := c.Delta
			for _, s := range []struct {
				v *string
				b *strings.Builder
			}{{d.Content, &content}, {d.ReasoningContent, &reasoning}, {d.Reasoning, &reasoning}, {d.Refusal, &refusal}} {
				if s.v != nil {
					s.b.WriteString(*s.v)
				}
			}
			for _, tc := range d.ToolCalls {
				for len(calls) <= tc.Index && tc.Index < 4096 {
					calls = append(calls, &call{})
				}
				if tc.Index >= len(calls) || tc.Index < 0 {
					continue
				}
				k := calls[tc.Index]
				k.id.WriteString(tc.ID)
				k.name.WriteString(tc.Function.Name)
				k.args.WriteString(tc.Function.Arguments)
			}
			if c.FinishReason != nil && *c.FinishReason != "" {
				stop = *c.FinishReason
			}
		}
	})
	m := msg{role: "assistant"}
	if reasoning.Len() > 0 {
		m.add(part{typ: PartReasoning, text: reasoning.String()})
	}
	m.add(part{typ: PartText, text: content.String()})
	if refusal.Len() > 0 {
		m.add(part{typ: PartText, text: refusal.String(), name: "refusal"})
	}
	for _, k := range calls {
		m.add(part{typ: PartToolCall, name: k.name.String(), id: k.id.String(), text: rd.compactString(k.args.String())})
	}
	return []msg{m}, stop, err
}

// --- OpenAI Responses API ---

// responsesItems turns Responses API items (input or output) into messages: consecutive
// assistant items (text, reasoning, tool calls) are one message; each tool output is one.
func (rd *reader) responsesItems(items []json.RawMessage, defaultRole string) []msg {
	var out []msg
	cur := func(role string) *msg {
		if n := len(out); n > 0 && role == "assistant" && out[n-1].role == "assistant" {
			return &out[n-1]
		}
		out = append(out, msg{role: role})
		return &out[len(out)-1]
	}
	for _, it := range items {
		var x struct {
			Type      string            `json:"type"`
			Role      string            `json:"role"`
			Content   json.RawMessage   `json:"content"`
			CallID    string            `json:"call_id"`
			Name      string            `json:"name"`
			Arguments json.RawMessage   `json:"arguments"`
			Input     json.RawMessage   `json:"input"`
			Output    json.RawMessage   `json:"output"`
			Action    json.RawMessage   `json:"action"`
			Summary   []json.RawMessage `json:"summary"`
			Encrypted string            `json:"encrypted_content"`
		}
		if json.Unmarshal(it, &x) != nil {
			continue
		}
		switch x.Type {
		case "message", "":
			role := x.Role
			if role == "" {
				role = defaultRole
			}
			var m *msg
			if role == "assistant" {
				m = cur(role)
			} else {
				out = append(out, msg{role: role})
				m = &out[len(out)-1]
			}
			rd.contentParts(m, x.Content, PartText, "")
		case "reasoning":
			m := cur("assistant")
			var texts []string
			for _, s := range x.Summary {
				var t struct{ Text string }
				json.Unmarshal(s, &t)
				texts = append(texts, t.Text)
			}
			var content []struct{ Text string }
			json.Unmarshal(x.Content, &content)
			for _, c := range content {
				texts = append(texts, c.Text)
			}
			p := part{typ: PartReasoning, text: strings.Join(texts, "\n\n")}
			if p.text == "" && x.Encrypted != "" {
				p.name = "encrypted"
			}
			m.parts = append(m.parts, p)
		case "function_call":
			cur("assistant").add(part{typ: PartToolCall, name: x.Name, id: x.CallID, text: rd.compactJSON(x.Arguments)})
		case "custom_tool_call":
			cur("assistant").add(part{typ: PartToolCall, name: x.Name, id: x.CallID, text: str(x.Input)})
		case "local_shell_call":
			cur("assistant").add(part{typ: PartToolCall, name: "local_shell", id: x.CallID, text: rd.compactJSON(x.Action)})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			m := msg{role: "tool"}
			if len(x.Output) > 0 && x.Output[0] == '[' {
				rd.contentParts(&m, x.Output, PartToolResult, x.CallID)
			} else {
				m.add(part{typ: PartToolResult, id: x.CallID, text: str(x.Output)})
			}
			if len(m.parts) == 0 {
				m.parts = append(m.parts, part{typ: PartToolResult, id: x.CallID})
			}
			out = append(out, m)
		default:
			role := "assistant"
			if strings.HasSuffix(x.Type, "_output") {
				role = "tool"
			}
			m := cur(role)
			m.add(part{typ: PartOther, name: x.Type, id: x.CallID, text: rd.compactJSON(it)})
		}
	}
	return out
}

func (c *conversation) readResponsesRequest(rd *reader, instructions, in, tools json.RawMessage) error {
	if s := str(instructions); s != "" {
		c.msgs = append(c.msgs, msg{role: "system", parts: []part{{typ: PartText, text: s}}})
	}
	switch {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		c.msgs = append(c.msgs, msg{role: "user", parts: []part{{typ: PartText, text: str(in)}}})
	default:
		var items []json.RawMessage
		if err := json.Unmarshal(in, &items); err != nil {
			return fmt.Errorf("input: %v", err)
		}
		c.msgs = append(c.msgs, rd.responsesItems(items, "user")...)
	}
	c.tools = toolNames(tools)
	return nil
}

type responsesObject struct {
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func (r *responsesObject) stop() string {
	if r.IncompleteDetails != nil && r.IncompleteDetails.Reason != "" {
		return r.Status + ": " + r.IncompleteDetails.Reason
	}
	if r.Error != nil && r.Error.Message != "" {
		return r.Status + ": " + r.Error.Message
	}
	return r.Status
}

// readResponsesResponse reads a response object (JSON) or its event stream: the output of its
// response.completed (or .incomplete, .failed) event; without one (a stream cut short), the
// items as they were streamed.
func (rd *reader) readResponsesResponse(body []byte, streamed bool) ([]msg, string, error) {
	if !streamed {
		var r responsesObject
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, "", fmt.Errorf("the response is not a Responses API object: %v", err)
		}
		return rd.responsesItems(r.Output, "assistant"), r.stop(), nil
	}
	var final *responsesObject
	type item struct {
		done json.RawMessage
		typ  string
		text strings.Builder
		args strings.Builder
		name string
		id   string
	}
	var items []*item
	at := func(i int) *item {
		for len(items) <= i && i < 4096 {
			items = append(items, &item{})
		}
		if i < 0 || i >= len(items) {
			return &item{}
		}
		return items[i]
	}
	err := eachEvent(body, func(event string, data []byte) {
		var e struct {
			Type        string           `json:"type"`
			OutputIndex int              `json:"output_index"`
			Delta       string           `json:"delta"`
			Item        json.RawMessage  `json:"item"`
			Response    *responsesObject `json:"response"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		if e.Type == "" {
			e.Type = event
		}
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed":
			if e.Response != nil {
				final = e.Response
			}
		case "response.output_item.added":
			var x struct{ Type, Name, CallID string }
			json.Unmarshal(e.Item, &x)
			it := at(e.OutputIndex)
			it.typ, it.name, it.id = x.Type, x.Name, x.CallID
		case "response.output_item.done":
			at(e.OutputIndex).done = e.Item
		case "response.output_text.delta", "response.reasoning_summary_text.delta", "response.reasoning_text.delta", "response.refusal.delta":
			at(e.OutputIndex).text.WriteString(e.Delta)
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			at(e.OutputIndex).args.WriteString(e.Delta)
		}
	})
	if final != nil && len(final.Output) > 0 {
		return rd.responsesItems(final.Output, "assistant"), final.stop(), err
	}
	var raw []json.RawMessage
	for _, it := range items {
		if it.done != nil {
			raw = append(raw, it.done)
			continue
		}
		// An item the stream never finished: what arrived of it.
		var b []byte
		switch it.typ {
		case "reasoning":
			b, _ = json.Marshal(map[string]any{"type": "reasoning", "summary": []map[string]string{{"type": "summary_text", "text": it.text.String()}}})
		case "function_call":
			b, _ = json.Marshal(map[string]any{"type": "function_call", "name": it.name, "call_id": it.id, "arguments": it.args.String()})
		case "custom_tool_call":
			b, _ = json.Marshal(map[string]any{"type": "custom_tool_call", "name": it.name, "call_id": it.id, "input": it.args.String()})
		default:
			b, _ = json.Marshal(map[string]any{"type": "message", "role": "assistant", "content": []map[string]string{{"type": "output_text", "text": it.text.String()}}})
		}
		raw = append(raw, b)
	}
	stop := ""
	if final != nil {
		stop = final.stop()
	}
	return rd.responsesItems(raw, "assistant"), stop, err
}

// --- Anthropic messages ---

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlocks reads a content value (a string, or blocks) into m.
func (rd *reader) anthropicBlocks(m *msg, content json.RawMessage) {
	if len(content) > 0 && content[0] == '"' {
		m.add(part{typ: PartText, text: str(content)})
		return
	}
	var blocks []json.RawMessage
	if json.Unmarshal(content, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		rd.anthropicBlock(m, b)
	}
}

func (rd *reader) anthropicBlock(m *msg, b json.RawMessage) {
	var x struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(b, &x) != nil {
		return
	}
	switch x.Type {
	case "text":
		m.add(part{typ: PartText, text: x.Text})
	case "thinking":
		m.parts = append(m.parts, part{typ: PartReasoning, text: x.Thinking})
	case "redacted_thinking":
		m.parts = append(m.parts, part{typ: PartReasoning, name: "redacted"})
	case "tool_use", "server_tool_use":
		m.add(part{typ: PartToolCall, name: x.Name, id: x.ID, text: rd.compactJSON(x.Input)})
	case "tool_result":
		r := msg{}
		if len(x.Content) > 0 && x.Content[0] == '[' {
			rd.contentParts(&r, x.Content, PartToolResult, x.ToolUseID)
		} else {
			r.add(part{typ: PartToolResult, id: x.ToolUseID, text: str(x.Content)})
		}
		if len(r.parts) == 0 {
			r.parts = append(r.parts, part{typ: PartToolResult, id: x.ToolUseID})
		}
		for _, p := range r.parts {
			p.err = x.IsError
			m.parts = append(m.parts, p)
		}
	case "image", "document":
		m.add(part{typ: PartImage, name: x.Type})
	default:
		m.add(part{typ: PartOther, name: x.Type, id: x.ToolUseID, text: rd.compactJSON(b)})
	}
}

func (c *conversation) readMessagesRequest(rd *reader, sys json.RawMessage, msgs []anthropicMessage, tools json.RawMessage) {
	if len(sys) > 0 && string(sys) != "null" {
		m := msg{role: "system"}
		rd.anthropicBlocks(&m, sys)
		if len(m.parts) > 0 {
			c.msgs = append(c.msgs, m)
		}
	}
	for _, am := range msgs {
		m := msg{role: am.Role}
		rd.anthropicBlocks(&m, am.Content)
		c.msgs = append(c.msgs, m)
	}
	c.tools = toolNames(tools)
}

// readMessagesResponse reads a message (JSON) or its event stream.
func (rd *reader) readMessagesResponse(body []byte, streamed bool) ([]msg, string, error) {
	if !streamed {
		var r struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			StopReason string          `json:"stop_reason"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, "", fmt.Errorf("the response is not an Anthropic message: %v", err)
		}
		m := msg{role: "assistant"}
		rd.anthropicBlocks(&m, r.Content)
		return []msg{m}, r.StopReason, nil
	}
	type block struct {
		start json.RawMessage
		text  strings.Builder
		input strings.Builder
	}
	var blocks []*block
	at := func(i int) *block {
		for len(blocks) <= i && i < 4096 {
			blocks = append(blocks, &block{})
		}
		if i < 0 || i >= len(blocks) {
			return &block{}
		}
		return blocks[i]
	}
	stop := ""
	err := eachEvent(body, func(event string, data []byte) {
		var e struct {
			Type         string          `json:"type"`
			Index        int             `json:"index"`
			ContentBlock json.RawMessage `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				Thinking    string `json:"thinking"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if json.Unmarshal(data, &e) != nil {
			return
		}
		switch e.Type {
		case "content_block_start":
			at(e.Index).start = e.ContentBlock
		case "content_block_delta":
			b := at(e.Index)
			switch e.Delta.Type {
			case "text_delta":
				b.text.WriteString(e.Delta.Text)
			case "thinking_delta":
				b.text.WriteString(e.Delta.Thinking)
			case "input_json_delta":
				b.input.WriteString(e.Delta.PartialJSON)
			}
		case "message_delta":
			if e.Delta.StopReason != "" {
				stop = e.Delta.StopReason
			}
		}
	})
	m := msg{role: "assistant"}
	for _, b := range blocks {
		var start map[string]json.RawMessage
		if json.Unmarshal(b.start, &start) != nil {
			start = map[string]json.RawMessage{"type": json.RawMessage(`"text"`)}
		}
		switch str(start["type"]) {
		case "text":
			start["text"], _ = json.Marshal(str(start["text"]) + b.text.String())
		case "thinking":
			start["thinking"], _ = json.Marshal(str(start["thinking"]) + b.text.String())
		case "tool_use", "server_tool_use":
			if b.input.Len() > 0 {
				in := b.input.String()
				if json.Valid([]byte(in)) {
					start["input"] = json.RawMessage(in)
				} else {
					start["input"], _ = json.Marshal(in) // cut short: what arrived, as text
				}
			}
		}
		full, _ := json.Marshal(start)
		rd.anthropicBlock(&m, full)
	}
	return []msg{m}, stop, err
}

// --- Google's Gemini API ---

// geminiContent is a Content: a role (user, model) and its parts.
type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiPart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	InlineData          json.RawMessage `json:"inlineData"`
	FileData            json.RawMessage `json:"fileData"`
	ExecutableCode      json.RawMessage `json:"executableCode"`
	CodeExecutionResult json.RawMessage `json:"codeExecutionResult"`
}

// geminiMsg reads a Content. Adjacent texts of one kind are one part: a stream's chunks, and
// the same answer sent back whole or in its chunks, read the same.
func (rd *reader) geminiMsg(c geminiContent) msg {
	m := msg{role: c.Role}
	if m.role == "model" {
		m.role = "assistant"
	}
	rd.geminiParts(&m, c.Parts)
	return m
}

func (rd *reader) geminiParts(m *msg, parts []geminiPart) {
	for _, p := range parts {
		switch {
		case p.Text != nil:
			typ := PartText
			if p.Thought {
				typ = PartReasoning
			}
			if n := len(m.parts); n > 0 && m.parts[n-1].typ == typ && m.parts[n-1].name == "" {
				m.parts[n-1].text += *p.Text
				continue
			}
			if *p.Text != "" || typ == PartReasoning {
				m.parts = append(m.parts, part{typ: typ, text: *p.Text})
			}
		case p.FunctionCall != nil:
			m.parts = append(m.parts, part{typ: PartToolCall, name: p.FunctionCall.Name, id: p.FunctionCall.ID, text: rd.compactJSON(p.FunctionCall.Args)})
		case p.FunctionResponse != nil:
			text := rd.compactJSON(p.FunctionResponse.Response)
			var r struct {
				Output *string `json:"output"`
			}
			if json.Unmarshal(p.FunctionResponse.Response, &r) == nil && r.Output != nil {
				text = *r.Output // the usual shape: {"output": "..."}
			}
			m.parts = append(m.parts, part{typ: PartToolResult, name: p.FunctionResponse.Name, id: p.FunctionResponse.ID, text: text})
		case p.InlineData != nil || p.FileData != nil:
			m.parts = append(m.parts, part{typ: PartImage, name: "inlineData"})
		case p.ExecutableCode != nil:
			m.parts = append(m.parts, part{typ: PartOther, name: "executableCode", text: rd.compactJSON(p.ExecutableCode)})
		case p.CodeExecutionResult != nil:
			m.parts = append(m.parts, part{typ: PartOther, name: "codeExecutionResult", text: rd.compactJSON(p.CodeExecutionResult)})
		}
	}
}

// geminiChunk is a GenerateContentResponse, whole or one chunk of a stream.
type geminiChunk struct {
	Candidates []struct {
		Content      geminiContent `json:"content"`
		FinishReason string        `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
}

// readGeminiResponse reads a generateContent answer or the chunks of a stream (their first
// candidate's parts, in order), or a countTokens answer (no message).
func (rd *reader) readGeminiResponse(body []byte, streamed bool) ([]msg, string, error) {
	m := msg{role: "assistant"}
	stop := ""
	add := func(ch geminiChunk) {
		if ch.PromptFeedback != nil && ch.PromptFeedback.BlockReason != "" {
			stop = "blocked: " + ch.PromptFeedback.BlockReason
		}
		if len(ch.Candidates) == 0 {
			return
		}
		rd.geminiParts(&m, ch.Candidates[0].Content.Parts)
		if r := ch.Candidates[0].FinishReason; r != "" {
			stop = r
		}
	}
	if !streamed {
		var ch geminiChunk
		if err := json.Unmarshal(body, &ch); err != nil {
			return nil, "", fmt.Errorf("the response is not a Gemini API answer: %v", err)
		}
		if ch.Candidates == nil && ch.PromptFeedback == nil {
			return nil, "", nil // countTokens: a count, no message
		}
		add(ch)
		return []msg{m}, stop, nil
	}
	err := eachEvent(body, func(_ string, data []byte) {
		var ch geminiChunk
		if json.Unmarshal(data, &ch) == nil {
			add(ch)
		}
	})
	return []msg{m}, stop, err
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
