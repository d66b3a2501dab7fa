package scriptedmodel

// The scripted agent (Provider.Agent) in each API a scaffold speaks.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// turn is what the scripted agent answers: the next command, or the closing text.
type turn struct {
	cmd   string // "" for the closing message
	text  string
	n     int // the step, from 1
	shell shellTool
	poll  string // a running command's session to wait on (Codex's write_stdin), instead of a step
	id    int    // the call's number in the conversation, from 1 (its call id)
}

// isCall says whether the turn calls a tool.
func (tn turn) isCall() bool { return tn.cmd != "" || tn.poll != "" }

// shellTool is the shell tool a request offers, as the agent calls it.
type shellTool struct {
	name  string
	key   string // its command's argument: "command" or "cmd"
	array bool   // the command is an argv (["bash", "-lc", CMD])
	desc  bool   // it takes a description (opencode's bash tool wants one)
}

// shellNames are the shell tools of the scaffolds sealrun knows, in the order one is chosen.
var shellNames = []string{"exec_command", "shell", "Bash", "bash", "run_shell_command", "local_shell"}

// pickShell finds the shell tool among (name, parameters schema) pairs.
func pickShell(tools map[string]json.RawMessage) (shellTool, bool) {
	for _, n := range shellNames {
		schema, ok := tools[n]
		if !ok {
			continue
		}
		var s struct {
			Properties map[string]struct {
				Type json.RawMessage `json:"type"`
			} `json:"properties"`
		}
		json.Unmarshal(schema, &s)
		t := shellTool{name: n, key: "command"}
		if _, ok := s.Properties["cmd"]; ok {
			t.key = "cmd"
		}
		if p, ok := s.Properties[t.key]; ok && strings.Contains(strings.ToLower(string(p.Type)), "array") {
			t.array = true
		}
		_, t.desc = s.Properties["description"]
		return t, true
	}
	return shellTool{}, false
}

// call is the tool call of a turn: its tool's name and its arguments (JSON).
func (tn turn) call() (name, args string) {
	if tn.poll != "" {
		id, _ := strconv.Atoi(tn.poll)
		b, _ := json.Marshal(map[string]any{"session_id": id, "chars": "", "yield_time_ms": 30000})
		return "write_stdin", string(b)
	}
	return tn.shell.name, tn.shell.args(tn.cmd, tn.n)
}

func (t shellTool) args(cmd string, n int) string {
	m := map[string]any{t.key: cmd}
	if t.array {
		m[t.key] = []string{"bash", "-lc", cmd}
	}
	if t.desc {
		m["description"] = fmt.Sprintf("step %d", n)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// agentTurn answers one request of the scripted agent, in the API of its path.
func (p *Provider) agentTurn(path string, body []byte) Response {
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return p.chatTurn(body)
	case strings.HasSuffix(path, "/responses"):
		return p.responsesTurn(body)
	case strings.HasSuffix(path, "/messages"):
		return p.messagesTurn(body)
	case strings.Contains(path, ":generateContent") || strings.Contains(path, ":streamGenerateContent"):
		return p.geminiTurn(body, strings.Contains(path, ":streamGenerateContent"))
	case strings.Contains(path, ":countTokens"):
		return Response{Body: `{"totalTokens":100}`}
	}
	return p.Default
}

// running is what Codex's exec_command answers when a command outlives its yield time: the
// agent waits on the session (write_stdin with no input) rather than take its next step.
var running = regexp.MustCompile(`Process running with session ID (\d+)`)

// next decides the agent's turn from what the conversation holds: the names of the tool calls
// made so far, the last tool result, the shell tool offered, and the request's system prompt (a
// request of another session than the first that offered a shell tool is answered in plain
// words). Steps are counted by the shell tool's calls. It is called with p.mu held (serve).
func (p *Provider) next(system string, tools map[string]json.RawMessage, calls []string, last string) turn {
	sh, ok := pickShell(tools)
	done := 0
	for _, c := range calls {
		if c == sh.name {
			done++
		}
	}
	sum := sha256.Sum256([]byte(system))
	key := hex.EncodeToString(sum[:])
	if ok && p.main == "" {
		p.main = key
	}
	main := ok && p.main == key
	steps := p.steps
	if !main {
		return turn{text: "OK."}
	}
	id := len(calls) + 1
	if m := running.FindStringSubmatch(last); m != nil {
		if _, ok := tools["write_stdin"]; ok {
			return turn{poll: m[1], n: done, shell: sh, id: id}
		}
	}
	if done >= len(steps) {
		return turn{text: fmt.Sprintf("Done: %d steps run.", done), n: done}
	}
	return turn{cmd: steps[done](last), n: done + 1, shell: sh, id: id}
}

func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, x := range parts {
			b.WriteString(x.Text)
		}
		return b.String()
	}
	return string(raw)
}

