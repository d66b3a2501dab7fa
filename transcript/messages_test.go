package transcript

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// show is a compact form of messages for comparing: "role: type[name/id]=text | ...".
func showMsgs(ms []msg) []string {
	var out []string
	for _, m := range ms {
		var ps []string
		for _, p := range m.parts {
			s := p.typ
			if p.name != "" || p.id != "" {
				s += "[" + p.name + "/" + p.id + "]"
			}
			if p.err {
				s += "!"
			}
			ps = append(ps, s+"="+p.text)
		}
		out = append(out, m.role+": "+strings.Join(ps, " | "))
	}
	return out
}

func sse(events ...string) []byte {
	var b strings.Builder
	for _, e := range events {
		if name, data, ok := strings.Cut(e, "\n"); ok && strings.HasPrefix(name, "event:") {
			fmt.Fprintf(&b, "%s\ndata: %s\n\n", name, data)
			continue
		}
		fmt.Fprintf(&b, "data: %s\n\n", e)
	}
	return []byte(b.String())
}

// Each API's request and response shapes, as the providers document them, streamed and not,
// read into one message shape.
func TestReadAPIs(t *testing.T) {
	chatReq := `{"model":"gpt-x","stream":true,"messages":[
		{"role":"system","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"list files"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
		{"role":"assistant","content":null,"reasoning_content":"I should use ls","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\": \"ls \\u0026\\u0026 pwd\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"a.txt\nb.txt"}],
		"tools":[{"type":"function","function":{"name":"bash","parameters":{}}},{"type":"function","function":{"name":"edit"}}]}`
	respReq := `{"model":"gpt-x","instructions":"You are codex.","input":[
		{"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox: none"}]},
		{"role":"user","content":"fix the test"},
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Look at the failing test."}],"encrypted_content":"gAAA"},
		{"type":"function_call","id":"fc_1","call_id":"call_a","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"ls\"]}"},
		{"type":"function_call_output","call_id":"call_a","output":"README.md"},
		{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gBBB"},
		{"type":"custom_tool_call","call_id":"call_b","name":"apply_patch","input":"*** Begin Patch"},
		{"type":"custom_tool_call_output","call_id":"call_b","output":"Done!"}],
		"tools":[{"type":"function","name":"shell"},{"type":"custom","name":"apply_patch"},{"type":"web_search"}]}`
	msgReq := `{"model":"claude-x","max_tokens":1024,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"messages":[
		{"role":"user","content":"what is in /workspace?"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"ls it","signature":"sig"},{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls /workspace"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"ls: cannot access"}],"is_error":true},{"type":"text","text":"try again"}]}],
		"tools":[{"name":"Bash","input_schema":{}},{"name":"Read","input_schema":{}}]}`
	for _, tc := range []struct {
		name, api, req string
		resp           []byte
		streamed       bool
		wantReq        []string
		wantTools      []string
		wantOut        []string
		wantStop       string
	}{
		{
			name: "chat completions, streamed", api: APIChat, req: chatReq, streamed: true,
			resp: sse(`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Now "}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"cat it.","content":"Reading "}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"content":"a.txt","tool_calls":[{"index":0,"id":"c2","type":"function","function":{"name":"bash","arguments":""}}]}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":"}}]}}]}`,
				`{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"cat a.txt\"}"}}]},"finish_reason":"tool_calls"}]}`,
				`{"id":"c","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9}}`, `[DONE]`),
			wantReq: []string{"system: text=be brief", "user: text=list files | image[image_url/]=",
				`assistant: reasoning=I should use ls | tool_call[bash/c1]={"command":"ls && pwd"}`, "tool: tool_result[/c1]=a.txt\nb.txt"},
			wantTools: []string{"bash", "edit"},
			wantOut:   []string{`assistant: reasoning=Now cat it. | text=Reading a.txt | tool_call[bash/c2]={"command":"cat a.txt"}`},
			wantStop:  "tool_calls",
		},
		{
			name: "chat completions", api: APIChat, req: chatReq,
			resp:      []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Two files.","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`),
			wantReq:   []string{"system: text=be brief", "user: text=list files | image[image_url/]=", `assistant: reasoning=I should use ls | tool_call[bash/c1]={"command":"ls && pwd"}`, "tool: tool_result[/c1]=a.txt\nb.txt"},
			wantTools: []string{"bash", "edit"},
			wantOut:   []string{"assistant: text=Two files."},
			wantStop:  "stop",
		},
		{
			name: "responses, streamed", api: APIResponses, req: respReq, streamed: true,
			resp: sse("event: response.created\n"+`{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[]}}`,
				"event: response.output_item.added\n"+`{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning","id":"rs_3","summary":[]}}`,
				"event: response.reasoning_summary_text.delta\n"+`{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"Run the tests."}`,
				"event: response.output_item.done\n"+`{"type":"response.output_item.done","output_index":0,"item":{"type":"reasoning","id":"rs_3","summary":[{"type":"summary_text","text":"Run the tests."}]}}`,
				"event: response.output_item.added\n"+`{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_c","name":"shell","arguments":""}}`,
				"event: response.function_call_arguments.delta\n"+`{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"command\":[\"pytest\"]}"}`,
				"event: response.output_item.done\n"+`{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","call_id":"call_c","name":"shell","arguments":"{\"command\":[\"pytest\"]}"}}`,
				"event: response.completed\n"+`{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"type":"reasoning","id":"rs_3","summary":[{"type":"summary_text","text":"Run the tests."}]},{"type":"function_call","call_id":"call_c","name":"shell","arguments":"{\"command\":[\"pytest\"]}"}],"usage":{"input_tokens":90,"output_tokens":12}}}`),
			wantReq: []string{"system: text=You are codex.", "developer: text=sandbox: none", "user: text=fix the test",
				`assistant: reasoning=Look at the failing test. | tool_call[shell/call_a]={"command":["bash","-lc","ls"]}`, "tool: tool_result[/call_a]=README.md",
				"assistant: reasoning[encrypted/]= | tool_call[apply_patch/call_b]=*** Begin Patch", "tool: tool_result[/call_b]=Done!"},
			wantTools: []string{"shell", "apply_patch", "web_search"},
			wantOut:   []string{`assistant: reasoning=Run the tests. | tool_call[shell/call_c]={"command":["pytest"]}`},
			wantStop:  "completed",
		},
		{
			name: "responses, a stream cut before it completed", api: APIResponses, req: `{"input":"hi"}`, streamed: true,
			resp: sse(`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","role":"assistant","content":[]}}`,
				`{"type":"response.output_text.delta","output_index":0,"delta":"Hel"}`, `{"type":"response.output_text.delta","output_index":0,"delta":"lo"}`),
			wantReq: []string{"user: text=hi"},
			wantOut: []string{"assistant: text=Hello"},
		},
		{
			name: "responses", api: APIResponses, req: `{"input":"hi","instructions":null}`,
			resp:    []byte(`{"id":"resp_2","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hel","annotations":[]}]}]}`),
			wantReq: []string{"user: text=hi"},
			wantOut: []string{"assistant: text=Hel"}, wantStop: "incomplete: max_output_tokens",
		},
		{
			name: "anthropic messages, streamed", api: APIMessages, req: msgReq, streamed: true,
			resp: sse("event: message_start\n"+`{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[],"usage":{"input_tokens":70,"output_tokens":1}}}`,
				"event: content_block_start\n"+`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Permission "}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"problem."}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}`,
				"event: content_block_stop\n"+`{"type":"content_block_stop","index":0}`,
				"event: content_block_start\n"+`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Using sudo."}}`,
				"event: content_block_start\n"+`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"sudo "}}`,
				"event: content_block_delta\n"+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ls\"}"}}`,
				"event: message_delta\n"+`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":40}}`,
				"event: message_stop\n"+`{"type":"message_stop"}`),
			wantReq: []string{"system: text=You are Claude Code.", "user: text=what is in /workspace?",
				`assistant: reasoning=ls it | text=Let me look. | tool_call[Bash/toolu_1]={"command":"ls /workspace"}`,
				"user: tool_result[/toolu_1]!=ls: cannot access | text=try again"},
			wantTools: []string{"Bash", "Read"},
			wantOut:   []string{`assistant: reasoning=Permission problem. | text=Using sudo. | tool_call[Bash/toolu_2]={"command":"sudo ls"}`},
			wantStop:  "tool_use",
		},
		{
			name: "gemini, streamed", api: APIGemini, streamed: true,
			req: `{"systemInstruction":{"parts":[{"text":"You are Gemini CLI."}]},"contents":[
				{"role":"user","parts":[{"text":"list the files"}]},
				{"role":"model","parts":[{"text":"Checking.","thought":true},{"text":"I will run ls."},{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}}}]},
				{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":"a.txt"}}}]}],
				"tools":[{"functionDeclarations":[{"name":"run_shell_command"},{"name":"read_file"}]}],"generationConfig":{"temperature":0}}`,
			resp: sse(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Think","thought":true}]},"index":0}]}`,
				`{"candidates":[{"content":{"role":"model","parts":[{"text":"ing.","thought":true},{"text":"One "}]},"index":0}]}`,
				`{"candidates":[{"content":{"role":"model","parts":[{"text":"file."},{"functionCall":{"name":"read_file","args":{"path":"a.txt"}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9}}`),
			wantReq: []string{"system: text=You are Gemini CLI.", "user: text=list the files",
				`assistant: reasoning=Checking. | text=I will run ls. | tool_call[run_shell_command/]={"command":"ls"}`, "user: tool_result[run_shell_command/]=a.txt"},
			wantTools: []string{"run_shell_command", "read_file"},
			wantOut:   []string{`assistant: reasoning=Thinking. | text=One file. | tool_call[read_file/]={"path":"a.txt"}`},
			wantStop:  "STOP",
		},
		{
			name: "gemini", api: APIGemini, req: `{"contents":[{"role":"user","parts":[{"text":"hi"},{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`,
			resp:    []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello."}]},"finishReason":"MAX_TOKENS"}]}`),
			wantReq: []string{"user: text=hi | image[inlineData/]="},
			wantOut: []string{"assistant: text=Hello."}, wantStop: "MAX_TOKENS",
		},
		{
			name: "anthropic messages", api: APIMessages, req: `{"system":"s","messages":[{"role":"user","content":"hi"}]}`,
			resp:    []byte(`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"redacted_thinking","data":"xx"},{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`),
			wantReq: []string{"system: text=s", "user: text=hi"},
			wantOut: []string{"assistant: reasoning[redacted/]= | text=Hello."}, wantStop: "end_turn",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newReader().readRequest(tc.api, []byte(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			if got := showMsgs(c.msgs); !reflect.DeepEqual(got, tc.wantReq) {
				t.Errorf("request:\n got %q\nwant %q", got, tc.wantReq)
			}
			if !reflect.DeepEqual(c.tools, tc.wantTools) {
				t.Errorf("tools %q, want %q", c.tools, tc.wantTools)
			}
			out, stop, err := newReader().readResponse(tc.api, tc.resp, tc.streamed)
			if err != nil {
				t.Fatal(err)
			}
			if got := showMsgs(out); !reflect.DeepEqual(got, tc.wantOut) || stop != tc.wantStop {
				t.Errorf("response:\n got %q (%q)\nwant %q (%q)", got, stop, tc.wantOut, tc.wantStop)
			}
		})
	}
}

