package transcript_test

import (
	"bytes"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/transcript"
)

// sdkClients is where make test installs the official SDKs (scripts/sdk-clients.sh, npm ci from
// testdata/sdk's lock file).
func sdkClients(t *testing.T) (node, dir string) {
	t.Helper()
	node = testenv.RequireTool(t, "node", "nodejs")
	state := os.Getenv("SEALRUN_TEST_STATE")
	dir = filepath.Join(state, "sdk-clients")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); state == "" || err != nil {
		testenv.Missing(t, "the official openai and @anthropic-ai/sdk packages are not installed in $SEALRUN_TEST_STATE/sdk-clients; make test installs them (scripts/sdk-clients.sh)")
	}
	return node, dir
}

// gatewayRun is a gateway of one provider kind in front of a scripted provider, keeping its
// audit log and bodies in a run directory, as the daemon runs it.
func gatewayRun(t *testing.T, kind, agent string, prov *scriptedmodel.Provider) (url, dir string) {
	t.Helper()
	dir = t.TempDir()
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("sk-provider-key\n"), 0o600)
	base := prov.URL
	if kind == controller.KindOpenAI {
		base += "/v1"
	}
	a, _ := controller.ParseAgent(agent)
	g, err := controller.NewGateway(controller.ProviderConfig{Name: a.Provider, Kind: kind, BaseURL: base, KeyFile: key, Retries: 1}, a,
		log, controller.WithBodiesDir(filepath.Join(dir, audit.GatewayDir)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv.URL, dir
}

func drive(t *testing.T, node, clients, which, url string) string {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(mustAbs(t, "testdata/sdk"), "drive.js"), which, url)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(clients, "node_modules"))
	cmd.Dir = clients
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("node drive.js %s: %v\n%s%s", which, err, out.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("node drive.js %s did not end in 60 s\n%s%s", which, out.String(), errb.String())
	}
	return out.String()
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func texts(ms []transcript.Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.Role + ":")
		for _, p := range m.Parts {
			b.WriteString(" " + p.Type)
			if p.Name != "" {
				b.WriteString("[" + p.Name + "]")
			}
			b.WriteString("=" + p.Text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sse(names []string, events ...string) scriptedmodel.Response {
	return scriptedmodel.Response{Events: events, EventNames: names}
}

// What the official openai package sends (chat completions and the Responses API, streamed and
// not, with tools) through the real gateway is read back into the conversation the client held:
// each request as what it added, each answer as the SDK itself understood it.
func TestOpenAISDKThroughTheGateway(t *testing.T) {
	node, clients := sdkClients(t)
	prov := scriptedmodel.New()
	defer prov.Close()
	chunk := func(delta string) string {
		return `{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
	}
	prov.Queue(
		scriptedmodel.Response{Body: scriptedmodel.ToolCall("bash", `{"command":"python3 train.py"}`)},
		scriptedmodel.Response{Events: []string{chunk(`{"role":"assistant","content":""}`), chunk(`{"content":"SDK-CHAT-"}`), chunk(`{"content":"ANSWER"}`),
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],"usage":{"prompt_tokens":61,"completion_tokens":4,"total_tokens":65}}`}},
		scriptedmodel.Response{Body: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-x","output":[` +
			`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"SDK-RESP-REASONING"}]},` +
			`{"type":"function_call","id":"fc_1","call_id":"call_r1","name":"shell","arguments":"{\"command\":[\"pytest\"]}","status":"completed"}],` +
			`"usage":{"input_tokens":40,"output_tokens":12,"total_tokens":52,"output_tokens_details":{"reasoning_tokens":8}}}`},
		sse([]string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_text.delta", "response.output_item.done", "response.completed"},
			`{"type":"response.created","sequence_number":0,"response":{"id":"resp_2","object":"response","status":"in_progress","output":[]}}`,
			`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"msg_2","role":"assistant","status":"in_progress","content":[]}}`,
			`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_2","output_index":0,"content_index":0,"delta":"SDK-RESP-"}`,
			`{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_2","output_index":0,"content_index":0,"delta":"ANSWER"}`,
			`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"SDK-RESP-ANSWER","annotations":[]}]}}`,
			`{"type":"response.completed","sequence_number":5,"response":{"id":"resp_2","object":"response","status":"completed","output":[{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"SDK-RESP-ANSWER","annotations":[]}]}],"usage":{"input_tokens":70,"output_tokens":3,"total_tokens":73}}}`),
	)
	url, dir := gatewayRun(t, controller.KindOpenAI, "openai/gpt-x", prov)
	said := drive(t, node, clients, "openai", url)
	for _, want := range []string{`"name":"bash","args":"{\"command\":\"python3 train.py\"}"`, `"chat streamed text","v":"SDK-CHAT-ANSWER"`,
		`"name":"shell","args":"{\"command\":[\"pytest\"]}"`, `"responses streamed text","v":"SDK-RESP-ANSWER"`} {
		if !strings.Contains(said, want) {
			t.Errorf("the SDK did not see %s in the scripted answers:\n%s", want, said)
		}
	}
	tr, err := transcript.Build(dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := models(tr)
	if len(ms) != 4 || tr.Bodies.Intact != 8 {
		t.Fatalf("%d exchanges, bodies %+v", len(ms), tr.Bodies)
	}
	check := func(i int, api string, streamed bool, extends, shared int, added, output []string) {
		t.Helper()
		x := ms[i]
		a, o := texts(x.Added), texts(x.Output)
		if x.API != api || x.Streamed != streamed || x.Extends != extends || x.Shared != shared {
			t.Errorf("exchange %d: %s streamed %v, extends %d sharing %d; want %s %v %d %d", x.N, x.API, x.Streamed, x.Extends, x.Shared, api, streamed, extends, shared)
		}
		for _, w := range added {
			if !strings.Contains(a, w) {
				t.Errorf("exchange %d added lacks %q:\n%s", x.N, w, a)
			}
		}
		for _, w := range output {
			if !strings.Contains(o, w) {
				t.Errorf("exchange %d output lacks %q:\n%s", x.N, w, o)
			}
		}
	}
	check(0, transcript.APIChat, false, 0, 0, []string{"system: text=SDK-CHAT-SYSTEM", "user: text=SDK-CHAT-USER"}, []string{`assistant: tool_call[bash]={"command":"python3 train.py"}`})
	check(1, transcript.APIChat, true, 1, 3, []string{"tool: tool_result=SDK-CHAT-TOOL-RESULT: loss 1.23"}, []string{"assistant: text=SDK-CHAT-ANSWER"})
	check(2, transcript.APIResponses, false, 0, 0, []string{"system: text=SDK-RESP-INSTRUCTIONS", "user: text=SDK-RESP-USER"}, []string{`assistant: reasoning=SDK-RESP-REASONING tool_call[shell]={"command":["pytest"]}`})
	check(3, transcript.APIResponses, true, 3, 3, []string{"tool: tool_result=SDK-RESP-TOOL-OUTPUT: 2 passed"}, []string{"assistant: text=SDK-RESP-ANSWER"})
	if len(ms[1].Added) != 1 || len(ms[3].Added) != 1 {
		t.Errorf("the second turns added %d and %d messages; want the tool result alone", len(ms[1].Added), len(ms[3].Added))
	}
	if u := ms[1].Usage; u.Prompt != 61 || u.Completion != 4 {
		t.Errorf("streamed chat usage %+v", u)
	}
	if u := ms[2].Usage; u.Prompt != 40 || u.Reasoning != 8 {
		t.Errorf("responses usage %+v", u)
	}
}

// The same for the official @anthropic-ai/sdk: messages with a system prompt (cache_control, as
// Claude Code sends it), tools, a tool result, and the SDK's own stream helper.
func TestAnthropicSDKThroughTheGateway(t *testing.T) {
	node, clients := sdkClients(t)
	prov := scriptedmodel.New()
	defer prov.Close()
	prov.Queue(
		scriptedmodel.Response{Body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"SDK-ANT-LOOK"},` +
			`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls /workspace"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":9}}`},
		sse([]string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			`{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":55,"output_tokens":1}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"SDK-ANT-"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ANSWER"}}`,
			`{"type":"content_block_stop","index":0}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}`,
			`{"type":"message_stop"}`),
	)
	url, dir := gatewayRun(t, controller.KindAnthropic, "anthropic/claude-x", prov)
	said := drive(t, node, clients, "anthropic", url)
	for _, want := range []string{`"name":"Bash","input":{"command":"ls /workspace"}`, `"anthropic streamed","v":"SDK-ANT-ANSWER"`} {
		if !strings.Contains(said, want) {
			t.Errorf("the SDK did not see %s:\n%s", want, said)
		}
	}
	tr, err := transcript.Build(dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := models(tr)
	if len(ms) != 2 {
		t.Fatalf("%d exchanges", len(ms))
	}
	if a, o := texts(ms[0].Added), texts(ms[0].Output); ms[0].API != transcript.APIMessages || !strings.Contains(a, "system: text=SDK-ANT-SYSTEM") || !strings.Contains(a, "user: text=SDK-ANT-USER") ||
		!strings.Contains(o, `assistant: text=SDK-ANT-LOOK tool_call[Bash]={"command":"ls /workspace"}`) {
		t.Errorf("first exchange:\nadded %s\noutput %s", a, o)
	}
	x := ms[1]
	if a, o := texts(x.Added), texts(x.Output); !x.Streamed || x.Extends != 1 || x.Shared != 3 || len(x.Added) != 1 || !strings.Contains(a, "user: tool_result=SDK-ANT-TOOL-RESULT: a.txt") ||
		!strings.Contains(o, "assistant: text=SDK-ANT-ANSWER") || x.Stop != "end_turn" || x.Usage.Prompt != 55 || x.Usage.Completion != 6 {
		t.Errorf("second exchange: streamed %v, extends %d sharing %d, stop %q, usage %+v\nadded %s\noutput %s", x.Streamed, x.Extends, x.Shared, x.Stop, x.Usage, a, o)
	}
}

// The same for Google's official @google/genai: generateContent with a system instruction and a
// function declaration, the function's response sent back, then generateContentStream (SSE).
func TestGeminiSDKThroughTheGateway(t *testing.T) {
	node, clients := sdkClients(t)
	prov := scriptedmodel.New()
	defer prov.Close()
	prov.Queue(
		scriptedmodel.Response{Body: `{"candidates":[{"content":{"role":"model","parts":[{"text":"SDK-GEM-LOOK"},{"functionCall":{"name":"run_shell_command","args":{"command":"python3 train.py"}}}]},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":33,"candidatesTokenCount":12,"totalTokenCount":45},"modelVersion":"gemini-x"}`},
		scriptedmodel.Response{NoDone: true, Events: []string{
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"SDK-GEM-"}]},"index":0}],"usageMetadata":{"promptTokenCount":60,"candidatesTokenCount":1},"modelVersion":"gemini-x"}`,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"ANSWER"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":60,"candidatesTokenCount":3,"thoughtsTokenCount":4},"modelVersion":"gemini-x"}`}},
	)
	url, dir := gatewayRun(t, controller.KindGoogle, "google/gemini-x", prov)
	said := drive(t, node, clients, "google", url)
	for _, want := range []string{`"name":"run_shell_command","args":{"command":"python3 train.py"}`, `"gemini streamed text","v":"SDK-GEM-ANSWER"`} {
		if !strings.Contains(said, want) {
			t.Errorf("the SDK did not see %s:\n%s", want, said)
		}
	}
	for i, r := range prov.Requests() {
		if r.Header.Get("X-Goog-Api-Key") != "sk-provider-key" || strings.Contains(r.Query, "key=") {
			t.Errorf("request %d reached the provider with %v ?%s", i+1, r.Header, r.Query)
		}
	}
	tr, err := transcript.Build(dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := models(tr)
	if len(ms) != 2 {
		t.Fatalf("%d exchanges", len(ms))
	}
	if a, o := texts(ms[0].Added), texts(ms[0].Output); ms[0].API != transcript.APIGemini || !strings.Contains(a, "system: text=SDK-GEM-SYSTEM") || !strings.Contains(a, "user: text=SDK-GEM-USER") ||
		!strings.Contains(o, `assistant: text=SDK-GEM-LOOK tool_call[run_shell_command]={"command":"python3 train.py"}`) {
		t.Errorf("first exchange:\nadded %s\noutput %s", a, o)
	}
	x := ms[1]
	if a, o := texts(x.Added), texts(x.Output); !x.Streamed || x.Extends != 1 || x.Shared != 3 || len(x.Added) != 1 || !strings.Contains(a, "user: tool_result[run_shell_command]=SDK-GEM-TOOL-OUTPUT: loss 0.9") ||
		!strings.Contains(o, "assistant: text=SDK-GEM-ANSWER") || x.Stop != "STOP" || x.Usage.Prompt != 60 || x.Usage.Completion != 7 {
		t.Errorf("second exchange: streamed %v, extends %d sharing %d, stop %q, usage %+v\nadded %s\noutput %s", x.Streamed, x.Extends, x.Shared, x.Stop, x.Usage, a, o)
	}
}