// --- OpenAI chat completions ---

func (p *Provider) chatTurn(body []byte) Response {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var calls []string
	last, system := "", ""
	for _, m := range req.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.Function.Name)
		}
		switch m.Role {
		case "tool":
			last = textOf(m.Content)
		case "system":
			if system == "" {
				system = textOf(m.Content)
			}
		}
	}
	tools := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		tools[t.Function.Name] = t.Function.Parameters
	}
	tn := p.next(system, tools, calls, last)
	chunk := func(choices string) string {
		return `{"id":"chatcmpl-agent","object":"chat.completion.chunk","created":1,"model":` + strconv.Quote(req.Model) + `,"choices":[` + choices + `]}`
	}
	usage := `{"id":"chatcmpl-agent","object":"chat.completion.chunk","created":1,"model":` + strconv.Quote(req.Model) +
		`,"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":10}}}`
	if !tn.isCall() {
		if !req.Stream {
			return Response{Body: ChatCompletion(tn.text, 100, 20)}
		}
		return Response{Events: []string{
			chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`),
			chunk(`{"index":0,"delta":{"content":` + strconv.Quote(tn.text) + `},"finish_reason":null}`),
			chunk(`{"index":0,"delta":{},"finish_reason":"stop"}`), usage}}
	}
	name, args := tn.call()
	id := fmt.Sprintf("call_%d", tn.id)
	if !req.Stream {
		return Response{Body: strings.Replace(ToolCall(name, args), `"call_1"`, strconv.Quote(id), 1)}
	}
	return Response{Events: []string{
		chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`),
		chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":` + strconv.Quote(id) + `,"type":"function","function":{"name":` + strconv.Quote(name) + `,"arguments":""}}]},"finish_reason":null}`),
		chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + strconv.Quote(args) + `}}]},"finish_reason":null}`),
		chunk(`{"index":0,"delta":{},"finish_reason":"tool_calls"}`), usage}}
}

// --- OpenAI Responses API (Codex CLI) ---

