package export

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/sealrun/sealrun/transcript"
)

// InspectLogVersion is the version of Inspect's eval log format the export writes (EvalLog's
// version field).
const InspectLogVersion = 2

// Run is one run to export: its transcript and what it was derived from.
type Run struct {
	T   *transcript.Transcript
	Src Source
}

// InspectGroup is the key runs are grouped by into one eval log: one eval per track and agent
// (and scaffold), one sample per run, its seed the epoch.
func InspectGroup(t *transcript.Transcript) string {
	return t.Run.TrackID + "\x00" + t.Run.Track + "\x00" + t.Run.Agent + "\x00" + t.Run.Scaffold
}

// InspectName is a file name for a group's eval log: track-agent, in safe characters.
func InspectName(t *transcript.Transcript) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '_'
		}, s)
	}
	return clean(t.Run.Track) + "-" + clean(t.Run.Agent) + ".json"
}

// Inspect is runs (all of one InspectGroup) as one Inspect eval log (EvalLog, log format
// version 2, JSON): the eval spec from the track, agent and scaffold; per run a sample whose
// id is the track, epoch its seed, messages the conversation, events its model exchanges
// (ModelEvent), compute calls (ToolEvent), scores (ScoreEvent) and the rest (InfoEvent), and
// its score the hidden exam's (or the task's metric). It is written compact, so that each
// sample's bytes are those InspectSample gives: sealrun verify --export recomputes one run's.
func Inspect(runs []Run) ([]byte, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("no run to export")
	}
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].T.Run.Seed != runs[j].T.Run.Seed {
			return runs[i].T.Run.Seed < runs[j].T.Run.Seed
		}
		return runs[i].T.Run.ID < runs[j].T.Run.ID
	})
	first := runs[0].T.Run
	key := InspectGroup(runs[0].T)
	var samples []json.RawMessage
	var sources []map[string]any
	var created, completed time.Time
	usage := map[string]*inspectUsage{}
	var scores []float64
	done := 0
	for _, r := range runs {
		if InspectGroup(r.T) != key {
			return nil, fmt.Errorf("run %s is of another track or agent than run %s: one eval log holds one track and agent", r.T.Run.ID, first.ID)
		}
		s, err := InspectSample(r.T, r.Src)
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
		sources = append(sources, r.Src.fields(r.T))
		if st := r.T.Run.Started; !st.IsZero() && (created.IsZero() || st.Before(created)) {
			created = st
		}
		if f := r.T.Run.Finished; f.After(completed) {
			completed = f
		}
		m, _ := splitAgent(r.T.Run.Agent)
		u := usage[m]
		if u == nil {
			u = &inspectUsage{}
			usage[m] = u
		}
		u.add(totalsUsage(r.T))
		if v, ok := sampleScore(r.T); ok {
			scores = append(scores, v)
		}
		if r.T.Run.State != "invalid" {
			done++
		}
	}
	model, effort := splitAgent(first.Agent)
	provider, _, _ := strings.Cut(first.Agent, "/")
	if !strings.Contains(first.Agent, "/") {
		provider = ""
	}
	name, version := splitScaffold(first.Scaffold)
	id := func(what string) string { // a stable id: the same runs give the same log
		h := sha256.New()
		fmt.Fprintln(h, what)
		for _, s := range sources {
			fmt.Fprintln(h, s["run"], s["transcript_sha256"])
		}
		return strings.TrimRight(base64.RawURLEncoding.EncodeToString(h.Sum(nil))[:22], "=")
	}
	evalModel := model
	if provider != "" {
		evalModel = provider + "/" + model
	}
	metrics := map[string]any{}
	if len(scores) > 0 {
		mean, se := meanSE(scores)
		metrics["mean"] = map[string]any{"name": "mean", "value": mean}
		if len(scores) > 1 {
			metrics["stderr"] = map[string]any{"name": "stderr", "value": se}
		}
	}
	log := inspectLog{
		Version: InspectLogVersion,
		Status:  "success",
		Eval: map[string]any{
			"eval_id": id("eval"), "run_id": id("run"), "created": requiredTime(created),
			"task": first.Track, "task_id": first.TrackID, "task_version": orDefault(first.TrackVersion, "0"),
			"dataset": map[string]any{"name": first.Track, "samples": 1, "sample_ids": []string{first.Track}},
			"model":   evalModel, "config": map[string]any{"epochs": len(runs)},
			"solver": name, "packages": map[string]string{"sealrun": runs[0].Src.Version},
			"metadata": map[string]any{"sealrun": map[string]any{"format": Format, "agent": first.Agent, "reasoning_effort": effort,
				"scaffold": first.Scaffold, "scaffold_version": version, "runs": sources}},
		},
		Plan: map[string]any{"name": "plan", "steps": []any{map[string]any{"solver": name, "params": map[string]any{"version": version}}}, "config": map[string]any{}},
		Results: map[string]any{"total_samples": len(runs), "completed_samples": done,
			"scores": []any{map[string]any{"name": "sealrun", "scorer": "sealrun", "scored_samples": len(scores), "unscored_samples": len(runs) - len(scores), "metrics": metrics}}},
		Stats:   map[string]any{"started_at": requiredTime(created), "completed_at": requiredTime(completed), "model_usage": usage},
		Samples: samples,
	}
	b, err := json.Marshal(log)
	if err != nil {
		return nil, fmt.Errorf("encode the eval log of %s: %w", first.ID, err)
	}
	return append(b, '\n'), nil
}

