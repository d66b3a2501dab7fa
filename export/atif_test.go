package export

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

var start = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// run writes a run of the synthetic agent loop (turns, its history kept to the last window
// turns), a refused and a retried request, submissions and scores, and builds its transcript.
func run(t *testing.T, turns, window int) (*transcript.Transcript, []byte) {
	t.Helper()
	r, err := transcripttest.New(t.TempDir(), start)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := transcripttest.Window(r, turns, window, 2000, 300, func(i int) string {
		return fmt.Sprintf("step %d: </script><img src=x onerror=alert(1)> \x1b[31m", i)
	}); err != nil {
		t.Fatal(err)
	}
	r.Entry(audit.KindSubmit, map[string]any{"candidate": strings.Repeat("ab", 32), "dir": "/workspace/b", "size": 100, "files": 2})
	r.Entry(audit.KindValidation, map[string]any{"candidate": strings.Repeat("ab", 32), "passed": 7, "questions": 12, "score": 58.3})
	r.Entry(audit.KindSubmitRefused, map[string]any{"dir": "/workspace/c", "reason": "no model.pt"})
	r.Record(audit.KindGateway, audit.Gateway{Request: 99, Time: r.Now.UTC(), Method: "POST", Path: "/v1/chat/completions", Model: "m", Status: 429,
		Refused: "the run's token budget is spent", Tries: []audit.Try{}})
	r.Record(audit.KindGateway, audit.Gateway{Request: 100, Time: r.Now.UTC(), Method: "POST", Path: "/v1/chat/completions", Model: "m", Status: 502,
		Error: "the provider did not answer", Tries: []audit.Try{{Status: 502, LatencyMS: 30000, WaitMS: 1000}, {Status: 502, LatencyMS: 30000}}, LatencyMS: 61000})
	run := transcript.Run{ID: "r-export", Track: "ari", TrackVersion: "1", Agent: "openai/gpt-x@high", Scaffold: "codex 0.98.0", Seed: 3, State: "graded",
		Result: "7/12 passed (58.3%)", Started: start, Deadline: start.Add(time.Hour), Finished: start.Add(40 * time.Minute)}
	tr, err := transcript.Build(r.Dir, run, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := transcript.Write(r.Dir, tr); err != nil {
		t.Fatal(err)
	}
	j, err := os.ReadFile(filepath.Join(r.Dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tr, j
}

func TestATIF(t *testing.T) {
	tr, j := run(t, 6, 2)
	src := SourceOf(j, tr, "v-test")
	b, err := ATIF(tr, src)
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" { // for a check by hand with Harbor's own models
		os.WriteFile(filepath.Join(d, "atif.json"), b, 0o644)
	}
	got := exporttest.ATIFRules(t, b)
	again, _ := ATIF(tr, src)
	if !bytes.Equal(b, again) {
		t.Error("two exports of one transcript differ")
	}
	steps := got["steps"].([]any)
	var agent, calls, withObs, copied int
	var refused, retried bool
	for _, sv := range steps {
		s := sv.(map[string]any)
		extra, _ := s["extra"].(map[string]any)
		facts, _ := extra["sealrun"].(map[string]any)
		switch {
		case s["source"] == "agent" && s["is_copied_context"] == true:
			copied++
		case s["source"] == "agent":
			agent++
			if s["observation"] != nil {
				withObs++
			}
		case facts["kind"] == "call":
			calls++
			if !strings.Contains(fmt.Sprint(s["observation"]), "</script><img src=x onerror=alert(1)>") {
				t.Errorf("a call's output is not its observation: %v", s)
			}
		}
		if strings.Contains(fmt.Sprint(s["message"]), "refused by sealrun's gateway: the run's token budget is spent") {
			refused = true
		}
		if strings.Contains(fmt.Sprint(s["message"]), "model request 100 failed: the provider did not answer") && facts["tries"] != nil {
			retried = true
		}
	}
	// The last answer's tool result never reached the model (no request after it): it is the
	// last compute call's output only.
	if !retried {
		t.Error("the failed request, tried twice, is not shown with its tries")
	}
	if agent != 6 || withObs != 5 || calls != 6 || !refused {
		t.Errorf("%d agent steps (%d with the results of their tool calls), %d call steps, refusal shown %v; want 6, 5, 6, true", agent, withObs, calls, refused)
	}
	ext := got["extra"].(map[string]any)["sealrun"].(map[string]any)
	if ext["transcript_sha256"] != src.TranscriptSHA256 || ext["run"] != "r-export" || ext["format"] != Format || ext["sealrun_version"] != "v-test" {
		t.Errorf("what it was derived from: %v", ext)
	}
	if ag := got["agent"].(map[string]any); ag["name"] != "codex" || ag["version"] != "0.98.0" || ag["model_name"] != "gpt-x" {
		t.Errorf("agent %v", ag)
	}
	// Hostile output stays data: the bytes are JSON-escaped, never raw markup or control bytes.
	if bytes.Contains(b, []byte("<script")) || bytes.Contains(b, []byte("\x1b")) {
		t.Error("raw markup or an escape byte in the export")
	}
	t.Logf("%d steps, %d bytes (copied context: %d)", len(steps), len(b), copied)
}

// The rules catch what they are there for: a trajectory breaking each is refused.
func TestATIFRulesCatch(t *testing.T) {
	for _, c := range []string{
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":2,"source":"user","message":""}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"user","message":"","metrics":{}}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"agent","message":"","observation":{"results":[{"source_call_id":"x","content":""}]}}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a"},"steps":[{"step_id":1,"source":"agent","message":""}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"tool","message":""}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"agent","message":"","kind":"x"}]}`,
		`{"schema_version":"ATIF-v1.6","session_id":"s","agent":{"name":"a","version":"1"},"steps":[{"step_id":1,"source":"agent","message":"","timestamp":"yesterday"}]}`,
	} {
		ft := &testing.T{}
		done := make(chan struct{})
		go func() { defer close(done); exporttest.ATIFRules(ft, []byte(c)) }()
		<-done
		if !ft.Failed() {
			t.Errorf("the rules pass %s", c)
		}
	}
}
