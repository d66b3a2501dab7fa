package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/sealrun/sealrun/transcript"
)

// Each agent sealrun ships besides opencode (TestOpencodeSealedRun), sealed as its image runs it
// — the real CLI from npm, its own command, no test seam but the kit's files in the workspace —
// against a scripted model speaking the scaffold's own API as the real one does (the Responses
// API's function_call items for Codex, Anthropic's tool_use blocks for Claude Code, Gemini's
// functionCall parts for Gemini CLI, chat completions' tool_calls for Qwen Code, each streamed):
// it reads the clock, makes a compute call, submits, promotes and finalizes; the run is graded and
// its attestation verifies. The provider's key reaches the scripted model and never the
// controller. What each CLI asked of the gateway beyond its model endpoint is listed (refused,
// with the reason, in the audit log), and the time from the run's start to its first model
// request is measured.
func TestShippedScaffoldsSealedRun(t *testing.T) {
	for _, sc := range scaffolds.All() {
		if sc.Name == "opencode" {
			continue // TestOpencodeSealedRun
		}
		t.Run(sc.Name, func(t *testing.T) { shippedScaffoldRun(t, sc) })
	}
}

func shippedScaffoldRun(t *testing.T, sc *scaffolds.Scaffold) {
	tb := newTestbed(t)
	const secret = "sk-scripted-provider-SECRET-9d2f"
	kind := sc.Kinds[0]
	keyFile := filepath.Join(tb.base, kind+".key")
	os.WriteFile(keyFile, []byte(secret+"\n"), 0o600)
	base := tb.prov.URL
	if kind == controller.KindOpenAI {
		base += "/v1"
	}
	tb.cfg.Providers[kind] = controller.ProviderConfig{Name: kind, Kind: kind, BaseURL: base, KeyFile: keyFile}
	track, _ := shippedTrack(t, tb, sc, map[string]string{`wall = "3m"`: `wall = "5m"`})
	candidate := regexp.MustCompile(`candidate ([0-9a-f]{12})`)
	tb.prov.Agent(
		func(string) string { return "runner time_left" },
		func(string) string { return `runner python3 -c 'print("compute call:", 6 * 7)'` },
		func(string) string {
			return `env | grep -ci -e 'sk-scripted' -e 'SECRET' || echo "no key in the controller"; mkdir -p b && cp sealrun-bundle.json predict.py b/ && runner submit b`
		},
		func(last string) string {
			if m := candidate.FindStringSubmatch(last); m != nil {
				return "runner promote " + m[1]
			}
			return "echo no candidate in: " + strings.ReplaceAll(last, "\n", " ")
		},
		func(string) string { return "runner finalize" },
	)
	x := tb.executor()
	x.Journal = tb.journal
	x.Entrypoint = nil // the image's own: the CLI as its entrypoint runs it
	agent, err := controller.ParseAgent(kind + "/model-x@high")
	if err != nil {
		t.Fatal(err)
	}
	id := "run-" + sc.Name
	start := time.Now()
	out, err := x.Execute(context.Background(), RunSpec{ID: id, Track: track, Agent: agent, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tb.state, "runs", id)
	log := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(mustReadOr(filepath.Join(dir, "transcript.log"))), "")
	t.Logf("%s %s: %s %q in %s\nscaffold's output:\n%s", sc.Name, sc.Version, out.Status, out.Reason, time.Since(start).Round(time.Second), cutLog(log, 6000))
	if out.Status != StateGraded {
		t.Fatalf("status %s (%s); want graded", out.Status, out.Reason)
	}
	if _, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithTrack(track)); err != nil {
		t.Errorf("attestation: %v", err)
	}
	tr, err := transcript.Read(filepath.Join(dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	var results strings.Builder
	var first time.Time
	var refused []string
	for _, e := range tr.Events {
		switch {
		case e.Model != nil && e.Model.Refused != "":
			refused = append(refused, fmt.Sprintf("%s %s: %s", e.Model.Method, e.Model.Path, e.Model.Refused))
		case e.Model != nil:
			if first.IsZero() {
				first = e.Time
			}
			for _, m := range e.Model.Added {
				for _, p := range m.Parts {
					results.WriteString(p.Text + "\n")
				}
			}
		case e.Call != nil:
			results.WriteString(e.Call.Text + "\n")
		}
	}
	for _, want := range []string{"reserve window", "compute call: 42", "no key in the controller", "candidate ", "promoted"} {
		if !strings.Contains(results.String(), want) {
			t.Errorf("%s: the run's tool results lack %q:\n%s", sc.Name, want, cutLog(results.String(), 4000))
		}
	}
	sort.Strings(refused)
	t.Logf("%s: time from the run's start to its first model request %s; beyond its model endpoint it asked the gateway %d time(s): %q",
		sc.Name, first.Sub(tr.Run.Started).Round(time.Millisecond), len(refused), refused)
	if tr.Totals.Exchanges-tr.Totals.Refused < 5 {
		t.Errorf("%d model exchanges forwarded; want one a step", tr.Totals.Exchanges-tr.Totals.Refused)
	}
	reqs := tb.prov.Requests()
	for i, r := range reqs {
		if got := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key") + r.Header.Get("X-Goog-Api-Key"); !strings.Contains(got, secret) {
			t.Errorf("provider request %d did not carry the key the gateway injects", i+1)
		}
	}
	if strings.Contains(log, secret) {
		t.Error("the provider's key reached the controller")
	}
}

func mustReadOr(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// cutLog keeps the start and the end of a long log.
func cutLog(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + "\n[...]\n" + s[len(s)-n/2:]
}