func (p *Provider) responsesTurn(body []byte) Response {
	var req struct {
		Model        string            `json:"model"`
		Stream       bool              `json:"stream"`
		Instructions string            `json:"instructions"`
		Input        []json.RawMessage `json:"input"`
		Tools        []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var calls []string
	last, system := "", req.Instructions
	for _, raw := range req.Input {
		var it struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Name    string          `json:"name"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		}
		json.Unmarshal(raw, &it)
		switch it.Type {
		case "function_call", "custom_tool_call", "local_shell_call":
			calls = append(calls, it.Name)
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			last = textOf(it.Output)
		case "message", "":
			if (it.Role == "developer" || it.Role == "system") && system == "" {
				system = textOf(it.Content)
			}
		}
	}
	tools := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		if t.Type == "function" {
			tools[t.Name] = t.Parameters
		}
	}
	tn := p.next(system, tools, calls, last)
	name, args := tn.call()
	var item string
	if !tn.isCall() {
		item = `{"type":"message","id":"msg_agent","role":"assistant","status":"completed","content":[{"type":"output_text","text":` + strconv.Quote(tn.text) + `,"annotations":[]}]}`
	} else {
		item = fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":%q,"arguments":%s,"status":"completed"}`, tn.id, tn.id, name, strconv.Quote(args))
	}
	usage := `{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":120}`
	final := `{"id":"resp_agent","object":"response","created_at":1,"status":"completed","model":` + strconv.Quote(req.Model) + `,"output":[` + item + `],"usage":` + usage + `}`
	if !req.Stream {
		return Response{Body: final}
	}
	added := item
	if tn.isCall() {
		added = fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":%q,"arguments":"","status":"in_progress"}`, tn.id, tn.id, name)
	}
	ev := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_agent","object":"response","status":"in_progress","model":` + strconv.Quote(req.Model) + `,"output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":` + added + `}`,
	}
	names := []string{"response.created", "response.output_item.added"}
	if tn.isCall() {
		ev = append(ev, fmt.Sprintf(`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_%d","output_index":0,"delta":%s}`, tn.id, strconv.Quote(args)))
		names = append(names, "response.function_call_arguments.delta")
	} else {
		ev = append(ev, `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_agent","output_index":0,"content_index":0,"delta":`+strconv.Quote(tn.text)+`}`)
		names = append(names, "response.output_text.delta")
	}
	ev = append(ev, `{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+item+`}`,
		`{"type":"response.completed","sequence_number":4,"response":`+final+`}`)
	names = append(names, "response.output_item.done", "response.completed")
	return Response{Events: ev, EventNames: names}
}

// --- Anthropic messages (Claude Code) ---

func (p *Provider) messagesTurn(body []byte) Response {
	var req struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var calls []string
	last := ""
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Name    string          `json:"name"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				calls = append(calls, b.Name)
			case "tool_result":
				last = textOf(b.Content)
			}
		}
	}
	tools := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		tools[t.Name] = t.InputSchema
	}
	tn := p.next(textOf(req.System), tools, calls, last)
	name, args := tn.call()
	usage := `{"input_tokens":100,"cache_read_input_tokens":40,"cache_creation_input_tokens":0,"output_tokens":20}`
	var block, stop string
	if !tn.isCall() {
		block, stop = `{"type":"text","text":`+strconv.Quote(tn.text)+`}`, "end_turn"
	} else {
		block, stop = fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":%q,"input":%s}`, tn.id, name, args), "tool_use"
	}
	if !req.Stream {
		return Response{Body: `{"id":"msg_agent","type":"message","role":"assistant","model":` + strconv.Quote(req.Model) + `,"content":[` + block + `],"stop_reason":"` + stop + `","stop_sequence":null,"usage":` + usage + `}`}
	}
	start, delta := `{"type":"text","text":""}`, `{"type":"text_delta","text":`+strconv.Quote(tn.text)+`}`
	if tn.isCall() {
		start = fmt.Sprintf(`{"type":"tool_use","id":"toolu_%d","name":%q,"input":{}}`, tn.id, name)
		delta = `{"type":"input_json_delta","partial_json":` + strconv.Quote(args) + `}`
	}
	return Response{EventNames: []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, Events: []string{
		`{"type":"message_start","message":{"id":"msg_agent","type":"message","role":"assistant","model":` + strconv.Quote(req.Model) + `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":` + usage + `}}`,
		`{"type":"content_block_start","index":0,"content_block":` + start + `}`,
		`{"type":"content_block_delta","index":0,"delta":` + delta + `}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"` + stop + `","stop_sequence":null},"usage":{"output_tokens":20}}`,
		`{"type":"message_stop"}`}}
}

// --- Google's Gemini API (Gemini CLI) ---

func (p *Provider) geminiTurn(body []byte, stream bool) Response {
	var req struct {
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionCall *struct {
					Name string `json:"name"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	json.Unmarshal(body, &req)
	var calls []string
	last := ""
	for _, c := range req.Contents {
		for _, pt := range c.Parts {
			if pt.FunctionCall != nil {
				calls = append(calls, pt.FunctionCall.Name)
			}
			if r := pt.FunctionResponse; r != nil {
				var out struct {
					Output *string `json:"output"`
				}
				if json.Unmarshal(r.Response, &out) == nil && out.Output != nil {
					last = *out.Output
				} else {
					last = string(r.Response)
				}
			}
		}
	}
	system := ""
	for _, pt := range req.SystemInstruction.Parts {
		system += pt.Text
	}
	tools := map[string]json.RawMessage{}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if schema == nil {
				schema = f.Parameters
			}
			tools[f.Name] = schema
		}
	}
	tn := p.next(system, tools, calls, last)
	part := `{"text":` + strconv.Quote(tn.text) + `}`
	if tn.isCall() {
		name, args := tn.call()
		part = fmt.Sprintf(`{"functionCall":{"name":%q,"args":%s}}`, name, args)
	}
	answer := `{"candidates":[{"content":{"role":"model","parts":[` + part + `]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":40,"candidatesTokenCount":20,"thoughtsTokenCount":10,"totalTokenCount":130},"modelVersion":"scripted"}`
	if !stream {
		return Response{Body: answer}
	}
	return Response{Events: []string{answer}, NoDone: true}
}