type inspectLog struct {
	Version int               `json:"version"`
	Status  string            `json:"status"`
	Eval    map[string]any    `json:"eval"`
	Plan    map[string]any    `json:"plan"`
	Results map[string]any    `json:"results"`
	Stats   map[string]any    `json:"stats"`
	Samples []json.RawMessage `json:"samples"`
}

// inspectUsage is Inspect's ModelUsage.
type inspectUsage struct {
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	TotalTokens      int64    `json:"total_tokens"`
	CacheWriteTokens int64    `json:"input_tokens_cache_write"`
	CacheReadTokens  int64    `json:"input_tokens_cache_read"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	TotalCost        *float64 `json:"total_cost,omitempty"`
}

func (u *inspectUsage) add(o inspectUsage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.TotalTokens += o.TotalTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.ReasoningTokens += o.ReasoningTokens
	if o.TotalCost != nil {
		c := *o.TotalCost
		if u.TotalCost != nil {
			c += *u.TotalCost
		}
		u.TotalCost = &c
	}
}

func totalsUsage(t *transcript.Transcript) inspectUsage {
	tot := t.Totals
	u := inspectUsage{InputTokens: tot.PromptTokens, OutputTokens: tot.CompletionTokens, TotalTokens: tot.PromptTokens + tot.CompletionTokens,
		CacheWriteTokens: tot.CacheWriteTokens, CacheReadTokens: tot.CachedTokens, ReasoningTokens: tot.ReasoningTokens}
	if t.Run.Price != nil {
		c := tot.Cost
		u.TotalCost = &c
	}
	return u
}

// sampleScore is the run's score: the sealed pass vector's percent, or a task's evaluated
// metric (the last of them); a failed run without one scores 0 (its own doing); an invalid one
// has none (the host's fault: no score at all).
func sampleScore(t *transcript.Transcript) (float64, bool) {
	if t.Run.State == "invalid" {
		return 0, false
	}
	for i := len(t.Events) - 1; i >= 0; i-- {
		if v, ok := eventScore(&t.Events[i]); ok && t.Events[i].Kind != transcript.KindValidation {
			return v, true
		}
	}
	if t.Run.State == "failed" {
		return 0, true
	}
	return 0, false
}

// eventScore is the score an event records: a validation's or a task's evaluation, or the
// sealed pass vector's percent.
func eventScore(ev *transcript.Event) (float64, bool) {
	s := ev.Submission
	switch {
	case s == nil:
		return 0, false
	case ev.Kind == transcript.KindSealed && s.Passed != nil && s.Questions > 0:
		return float64(*s.Passed) * 100 / float64(s.Questions), true
	case (ev.Kind == transcript.KindValidation || ev.Kind == transcript.KindEvaluated) && s.Score != nil:
		return *s.Score, true
	}
	return 0, false
}

// InspectSample is one run as an Inspect sample (EvalSample), compact JSON.
func InspectSample(t *transcript.Transcript, src Source) (json.RawMessage, error) {
	b := &inspectBuilder{t: t, callFunc: map[string]string{}}
	for i := range t.Events {
		b.event(&t.Events[i])
	}
	model, _ := splitAgent(t.Run.Agent)
	input := ""
	for _, m := range b.messages {
		if m["role"] == "user" {
			input, _ = m["content"].(string)
			break
		}
	}
	s := map[string]any{
		"id": t.Run.Track, "epoch": t.Run.Seed, "input": input, "target": "",
		"messages": orEmpty(b.messages), "output": b.output(model), "metadata": map[string]any{"sealrun": src.fields(t)},
		"store": map[string]any{}, "events": orEmpty(b.events), "model_usage": map[string]any{model: totalsUsage(t)},
		"uuid": t.Run.ID, "attachments": map[string]any{},
	}
	if !t.Run.Started.IsZero() {
		s["started_at"] = isoTime(t.Run.Started)
		s["completed_at"] = isoTime(t.Run.Finished)
		s["total_time"] = seconds(t.Run.Finished.Sub(t.Run.Started))
		s["working_time"] = seconds(t.Run.Finished.Sub(t.Run.Started))
	}
	if v, ok := sampleScore(t); ok {
		s["scores"] = map[string]any{"sealrun": map[string]any{"value": v, "explanation": orDefault(t.Run.Result, t.Run.State),
			"metadata": map[string]any{"state": t.Run.State, "reason": t.Run.Reason}}}
	}
	if t.Run.State == "invalid" {
		s["error"] = map[string]any{"message": "invalid: " + t.Run.Reason + " (the host's fault, not the agent's: the run counts for nothing and is rerun)", "traceback": "", "traceback_ansi": ""}
	}
	out, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode the sample of %s: %w", t.Run.ID, err)
	}
	return out, nil
}

type inspectBuilder struct {
	t        *transcript.Transcript
	messages []map[string]any
	events   []map[string]any
	last     map[string]any    // the last answer (ModelOutput)
	callFunc map[string]string // tool call id -> its function, for the tool message
}

func (b *inspectBuilder) base(kind string, ev *transcript.Event) map[string]any {
	ts := ev.Time
	if ts.IsZero() { // Inspect requires a time: the run's start and the event's offset
		ts = b.t.Run.Started.Add(time.Duration(ev.At) * time.Millisecond)
	}
	return map[string]any{"event": kind, "uuid": fmt.Sprintf("%s-e%d", b.t.Run.ID, len(b.events)+1), "timestamp": requiredTime(ts), "working_start": float64(ev.At) / 1000}
}

func (b *inspectBuilder) event(ev *transcript.Event) {
	switch {
	case ev.Model != nil:
		ex := ev.Model
		var input []map[string]any
		for _, m := range ex.Added {
			cm := b.message(m, ex.Model)
			input = append(input, cm)
			b.messages = append(b.messages, cm)
		}
		e := b.base("model", ev)
		e["model"] = orDefault(ex.Model, "unknown")
		e["input"] = orEmpty(input)
		tools := []any{}
		for _, n := range ex.Tools {
			tools = append(tools, map[string]any{"name": n, "description": "", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}})
		}
		e["tools"] = tools
		e["tool_choice"] = "auto"
		e["config"] = map[string]any{}
		var choices []any
		var answer map[string]any
		for _, m := range ex.Output {
			cm := b.message(m, ex.Model)
			b.messages = append(b.messages, cm)
			if answer == nil {
				answer = cm
			}
			choices = append(choices, map[string]any{"message": cm, "stop_reason": stopReason(ex.Stop)})
		}
		u := inspectUsage{InputTokens: ex.Usage.Prompt, OutputTokens: ex.Usage.Completion, TotalTokens: ex.Usage.Prompt + ex.Usage.Completion,
			CacheWriteTokens: ex.Usage.CacheWrite, CacheReadTokens: ex.Usage.CachedPrompt, ReasoningTokens: ex.Usage.Reasoning}
		if ex.Cost != 0 {
			c := ex.Cost
			u.TotalCost = &c
		}
		out := map[string]any{"model": orDefault(ex.Model, "unknown"), "choices": orEmpty(choices), "completion": messageText(answer), "usage": u, "time": float64(ex.LatencyMS) / 1000}
		if ex.Refused != "" {
			out["error"] = "refused by sealrun's gateway: " + ex.Refused
			e["error"] = out["error"]
		} else if ex.Error != "" {
			e["error"] = ex.Error
		}
		e["output"] = out
		if len(ex.Tries) > 1 {
			e["retries"] = len(ex.Tries) - 1
		}
		e["completed"] = isoTime(ev.Time.Add(time.Duration(ex.LatencyMS) * time.Millisecond))
		e["working_time"] = float64(ex.LatencyMS) / 1000
		e["metadata"] = map[string]any{"sealrun": map[string]any{"seq": ev.Seq, "request": ex.N, "api": ex.API, "status": ex.Status, "note": ex.Note,
			"input": "the messages this request added; those before it are the earlier model events' input and output"}}
		b.events = append(b.events, e)
		if answer != nil {
			b.last = out
		}
	case ev.Call != nil:
		c := ev.Call
		e := b.base("tool", ev)
		e["type"] = "function"
		e["id"] = fmt.Sprintf("call-%d", c.N)
		e["function"] = "runner"
		e["arguments"] = map[string]any{"argv": c.Argv, "cwd": c.Cwd}
		e["result"] = cutText(c.Text, c.Tail, c.Cut)
		if c.Cut > 0 {
			e["truncated"] = []int64{int64(len(c.Text)) + c.Cut + int64(len(c.Tail)), int64(len(c.Text) + len(c.Tail))}
		}
		switch {
		case c.LimitHit:
			e["error"] = map[string]any{"type": "timeout", "message": "killed at its limit of " + c.Limit}
		case c.Status == "infra_error" || c.Error != "":
			e["error"] = map[string]any{"type": "unknown", "message": orDefault(c.Error, c.Status)}
			e["failed"] = true
		}
		e["completed"] = isoTime(c.End)
		e["working_time"] = float64(c.DurationMS) / 1000
		e["metadata"] = map[string]any{"sealrun": map[string]any{"seq": ev.Seq, "call": callFacts(c)}}
		b.events = append(b.events, e)
	case scoreEvent(ev):
		v, _ := eventScore(ev)
		e := b.base("score", ev)
		e["score"] = map[string]any{"value": v, "explanation": ev.Text, "metadata": map[string]any{"kind": ev.Kind, "submission": ev.Submission}}
		e["intermediate"] = ev.Kind == transcript.KindValidation
		b.events = append(b.events, e)
	default:
		e := b.base("info", ev)
		e["source"] = "sealrun"
		data := map[string]any{"kind": ev.Kind, "text": ev.Text, "seq": ev.Seq}
		if ev.Submission != nil {
			data["submission"] = ev.Submission
		}
		if ev.Failed {
			data["failed"] = true
		}
		e["data"] = data
		b.events = append(b.events, e)
	}
}

func scoreEvent(ev *transcript.Event) bool { _, ok := eventScore(ev); return ok }

// message is a transcript message as Inspect's ChatMessage.
func (b *inspectBuilder) message(m transcript.Message, model string) map[string]any {
	id := fmt.Sprintf("%s-m%d", b.t.Run.ID, len(b.messages)+1)
	var text, reasoning []string
	var calls []any
	var results []transcript.Part
	for _, p := range m.Parts {
		switch p.Type {
		case transcript.PartReasoning:
			reasoning = append(reasoning, partText(p))
		case transcript.PartToolCall:
			cid := orDefault(p.ID, fmt.Sprintf("%s-call-%d", id, len(calls)+1))
			b.callFunc[cid] = p.Name
			calls = append(calls, map[string]any{"id": cid, "function": p.Name, "arguments": arguments(p), "type": "function"})
		case transcript.PartToolResult:
			results = append(results, p)
		default:
			text = append(text, partText(p))
		}
	}
	switch m.Role {
	case "assistant":
		var content any = strings.Join(text, "\n\n")
		if len(reasoning) > 0 {
			content = []any{map[string]any{"type": "reasoning", "reasoning": strings.Join(reasoning, "\n\n"), "redacted": false},
				map[string]any{"type": "text", "text": strings.Join(text, "\n\n")}}
		}
		cm := map[string]any{"id": id, "role": "assistant", "content": content, "source": "generate", "model": model}
		if len(calls) > 0 {
			cm["tool_calls"] = calls
		}
		return cm
	case "tool":
		var out []string
		cid := ""
		isErr := false
		for _, p := range results {
			out = append(out, partText(p))
			cid = orDefault(cid, p.ID)
			isErr = isErr || p.Error
		}
		out = append(out, text...)
		cm := map[string]any{"id": id, "role": "tool", "content": strings.Join(out, "\n\n"), "source": "input"}
		if cid != "" {
			cm["tool_call_id"] = cid
			if f := b.callFunc[cid]; f != "" {
				cm["function"] = f
			}
		}
		if isErr {
			cm["error"] = map[string]any{"type": "unknown", "message": "the tool reported an error"}
		}
		return cm
	case "system", "developer":
		return map[string]any{"id": id, "role": "system", "content": strings.Join(text, "\n\n"), "source": "input"}
	default: // user, and tool results an API sends as a user message
		for _, p := range results {
			text = append(text, partText(p))
		}
		cm := map[string]any{"id": id, "role": "user", "content": strings.Join(text, "\n\n"), "source": "input"}
		var ids []string
		for _, p := range results {
			if p.ID != "" {
				ids = append(ids, p.ID)
			}
		}
		if len(ids) > 0 {
			cm["tool_call_id"] = ids
		}
		return cm
	}
}

// output is the sample's output: the last answer's ModelOutput, or an empty one.
func (b *inspectBuilder) output(model string) map[string]any {
	if b.last != nil {
		return b.last
	}
	return map[string]any{"model": model, "choices": []any{}, "completion": ""}
}

func messageText(m map[string]any) string {
	if m == nil {
		return ""
	}
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok && pm["type"] == "text" {
				s, _ := pm["text"].(string)
				return s
			}
		}
	}
	return ""
}

// stopReason maps an API's finish or stop reason to Inspect's StopReason.
func stopReason(s string) string {
	switch s {
	case "stop", "end_turn", "stop_sequence", "STOP", "completed":
		return "stop"
	case "tool_calls", "tool_use", "function_call":
		return "tool_calls"
	case "length", "max_tokens", "MAX_TOKENS", "max_output_tokens":
		return "max_tokens"
	case "content_filter", "SAFETY", "refusal":
		return "content_filter"
	case "model_context_window_exceeded":
		return "model_length"
	}
	return "unknown"
}

func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999-07:00")
}

// requiredTime is t for a field Inspect requires: the Unix epoch where the run has no time
// (one that ended before it started).
func requiredTime(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return isoTime(t)
}

func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1000) / 1000 }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

func meanSE(xs []float64) (mean, se float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
}

// SampleOf finds run's sample in an Inspect eval log's bytes: its exact bytes.
func SampleOf(b []byte, run string) (json.RawMessage, error) {
	var log struct {
		Samples []json.RawMessage `json:"samples"`
	}
	if err := json.Unmarshal(b, &log); err != nil {
		return nil, fmt.Errorf("not an eval log: %v", err)
	}
	for _, s := range log.Samples {
		var head struct {
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(s, &head) == nil && head.UUID == run {
			return s, nil
		}
	}
	return nil, fmt.Errorf("the eval log holds no sample of run %s", run)
}
