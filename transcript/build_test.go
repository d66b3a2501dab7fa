package transcript_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

var start = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func header() transcript.Run {
	return transcript.Run{ID: "r-test", Track: "ari", Agent: "openai/gpt-x", Seed: 1, State: "graded", Started: start,
		Deadline: start.Add(time.Hour), ReserveAt: start.Add(50 * time.Minute), Finished: start.Add(40 * time.Minute)}
}

func newRun(t testing.TB) *transcripttest.Run {
	t.Helper()
	r, err := transcripttest.New(t.TempDir(), start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func models(tr *transcript.Transcript) []*transcript.Exchange {
	var out []*transcript.Exchange
	for _, e := range tr.Events {
		if e.Model != nil {
			out = append(out, e.Model)
		}
	}
	return out
}

// A scaffold resends its whole conversation each turn: each request is shown as what it added
// (the last tool result), never the history again; an unrelated request in between (a title,
// a summary) does not break that, and neither does a request that drops history (compaction).
func TestBuildShowsWhatEachRequestAdded(t *testing.T) {
	r := newRun(t)
	if err := transcripttest.Conversation(r, 6, 2000, 300, nil); err != nil {
		t.Fatal(err)
	}
	side := `{"model":"m","messages":[{"role":"user","content":"Give this conversation a title."}]}`
	r.Exchange("/v1/chat/completions", []byte(side), []byte(`{"choices":[{"message":{"role":"assistant","content":"Training run"}}]}`), false, 200)
	if err := transcripttest.Conversation(r, 8, 2000, 300, nil); err != nil { // 8 turns: the first 6 are the same conversation again
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms := models(tr)
	if len(ms) != 15 {
		t.Fatalf("%d exchanges", len(ms))
	}
	if ms[0].Extends != 0 || len(ms[0].Added) != 2 || ms[0].Messages != 2 || len(ms[0].Tools) != 1 {
		t.Errorf("first: extends %d, %d added of %d, tools %v", ms[0].Extends, len(ms[0].Added), ms[0].Messages, ms[0].Tools)
	}
	for i := 1; i < 6; i++ {
		x := ms[i]
		if x.Extends != i || x.Shared != x.Messages-1 || len(x.Added) != 1 || x.Added[0].Role != "tool" || x.Tools != nil {
			t.Errorf("exchange %d: extends %d, shares %d of %d, %d added, tools %v", x.N, x.Extends, x.Shared, x.Messages, len(x.Added), x.Tools)
		}
	}
	if x := ms[6]; x.Extends != 0 || len(x.Added) != 1 || len(x.Output) != 1 || x.Output[0].Parts[0].Text != "Training run" {
		t.Errorf("side request: %+v", x)
	}
	// The second conversation's first request is the first's: all of it repeats the newest
	// exchange that began so (the first conversation's last).
	if x := ms[7]; x.Extends != 6 || x.Shared != 2 || len(x.Added) != 0 {
		t.Errorf("repeated first request: extends %d, shares %d, %d added", x.Extends, x.Shared, len(x.Added))
	}
	if x := ms[14]; x.Extends != 14 || len(x.Added) != 1 {
		t.Errorf("last: extends %d, %d added", x.Extends, len(x.Added))
	}
	if tr.Totals.Exchanges != 15 || tr.Totals.Calls != 14 || tr.Bodies.Intact != 15*2+14 || tr.Through != 29 {
		t.Errorf("totals %+v bodies %+v through %d", tr.Totals, tr.Bodies, tr.Through)
	}
	head, _ := r.Head()
	if tr.Run.AuditHead != head {
		t.Errorf("audit head %s, the log's %s", tr.Run.AuditHead, head)
	}
	for i := 1; i < len(tr.Events); i++ {
		if tr.Events[i].At < tr.Events[i-1].At {
			t.Fatalf("events out of time order at %d", i)
		}
	}
}

// A scaffold that keeps its first messages and a window of its latest (dropping the middle) is
// shown as what each request added too: the first two as before, the window's messages that go
// on from the last request, and what is new.
func TestBuildFollowsAWindowOfHistory(t *testing.T) {
	r := newRun(t)
	if err := transcripttest.Window(r, 12, 5, 500, 100, nil); err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range models(tr) {
		switch {
		case x.N <= 6: // the whole history still fits the window
			if x.N > 1 && (x.Shared != x.Messages-1 || x.Dropped != 0 || len(x.Added) != 1) {
				t.Errorf("exchange %d: shares %d of %d, dropped %d, %d added", x.N, x.Shared, x.Messages, x.Dropped, len(x.Added))
			}
		default:
			if x.Extends != x.N-1 || x.Shared != 2 || x.Dropped != 2 || x.Kept != 9 || len(x.Added) != 1 || x.Added[0].Role != "tool" || x.Messages != 12 {
				t.Errorf("exchange %d: extends %d, shares %d, dropped %d, kept %d, %d added of %d", x.N, x.Extends, x.Shared, x.Dropped, x.Kept, len(x.Added), x.Messages)
			}
		}
	}
}

// Every body is checked against the hash its audit entry carries: kept whole, changed by one
// byte, removed, or withheld by the operator.
func TestBuildChecksBodies(t *testing.T) {
	r := newRun(t)
	transcripttest.Conversation(r, 3, 100, 50, nil)
	dir := r.Dir
	flip := func(rel string) {
		p := filepath.Join(dir, rel)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 1
		os.WriteFile(p, b, 0o644)
	}
	flip(audit.CallLogPath(1))
	// A gzip body rewritten with one byte changed inside: the file is valid gzip, its content not.
	mustGzip(t, filepath.Join(dir, audit.GatewayBodyPath(2, audit.BodyResponse)), bytes.Replace(mustGunzip(t, filepath.Join(dir, audit.GatewayBodyPath(2, audit.BodyResponse))), []byte("Turn 2"), []byte("Turn 9"), 1))
	os.Remove(filepath.Join(dir, audit.GatewayBodyPath(3, audit.BodyRequest)))
	withheld := audit.GatewayBodyPath(1, audit.BodyRequest)
	tr, err := transcript.Build(dir, header(), transcript.Options{Withheld: map[string]bool{withheld: true}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (transcript.Counts{Intact: 5, Withheld: 1, Missing: 1, Altered: 2}); tr.Bodies != want {
		t.Errorf("bodies %+v, want %+v", tr.Bodies, want)
	}
	ms := models(tr)
	if ms[0].Request.State != transcript.BodyWithheld || len(ms[0].Added) != 0 || !strings.Contains(ms[0].Note, "withheld") {
		t.Errorf("withheld request: %+v", ms[0])
	}
	if ms[1].Response.State != transcript.BodyAltered || len(ms[1].Output) != 0 {
		t.Errorf("altered response: state %s, output %v", ms[1].Response.State, ms[1].Output)
	}
	if ms[2].Request.State != transcript.BodyMissing {
		t.Errorf("missing request: %s", ms[2].Request.State)
	}
	for _, e := range tr.Events {
		if e.Call != nil && e.Call.N == 1 && (e.Call.Output.State != transcript.BodyAltered || e.Call.Text != "") {
			t.Errorf("altered call log: %+v", e.Call.Output)
		}
	}
}

// An audit log edited or reordered does not chain, and the build says which line.
func TestBuildRefusesABrokenChain(t *testing.T) {
	r := newRun(t)
	transcripttest.Conversation(r, 2, 100, 50, nil)
	r.Close()
	p := filepath.Join(r.Dir, "audit.jsonl")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte(`"exit":0`), []byte(`"exit":1`), 1), 0o644)
	if _, err := transcript.Build(r.Dir, header(), transcript.Options{}); err == nil || !strings.Contains(err.Error(), "audit log line 3") || !strings.Contains(err.Error(), "does not chain") {
		t.Errorf("edited log: %v", err)
	}
	// A last line still being written (no newline yet) is not read, and is not an error.
	os.WriteFile(p, append(b, []byte(`{"seq":9,"kind":"call"`)...), 0o644)
	if tr, err := transcript.Build(r.Dir, header(), transcript.Options{}); err != nil || tr.Through != 4 {
		t.Errorf("a line being written: %v", err)
	}
}

// The same run gives the same transcript.json, byte for byte: a reader rebuilds it to check it.
func TestBuildIsDeterministic(t *testing.T) {
	r := newRun(t)
	transcripttest.Conversation(r, 20, 1000, 200, nil)
	var last []byte
	for i := 0; i < 3; i++ {
		tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		j, _ := transcript.Marshal(tr)
		if last != nil && !bytes.Equal(j, last) {
			t.Fatal("two builds of one run differ")
		}
		last = j
	}
}

// Hostile text from a model or a tool: markup, script, ANSI escapes, invalid UTF-8, a very long
// line. The transcript carries it as valid JSON text, cut where it is long, and the page holds
// it only inside its data: never as markup, never able to close the script element.
func TestHostileTextStaysText(t *testing.T) {
	r := newRun(t)
	hostile := "</script><script>document.title='pwned'</script><img src=x onerror=alert(1)>\x1b[31mred\x1b[0m \xff\xfe <!-- \u2028 " + strings.Repeat("A", 200<<10)
	transcripttest.Conversation(r, 2, 100, 0, func(int) string { return hostile })
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := transcript.Marshal(tr)
	var back transcript.Transcript
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	var call *transcript.Call
	for _, e := range back.Events {
		if e.Call != nil {
			call = e.Call
		}
	}
	if call == nil || call.Cut == 0 || len(call.Text) > transcript.HeadBytes+3 || !strings.Contains(call.Text, "\uFFFD") || !strings.Contains(call.Text, "</script>") {
		t.Fatalf("call text: cut %d, %d bytes", call.Cut, len(call.Text))
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, tr, transcript.PageOptions{}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, "<script"); n != 2 || strings.Contains(html, "<img") || strings.Contains(html, "</script><script>document") {
		t.Errorf("the page's markup holds the hostile text (%d script tags)", n)
	}
	if !strings.Contains(html, `content="default-src 'none'; script-src 'sha256-`) {
		t.Error("no strict Content-Security-Policy")
	}
}

// A run may hold any kind of entry; a kind this version does not know is shown by name.
func TestBuildOtherEntries(t *testing.T) {
	r := newRun(t)
	one, two := 1, 3
	r.Entry("submit", map[string]any{"candidate": "sha256:" + strings.Repeat("a", 64), "size": 100, "files": 2})
	r.Entry("validation", map[string]any{"candidate": "sha256:" + strings.Repeat("a", 64), "passed": two, "questions": 10})
	r.Entry("validation", map[string]any{"candidate": "sha256:" + strings.Repeat("b", 64), "passed": one, "questions": 10})
	r.Entry("submit_refused", map[string]any{"dir": "/workspace/b", "reason": "no model.pt"})
	r.Entry("future_kind", map[string]any{"x": 1})
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tr.Events {
		got = append(got, fmt.Sprintf("%s %v", e.Kind, e.Failed))
	}
	if want := "submit false,validation false,validation true,submit_refused true,future_kind false"; strings.Join(got, ",") != want {
		t.Errorf("events %s, want %s", strings.Join(got, ","), want)
	}
	if b := tr.Events[2].Submission.Best; b == nil || *b != 30 {
		t.Errorf("validation drop: best before %v", b)
	}
}

// The transcripts sealrun writes validate against the published schema, and the schema is not
// vacuous.
func TestTranscriptSchema(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	schema, err := c.Compile("transcript.schema.json")
	if err != nil {
		t.Fatalf("compile transcript.schema.json: %v", err)
	}
	r := newRun(t)
	transcripttest.Conversation(r, 12, 500, 100, nil)
	one := 1
	r.Entry("submit", map[string]any{"candidate": "sha256:" + strings.Repeat("a", 64), "size": 100, "files": 2})
	r.Entry("validation", map[string]any{"candidate": "sha256:" + strings.Repeat("a", 64), "passed": one, "questions": 10})
	r.Entry("task_prepare", map[string]any{"script": "prepare.py", "exit": 0, "seconds": 1.5})
	r.Exchange("/v1/responses", []byte(`{"input":"hi"}`), []byte(`{"error":{"message":"overloaded"}}`), false, 529)
	os.Remove(filepath.Join(r.Dir, audit.CallLogPath(2)))
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{Withheld: map[string]bool{audit.CallLogPath(3): true}})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := transcript.Marshal(tr)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("a transcript does not validate: %v", err)
	}
	var doc map[string]any
	json.Unmarshal(j, &doc)
	doc["bodies"].(map[string]any)["intact"] = -1
	if err := schema.Validate(doc); err == nil {
		t.Error("the schema took a negative count")
	}
}

// BodyRefs lists what an audit log hashes, and names each as the admin API serves it.
func TestBodyRefs(t *testing.T) {
	r := newRun(t)
	transcripttest.Conversation(r, 2, 100, 10, nil)
	r.Close()
	f, err := os.Open(filepath.Join(r.Dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	refs, err := transcript.BodyRefs(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ref := range refs {
		got = append(got, ref.Path+"="+ref.APIName)
	}
	want := "gateway/000001.request.json.gz=gateway-1-request gateway/000001.response.gz=gateway-1-response calls/1.log=call-1 " +
		"gateway/000002.request.json.gz=gateway-2-request gateway/000002.response.gz=gateway-2-response calls/2.log=call-2"
	if strings.Join(got, " ") != want {
		t.Errorf("got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// A call that prints one 100 MB line (no newline): the transcript keeps its head and tail and
// counts the rest; the body, whole, checks against its hash.
func TestHundredMegabyteLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	r := newRun(t)
	line := bytes.Repeat([]byte("0123456789"), 10<<20)
	if err := r.Call([]string{"python3", "-c", "print('0123456789' * 10485760, end='')"}, line, 0); err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := tr.Events[0].Call
	if c.Output.State != transcript.BodyIntact || int64(len(c.Text)+len(c.Tail))+c.Cut != int64(len(line)) || len(c.Text) != transcript.HeadBytes || len(c.Tail) != transcript.TailBytes {
		t.Errorf("state %s, head %d, tail %d, cut %d", c.Output.State, len(c.Text), len(c.Tail), c.Cut)
	}
	j, _ := transcript.Marshal(tr)
	if len(j) > 200<<10 {
		t.Errorf("transcript.json is %d bytes for one cut line", len(j))
	}
}

func mustGunzip(t *testing.T, p string) []byte {
	t.Helper()
	b, err := transcripttest.ReadGzip(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustGzip(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := transcripttest.WriteGzip(p, b); err != nil {
		t.Fatal(err)
	}
}

// A request's audit entry is written after its answer is out, so a scaffold that asks again at
// once can have its next request logged first. The transcript reads a conversation in the order
// the requests were made, whatever order their entries ended in.
func TestBuildReadsRequestsInTheirOrder(t *testing.T) {
	r := newRun(t)
	transcripttest.Conversation(r, 3, 200, 50, nil)
	r.Close()
	p := filepath.Join(r.Dir, "audit.jsonl")
	lines := strings.Split(strings.TrimSpace(string(mustReadFile(t, p))), "\n")
	// gateway 1, call 1, gateway 2, call 2, gateway 3, call 3: log gateway 3 before gateway 2.
	lines[2], lines[4] = lines[4], lines[2]
	os.Remove(p)
	l, err := audit.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		var m map[string]any
		json.Unmarshal([]byte(line), &m)
		kind := m["kind"].(string)
		delete(m, "seq")
		delete(m, "prev")
		delete(m, "kind")
		if _, _, err := l.Append(kind, m); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range models(tr) {
		if x.N > 1 && (x.Extends != x.N-1 || len(x.Added) != 1) {
			t.Errorf("exchange %d: extends %d with %d added; want %d and the tool result alone", x.N, x.Extends, len(x.Added), x.N-1)
		}
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With the run's price, each exchange and the run are priced: cached prompt tokens at their own
// price; without one, nothing is.
func TestBuildPricesTokens(t *testing.T) {
	r := newRun(t)
	req := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 4000) + `"}]}`)
	r.Exchange("/v1/chat/completions", req, []byte(`{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`), false, 200)
	r.Exchange("/v1/chat/completions", req, []byte(`{"choices":[{"message":{"role":"assistant","content":"ok again"}}]}`), false, 200)
	run := header()
	tr, err := transcript.Build(r.Dir, run, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Totals.Cost != 0 || models(tr)[0].Cost != 0 {
		t.Errorf("priced without a price: %v", tr.Totals.Cost)
	}
	run.Price = &policy.Price{Currency: "USD", Input: 2, CachedInput: 0.5, CacheWrite: 2, Output: 8, Taken: "2026-11-01"}
	tr, err = transcript.Build(r.Dir, run, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, x := range models(tr) {
		want := run.Price.Cost(x.Usage.Tokens())
		if x.Cost != want || want == 0 {
			t.Errorf("exchange %d: cost %v, want %v", x.N, x.Cost, want)
		}
		sum += x.Cost
	}
	if tot := tr.Totals; math.Abs(tot.Cost-sum) > 1e-6 || tot.Cost != run.Price.Cost(policy.Tokens{Input: tot.PromptTokens, Output: tot.CompletionTokens}) {
		t.Errorf("run cost %v, exchanges add up to %v", tot.Cost, sum)
	}
}
