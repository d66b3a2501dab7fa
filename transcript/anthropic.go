package transcript

// Anthropic's messages API (/v1/messages): a request's system, messages and tools, and its answer, whole or streamed.

import (
	"encoding/json"
	"fmt"
	"strings"
)

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
