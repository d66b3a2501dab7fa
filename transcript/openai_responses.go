package transcript

// OpenAI's Responses API (/v1/responses): a request's input items and instructions, and its answer, whole or streamed.

import (
	"encoding/json"
	"fmt"
	"strings"
)

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