// Malformed, hostile and odd bodies never panic and say what could not be read.
func TestReadMalformed(t *testing.T) {
	for _, api := range []string{APIChat, APIResponses, APIMessages, APIGemini} {
		for _, body := range []string{``, `[]`, `null`, `{"messages":5}`, `{"input":{"a":1}}`, `{"messages":[{"role":"user","content":{"x":1}}]}`, "\xff\xfe", strings.Repeat("[", 100000)} {
			newReader().readRequest(api, []byte(body))
			newReader().readResponse(api, []byte(body), false)
			newReader().readResponse(api, []byte(body), true)
		}
	}
	if _, err := newReader().readRequest(APIChat, []byte(`not json`)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("not json: %v", err)
	}
	if _, _, err := newReader().readResponse(APIChat, []byte(": just a comment\n\n"), true); err == nil || !strings.Contains(err.Error(), "no event") {
		t.Errorf("an empty stream: %v", err)
	}
	// Tool-call indexes far out of range are ignored, not allocated.
	out, _, _ := newReader().readResponse(APIChat, sse(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2000000000,"function":{"arguments":"x"}}]}}]}`), true)
	if len(out) != 1 || len(out[0].parts) != 0 {
		t.Errorf("out of range tool call: %q", showMsgs(out))
	}
}

func TestCutText(t *testing.T) {
	s := strings.Repeat("é", HeadBytes) // two bytes a rune: the cut lands mid-rune
	head, tail, cut := cutText(s)
	if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) || int64(len(head)+len(tail))+cut != int64(len(s)) || len(head) > HeadBytes || len(tail) > TailBytes {
		t.Errorf("head %d, tail %d, cut %d of %d", len(head), len(tail), cut, len(s))
	}
	if h, _, _ := cutText("a\xffb"); h != "a\uFFFDb" {
		t.Errorf("invalid UTF-8: %q", h)
	}
}

func TestNormJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"b": 1, "a": "x\u0026y", "c": [true, null, 1.50, {"d": "<"}]}`: `{"b":1,"a":"x&y","c":[true,null,1.50,{"d":"<"}]}`,
		`"plain"`: `"plain"`, `[]`: `[]`, `{}`: `{}`,
	} {
		if got, ok := normJSON([]byte(in)); !ok || got != want {
			t.Errorf("normJSON(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := normJSON([]byte(`{"a":`)); ok {
		t.Error("a cut value was taken for JSON")
	}
	var v any
	if s, _ := normJSON([]byte(`{"k":"\ud83d\ude00 \u2028"}`)); json.Unmarshal([]byte(s), &v) != nil {
		t.Errorf("not JSON after: %s", s)
	}
}
