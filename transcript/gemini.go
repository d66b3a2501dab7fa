package transcript

// Google's Gemini API (models/M:generateContent, streamGenerateContent): a request's contents and tools, and its answer, whole or streamed.

import (
	"encoding/json"
	"fmt"
)

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
