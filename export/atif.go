package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sealrun/sealrun/transcript"
)

// ATIFVersion is the ATIF schema version the export writes (Harbor's RFC 0001): the fields of
// v1.6, which every later reader takes.
const ATIFVersion = "ATIF-v1.6"

// atifTrajectory and the types below are ATIF's objects, their fields in the RFC's order; an
// absent optional field is omitted (null and absent are the same to ATIF's readers).
type atifTrajectory struct {
	SchemaVersion string            `json:"schema_version"`
	SessionID     string            `json:"session_id"`
	Agent         atifAgent         `json:"agent"`
	Steps         []*atifStep       `json:"steps"`
	Notes         string            `json:"notes,omitempty"`
	FinalMetrics  *atifFinalMetrics `json:"final_metrics,omitempty"`
	Extra         map[string]any    `json:"extra,omitempty"`
}

type atifAgent struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	ModelName string         `json:"model_name,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
}

type atifStep struct {
	StepID           int              `json:"step_id"`
	Timestamp        string           `json:"timestamp,omitempty"`
	Source           string           `json:"source"` // system, user, agent
	ModelName        string           `json:"model_name,omitempty"`
	ReasoningEffort  string           `json:"reasoning_effort,omitempty"`
	Message          string           `json:"message"`
	ReasoningContent string           `json:"reasoning_content,omitempty"`
	ToolCalls        []atifToolCall   `json:"tool_calls,omitempty"`
	Observation      *atifObservation `json:"observation,omitempty"`
	Metrics          *atifMetrics     `json:"metrics,omitempty"`
	IsCopiedContext  bool             `json:"is_copied_context,omitempty"`
	Extra            map[string]any   `json:"extra,omitempty"`
}

type atifToolCall struct {
	ToolCallID   string         `json:"tool_call_id"`
	FunctionName string         `json:"function_name"`
	Arguments    map[string]any `json:"arguments"`
}

type atifObservation struct {
	Results []atifResult `json:"results"`
}

type atifResult struct {
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
}

type atifMetrics struct {
	PromptTokens     int64          `json:"prompt_tokens"`
	CompletionTokens int64          `json:"completion_tokens"`
	CachedTokens     int64          `json:"cached_tokens"`
	CostUSD          *float64       `json:"cost_usd,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

