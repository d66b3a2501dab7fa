package transcript

// OpenAI's chat completions (/v1/chat/completions): a request's messages and tools, and its answer, whole or streamed.

import (
	"encoding/json"
	"fmt"
	"strings"
)

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