type atifFinalMetrics struct {
	TotalPromptTokens     int64          `json:"total_prompt_tokens"`
	TotalCompletionTokens int64          `json:"total_completion_tokens"`
	TotalCachedTokens     int64          `json:"total_cached_tokens"`
	TotalCostUSD          *float64       `json:"total_cost_usd,omitempty"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// atifBuilder turns a transcript's events into steps, keeping which agent step made each tool
// call so that the results, which arrive in a later request, become that step's observation.
type atifBuilder struct {
	steps   []*atifStep
	pending map[string]*atifStep // tool call id -> the agent step that made it
}

func (b *atifBuilder) add(s *atifStep) *atifStep {
	s.StepID = len(b.steps) + 1
	b.steps = append(b.steps, s)
	return s
}

// ATIF is the run's trajectory in ATIF (trajectory.json): every message the agent's requests
// added as a system or user step (tool results as the observation of the agent step that
// called the tool), every model answer as an agent step with its reasoning, tool calls and
// tokens, every compute call, submission, score and clock event as a system step whose extra
// says what it was; src says what it was derived from.
func ATIF(t *transcript.Transcript, src Source) ([]byte, error) {
	b := &atifBuilder{pending: map[string]*atifStep{}}
	model, effort := splitAgent(t.Run.Agent)
	name, version := splitScaffold(t.Run.Scaffold)
	if strings.HasPrefix(t.Run.Agent, "human/") {
		// A person, not a scaffold driving a model: their steps are the user's.
		name, version, model = "human", "n/a", ""
	}
	for i := range t.Events {
		ev := &t.Events[i]
		ts := stamp(ev.Time)
		switch {
		case ev.Model != nil:
			b.exchange(ev, ts, effort)
		case ev.Terminal != nil:
			b.terminal(ev, ts)
		case ev.Call != nil:
			c := ev.Call
			b.add(&atifStep{Timestamp: ts, Source: "system", Message: "compute call " + fmt.Sprint(c.N) + ": " + strings.Join(c.Argv, " "),
				Observation: &atifObservation{Results: []atifResult{{Content: cutText(c.Text, c.Tail, c.Cut)}}},
				Extra:       map[string]any{"sealrun": map[string]any{"kind": ev.Kind, "seq": ev.Seq, "call": callFacts(c)}}})
		default:
			extra := map[string]any{"kind": ev.Kind, "seq": ev.Seq, "at_ms": ev.At}
			if ev.Failed {
				extra["failed"] = true
			}
			if ev.Submission != nil {
				extra["submission"] = ev.Submission
			}
			b.add(&atifStep{Timestamp: ts, Source: "system", Message: ev.Text, Extra: map[string]any{"sealrun": extra}})
		}
	}
	if len(b.steps) == 0 { // ATIF wants at least one step
		b.add(&atifStep{Source: "system", Message: "the run has no events (it ended before it started)"})
	}
	tot := t.Totals
	fm := &atifFinalMetrics{TotalPromptTokens: tot.PromptTokens, TotalCompletionTokens: tot.CompletionTokens, TotalCachedTokens: tot.CachedTokens,
		TotalSteps: len(b.steps), Extra: map[string]any{"reasoning_tokens": tot.ReasoningTokens, "cache_write_tokens": tot.CacheWriteTokens,
			"model_requests": tot.Exchanges, "refused_requests": tot.Refused, "retries": tot.Retries, "compute_calls": tot.Calls,
			"failed_compute_calls": tot.FailedCalls, "submissions": tot.Submissions}}
	if t.Run.Price != nil {
		c := tot.Cost
		fm.TotalCostUSD = &c
	}
	if v, ok := sampleScore(t); ok {
		fm.Extra["score"] = v // the hidden exam's percent (or the task's metric); none for an invalid run
	}
	tr := atifTrajectory{
		SchemaVersion: ATIFVersion,
		SessionID:     t.Run.ID,
		Agent:         atifAgent{Name: name, Version: version, ModelName: model, Extra: map[string]any{"agent": t.Run.Agent, "scaffold": t.Run.Scaffold}},
		Steps:         b.steps,
		Notes:         atifNotes,
		FinalMetrics:  fm,
		Extra:         map[string]any{"sealrun": src.fields(t)},
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", " ")
	if err := enc.Encode(tr); err != nil {
		return nil, fmt.Errorf("encode the trajectory of %s: %w", t.Run.ID, err)
	}
	return out.Bytes(), nil
}

// atifNotes says what a reader of the trajectory should know of where it came from.
const atifNotes = "Exported by sealrun from the run's transcript.json (a sealed run: the agent's model requests " +
	"through sealrun's gateway, its compute through the audited runner). Steps are the run's events in order: " +
	"what each model request added (system and user steps; tool results as the observation of the agent step " +
	"that called the tool), each model answer (agent steps, with the request's tokens), and each compute call, " +
	"submission, score and clock event (system steps; extra.sealrun says which). Texts over 48 KiB keep their " +
	"first 48 KiB and last 16 KiB, as the transcript does. extra.sealrun names the transcript and audit head it " +
	"was derived from: sealrun verify --export recomputes it."

// terminal adds a step of a person's (a human run's recording segment): what they typed, as a
// user step, and what the terminal showed them as its observation.
func (b *atifBuilder) terminal(ev *transcript.Event, ts string) {
	tm := ev.Terminal
	facts := map[string]any{"kind": ev.Kind, "seq": ev.Seq, "at_ms": ev.At, "segment": tm.Segment, "from": tm.From, "to": tm.To,
		"input_bytes": tm.InputBytes, "output_bytes": tm.OutputBytes, "body": tm.Body.State}
	if tm.Cast == "" {
		why := "the segment is not in the transcript (" + tm.Body.State + ")"
		if tm.CastCut {
			why = "the segment is past what the transcript carries inline (16 MiB): it is in the run's terminal/ directory"
		}
		b.add(&atifStep{Timestamp: ts, Source: "user", Message: fmt.Sprintf("[terminal %.0f–%.0f s: %s]", tm.From, tm.To, why), Extra: map[string]any{"sealrun": facts}})
		return
	}
	typed, shown := castText(tm.Cast)
	msg := strings.Join(typed, "\n")
	if msg == "" {
		msg = fmt.Sprintf("[terminal %.0f–%.0f s: nothing typed]", tm.From, tm.To)
	}
	s := &atifStep{Timestamp: ts, Source: "user", Message: msg, Extra: map[string]any{"sealrun": facts}}
	if shown != "" {
		head, tail, cut := shown, "", int64(0)
		if len(shown) > 64<<10 {
			head, tail, cut = shown[:48<<10], shown[len(shown)-16<<10:], int64(len(shown)-64<<10)
		}
		s.Observation = &atifObservation{Results: []atifResult{{Content: strings.ToValidUTF8(cutText(head, tail, cut), "\uFFFD")}}}
	}
	b.add(s)
}

// exchange adds the steps of one model exchange.
func (b *atifBuilder) exchange(ev *transcript.Event, ts, effort string) {
	ex := ev.Model
	for _, m := range ex.Added {
		switch m.Role {
		case "assistant":
			// A model answer the scaffold sends again without its exchange in this transcript
			// (its history cut, or a prefill): context, not a model output of this run's.
			s := b.add(&atifStep{Timestamp: ts, Source: "agent", IsCopiedContext: true})
			b.answer(s, m)
		default:
			var results []atifResult
			var text []string
			for _, p := range m.Parts {
				if p.Type == transcript.PartToolResult {
					if s := b.pending[p.ID]; s != nil && p.ID != "" {
						if s.Observation == nil {
							s.Observation = &atifObservation{Results: []atifResult{}}
						}
						s.Observation.Results = append(s.Observation.Results, atifResult{SourceCallID: p.ID, Content: partText(p)})
						delete(b.pending, p.ID)
						continue
					}
					results = append(results, atifResult{Content: partText(p)})
					continue
				}
				text = append(text, partText(p))
			}
			if len(text) == 0 && len(results) == 0 {
				continue
			}
			src := "user"
			if m.Role == "system" || m.Role == "developer" || m.Role == "tool" {
				src = "system"
			}
			s := &atifStep{Timestamp: ts, Source: src, Message: strings.Join(text, "\n\n"), Extra: map[string]any{"sealrun": map[string]any{"role": m.Role, "request": ex.N}}}
			if len(results) > 0 {
				// Results of calls this transcript does not show (their answer cut from it).
				s.Source, s.Observation = "system", &atifObservation{Results: results}
			}
			b.add(s)
		}
	}
	facts := map[string]any{"kind": ev.Kind, "seq": ev.Seq, "request": ex.N, "api": ex.API, "status": ex.Status, "latency_ms": ex.LatencyMS}
	if ex.Stop != "" {
		facts["stop"] = ex.Stop
	}
	if len(ex.Tries) > 1 {
		facts["tries"] = ex.Tries
	}
	if ex.Note != "" {
		facts["note"] = ex.Note
	}
	if ex.Refused != "" || ex.Error != "" || len(ex.Output) == 0 {
		// No answer: what the gateway refused or the provider failed, on the run's record.
		msg := fmt.Sprintf("model request %d: no answer", ex.N)
		switch {
		case ex.Refused != "":
			msg = fmt.Sprintf("model request %d refused by sealrun's gateway: %s", ex.N, ex.Refused)
			facts["refused"] = ex.Refused
		case ex.Error != "":
			msg = fmt.Sprintf("model request %d failed: %s", ex.N, ex.Error)
			facts["error"] = ex.Error
		}
		b.add(&atifStep{Timestamp: ts, Source: "system", Message: msg, Extra: map[string]any{"sealrun": facts}})
		return
	}
	first := true
	for _, m := range ex.Output {
		s := b.add(&atifStep{Timestamp: ts, Source: "agent", ModelName: ex.Model, ReasoningEffort: effort})
		b.answer(s, m)
		if first {
			s.Metrics = &atifMetrics{PromptTokens: ex.Usage.Prompt, CompletionTokens: ex.Usage.Completion, CachedTokens: ex.Usage.CachedPrompt,
				Extra: map[string]any{"reasoning_tokens": ex.Usage.Reasoning, "cache_write_tokens": ex.Usage.CacheWrite}}
			if ex.Cost != 0 {
				c := ex.Cost
				s.Metrics.CostUSD = &c
			}
			s.Extra = map[string]any{"sealrun": facts}
			first = false
		}
	}
}

// answer fills an agent step from an assistant message: its text, reasoning and tool calls.
func (b *atifBuilder) answer(s *atifStep, m transcript.Message) {
	var text, reasoning []string
	for k, p := range m.Parts {
		switch p.Type {
		case transcript.PartReasoning:
			reasoning = append(reasoning, partText(p))
		case transcript.PartToolCall:
			id := p.ID
			if id == "" {
				id = fmt.Sprintf("step-%d-call-%d", s.StepID, k)
			}
			s.ToolCalls = append(s.ToolCalls, atifToolCall{ToolCallID: id, FunctionName: p.Name, Arguments: arguments(p)})
			if !s.IsCopiedContext {
				b.pending[id] = s
			}
		default:
			text = append(text, partText(p))
		}
	}
	s.Message = strings.Join(text, "\n\n")
	s.ReasoningContent = strings.Join(reasoning, "\n\n")
}

// arguments is a tool call's arguments as an object: the JSON object the model wrote, or, for
// anything else (a string, cut text, not JSON), {"input": the text}.
func arguments(p transcript.Part) map[string]any {
	if p.Cut == 0 {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(p.Text))
		d.UseNumber()
		if d.Decode(&m) == nil && m != nil && !d.More() {
			return m
		}
	}
	return map[string]any{"input": partText(p)}
}

// partText is a part's text as the transcript keeps it, a cut one with a line saying so.
func partText(p transcript.Part) string {
	t := cutText(p.Text, p.Tail, p.Cut)
	if p.Type == transcript.PartOther && p.Name != "" {
		return "[" + p.Name + "] " + t
	}
	if p.Type == transcript.PartImage {
		return "[image]" + t
	}
	return t
}

func cutText(head, tail string, cut int64) string {
	if cut == 0 && tail == "" {
		return head
	}
	return head + fmt.Sprintf("\n[… %d bytes not kept in the transcript …]\n", cut) + tail
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func callFacts(c *transcript.Call) map[string]any {
	f := map[string]any{"n": c.N, "argv": c.Argv, "cwd": c.Cwd, "status": c.Status, "exit": c.Exit, "duration_ms": c.DurationMS}
	if c.LimitHit {
		f["limit_hit"] = c.Limit
	}
	if c.OOMKilled {
		f["oom_killed"] = true
	}
	if c.Error != "" {
		f["error"] = c.Error
	}
	if c.Output.State != "" {
		f["output"] = c.Output.State
	}
	return f
}

// splitAgent is provider/model[@effort] as the model and the effort.
func splitAgent(agent string) (model, effort string) {
	model, effort, _ = strings.Cut(agent, "@")
	if _, m, ok := strings.Cut(model, "/"); ok {
		model = m
	}
	return model, effort
}

// splitScaffold is "name version" as its name and version ("sealrun-scaffold" and "unknown"
// where the transcript names none: ATIF requires both).
func splitScaffold(s string) (name, version string) {
	name, version, _ = strings.Cut(strings.TrimSpace(s), " ")
	if name == "" {
		name = "sealrun-scaffold"
	}
	if version == "" {
		version = "unknown"
	}
	return name, version
}
