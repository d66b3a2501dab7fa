package export

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/stats"
	"github.com/sealrun/sealrun/transcript"
)

// Inspect's writer writes every field of its objects, null where unset, and its log schema
// requires them: the export does the same (fill), with these lists of each object's fields.
var (
	fieldsGenerateConfig = []string{"max_retries", "timeout", "attempt_timeout", "max_connections", "system_message", "max_tokens", "top_p", "temperature", "stop_seqs",
		"best_of", "frequency_penalty", "presence_penalty", "logit_bias", "seed", "top_k", "num_choices", "logprobs", "top_logprobs", "parallel_tool_calls",
		"internal_tools", "max_tool_output", "cache_prompt", "verbosity", "effort", "reasoning_effort", "reasoning_tokens", "reasoning_summary",
		"reasoning_history", "response_schema", "extra_headers", "extra_body", "modalities", "cache", "batch"}
	fieldsEvalSpec = []string{"eval_set_id", "eval_id", "run_id", "created", "task", "task_id", "task_version", "task_file", "task_display_name",
		"task_registry_name", "task_attribs", "task_args", "task_args_passed", "solver", "solver_args", "solver_args_passed", "tags", "dataset", "sandbox",
		"model", "model_generate_config", "model_base_url", "model_args", "model_roles", "config", "revision", "packages", "metadata", "scorers", "metrics"}
	fieldsEvalConfig = []string{"limit", "sample_id", "sample_shuffle", "epochs", "epochs_reducer", "approval", "fail_on_error", "continue_on_fail",
		"retry_on_error", "message_limit", "token_limit", "time_limit", "working_limit", "cost_limit", "max_samples", "max_dataset_memory", "max_tasks",
		"max_subprocesses", "max_sandboxes", "sandbox_cleanup", "log_samples", "log_realtime", "log_images", "log_model_api", "log_buffer", "log_shared",
		"score_display"}
	fieldsDataset   = []string{"name", "location", "samples", "sample_ids", "shuffled"}
	fieldsPlan      = []string{"name", "steps", "finish", "config"}
	fieldsPlanStep  = []string{"solver", "params", "params_passed"}
	fieldsResults   = []string{"total_samples", "completed_samples", "early_stopping", "scores", "metadata"}
	fieldsEvalScore = []string{"name", "scorer", "reducer", "scored_samples", "unscored_samples", "params", "metrics", "metadata"}
	fieldsMetric    = []string{"name", "value", "params", "metadata"}
	fieldsStats     = []string{"started_at", "completed_at", "model_usage", "role_usage"}
	fieldsSample    = []string{"id", "epoch", "input", "choices", "target", "sandbox", "files", "setup", "messages", "output", "scores", "metadata", "store",
		"events", "timelines", "model_usage", "role_usage", "started_at", "completed_at", "total_time", "working_time", "uuid", "invalidation", "error",
		"error_retries", "attachments", "events_data", "limit"}
	fieldsMessage = map[string][]string{
		"system":    {"id", "content", "source", "metadata", "role"},
		"user":      {"id", "content", "source", "metadata", "role", "tool_call_id"},
		"assistant": {"id", "content", "source", "metadata", "role", "tool_calls", "model"},
		"tool":      {"id", "content", "source", "metadata", "role", "tool_call_id", "function", "error"},
	}
	fieldsContent = map[string][]string{
		"text":      {"internal", "type", "text", "refusal", "citations"},
		"reasoning": {"internal", "type", "reasoning", "summary", "signature", "redacted"},
	}
	fieldsToolCall = []string{"id", "function", "arguments", "parse_error", "view", "type"}
	fieldsOutput   = []string{"model", "choices", "completion", "usage", "time", "metadata", "error"}
	fieldsChoice   = []string{"message", "stop_reason", "logprobs"}
	fieldsEvent    = map[string][]string{
		"model": {"uuid", "span_id", "timestamp", "working_start", "metadata", "pending", "event", "model", "role", "input", "input_refs", "tools",
			"tool_choice", "config", "output", "retries", "error", "traceback", "traceback_ansi", "cache", "call", "completed", "working_time"},
		"tool": {"uuid", "span_id", "timestamp", "working_start", "metadata", "pending", "event", "type", "id", "function", "arguments", "view", "result",
			"truncated", "error", "events", "completed", "working_time", "agent", "agent_span_id", "failed", "message_id"},
		"score": {"uuid", "span_id", "timestamp", "working_start", "metadata", "pending", "event", "score", "target", "intermediate", "model_usage", "role_usage"},
		"info":  {"uuid", "span_id", "timestamp", "working_start", "metadata", "pending", "event", "source", "data"},
	}
	fieldsScore    = []string{"value", "answer", "explanation", "metadata", "history"}
	fieldsToolInfo = []string{"name", "description", "parameters", "options"}
)

// fill sets each of fields m lacks to null.
func fill(m map[string]any, fields []string) map[string]any {
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			m[f] = nil
		}
	}
	return m
}

func generateConfig() map[string]any { return fill(map[string]any{}, fieldsGenerateConfig) }

// generateConfigJSON is generateConfig encoded once: every model event of every sample carries
// it, and a map of its 34 nulls, its keys sorted, each time was most of a sample's encoding.
var generateConfigJSON = func() json.RawMessage {
	b, err := json.Marshal(generateConfig())
	if err != nil {
		panic(err)
	}
	return b
}()

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
	var out bytes.Buffer
	if err := InspectTo(&out, runs); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// InspectTo writes Inspect's log to w as it is made (a reader comparing it with a digest need
// not hold it whole).
func InspectTo(w io.Writer, runs []Run) error {
	log, err := inspectLogOf(runs)
	if err != nil {
		return err
	}
	// The samples are json.Marshal's own output (compact, HTML escaped), which json.Marshal
	// would only validate and copy again, byte for byte, inside the log: the log is encoded
	// without them and they follow its head, each once.
	samples := log.Samples
	log.Samples = []json.RawMessage{}
	head, err := json.Marshal(log)
	if err != nil {
		return fmt.Errorf("encode the eval log of %s: %w", runs[0].T.Run.ID, err)
	}
	const tail = `"samples":[]}`
	if !bytes.HasSuffix(head, []byte(tail)) {
		return fmt.Errorf("encode the eval log of %s: its samples are not its last member", runs[0].T.Run.ID)
	}
	if b, ok := w.(*bytes.Buffer); ok {
		size := len(head) + 2
		for _, s := range samples {
			size += len(s) + 1
		}
		b.Grow(size)
	}
	if _, err := w.Write(head[:len(head)-2]); err != nil {
		return err
	}
	for i, s := range samples {
		if i > 0 {
			if _, err := w.Write([]byte{','}); err != nil {
				return err
			}
		}
		if _, err := w.Write(s); err != nil {
			return err
		}
	}
	_, err = w.Write([]byte("]}\n"))
	return err
}

// inspectLogOf is the eval log of runs (all of one InspectGroup), sorted by seed then id.
func inspectLogOf(runs []Run) (*inspectLog, error) {
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
	}
	// The samples on every CPU (a log of a thousand runs is a thousand samples), in order.
	made := make([]json.RawMessage, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), len(runs)) {
		wg.Go(func() {
			for i := range next {
				made[i], errs[i] = InspectSample(runs[i].T, runs[i].Src)
			}
		})
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, r := range runs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		samples = append(samples, made[i])
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
		if r.T.Run.State != string(outcome.Invalid) {
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
		mean, se := stats.MeanStderr(scores)
		metrics["mean"] = fill(map[string]any{"name": "mean", "value": mean, "params": map[string]any{}}, fieldsMetric)
		if len(scores) > 1 {
			metrics["stderr"] = fill(map[string]any{"name": "stderr", "value": se, "params": map[string]any{}}, fieldsMetric)
		}
	}
	log := inspectLog{
		Version: InspectLogVersion,
		Status:  "success",
		Eval: fill(map[string]any{
			"eval_id": id("eval"), "run_id": id("run"), "created": requiredTime(created),
			"task": first.Track, "task_id": first.TrackID, "task_version": orDefault(first.TrackVersion, "0"),
			"task_attribs": map[string]any{}, "task_args": map[string]any{}, "task_args_passed": map[string]any{},
			"dataset":               fill(map[string]any{"name": first.Track, "samples": 1, "sample_ids": []string{first.Track}}, fieldsDataset),
			"model":                 evalModel,
			"model_generate_config": generateConfig(), "model_args": map[string]any{},
			"config": fill(map[string]any{"epochs": len(runs)}, fieldsEvalConfig),
			"solver": name, "packages": map[string]string{"sealrun": runs[0].Src.Version},
			"metadata": map[string]any{"sealrun": map[string]any{"format": Format, "agent": first.Agent, "reasoning_effort": effort,
				"scaffold": first.Scaffold, "scaffold_version": version, "runs": sources}},
		}, fieldsEvalSpec),
		Plan: fill(map[string]any{"name": "plan", "steps": []any{fill(map[string]any{"solver": name, "params": map[string]any{"version": version}, "params_passed": map[string]any{}}, fieldsPlanStep)},
			"config": generateConfig()}, fieldsPlan),
		Results: fill(map[string]any{"total_samples": len(runs), "completed_samples": done,
			"scores": []any{fill(map[string]any{"name": "sealrun", "scorer": "sealrun", "scored_samples": len(scores), "unscored_samples": len(runs) - len(scores),
				"params": map[string]any{}, "metrics": metrics}, fieldsEvalScore)}}, fieldsResults),
		Stats:   fill(map[string]any{"started_at": requiredTime(created), "completed_at": requiredTime(completed), "model_usage": usage, "role_usage": map[string]any{}}, fieldsStats),
		Samples: samples,
	}
	return &log, nil
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
	TotalCost        *float64 `json:"total_cost"`
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
	if t.Run.State == string(outcome.Invalid) {
		return 0, false
	}
	for i := len(t.Events) - 1; i >= 0; i-- {
		if v, ok := eventScore(&t.Events[i]); ok && t.Events[i].Kind != transcript.KindValidation {
			return v, true
		}
	}
	if t.Run.State == string(outcome.Failed) {
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
		"store": map[string]any{}, "events": orEmpty(b.events), "model_usage": map[string]any{model: totalsUsage(t)}, "role_usage": map[string]any{},
		"uuid": t.Run.ID, "attachments": map[string]any{},
	}
	if !t.Run.Started.IsZero() {
		s["started_at"] = isoTime(t.Run.Started)
		s["completed_at"] = isoTime(t.Run.Finished)
		s["total_time"] = seconds(t.Run.Finished.Sub(t.Run.Started))
		s["working_time"] = seconds(t.Run.Finished.Sub(t.Run.Started))
	}
	if v, ok := sampleScore(t); ok {
		s["scores"] = map[string]any{"sealrun": fill(map[string]any{"value": v, "explanation": orDefault(t.Run.Result, t.Run.State),
			"metadata": map[string]any{"state": t.Run.State, "reason": t.Run.Reason}, "history": []any{}}, fieldsScore)}
	}
	if t.Run.State == string(outcome.Invalid) {
		s["error"] = map[string]any{"message": "invalid: " + t.Run.Reason + " (the host's fault, not the agent's: the run counts for nothing and is rerun)", "traceback": "", "traceback_ansi": ""}
	}
	out, err := json.Marshal(fill(s, fieldsSample))
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
			tools = append(tools, fill(map[string]any{"name": n, "description": "", "parameters": map[string]any{"type": "object", "properties": map[string]any{}, "required": []any{}, "additionalProperties": false}}, fieldsToolInfo))
		}
		e["tools"] = tools
		e["tool_choice"] = "auto"
		e["config"] = generateConfigJSON
		var choices []any
		var answer map[string]any
		for _, m := range ex.Output {
			cm := b.message(m, ex.Model)
			b.messages = append(b.messages, cm)
			if answer == nil {
				answer = cm
			}
			choices = append(choices, fill(map[string]any{"message": cm, "stop_reason": stopReason(ex.Stop)}, fieldsChoice))
		}
		u := inspectUsage{InputTokens: ex.Usage.Prompt, OutputTokens: ex.Usage.Completion, TotalTokens: ex.Usage.Prompt + ex.Usage.Completion,
			CacheWriteTokens: ex.Usage.CacheWrite, CacheReadTokens: ex.Usage.CachedPrompt, ReasoningTokens: ex.Usage.Reasoning}
		if ex.Cost != 0 {
			c := ex.Cost
			u.TotalCost = &c
		}
		out := fill(map[string]any{"model": orDefault(ex.Model, "unknown"), "choices": orEmpty(choices), "completion": messageText(answer), "usage": u, "time": float64(ex.LatencyMS) / 1000}, fieldsOutput)
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
		b.events = append(b.events, fill(e, fieldsEvent["model"]))
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
		e["events"] = []any{}
		b.events = append(b.events, fill(e, fieldsEvent["tool"]))
	case scoreEvent(ev):
		v, _ := eventScore(ev)
		e := b.base("score", ev)
		e["score"] = fill(map[string]any{"value": v, "explanation": ev.Text, "metadata": map[string]any{"kind": ev.Kind, "submission": ev.Submission}, "history": []any{}}, fieldsScore)
		e["intermediate"] = ev.Kind == transcript.KindValidation
		b.events = append(b.events, fill(e, fieldsEvent["score"]))
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
		b.events = append(b.events, fill(e, fieldsEvent["info"]))
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
			calls = append(calls, fill(map[string]any{"id": cid, "function": p.Name, "arguments": arguments(p), "type": "function"}, fieldsToolCall))
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
			content = []any{fill(map[string]any{"type": "reasoning", "reasoning": strings.Join(reasoning, "\n\n"), "redacted": false}, fieldsContent["reasoning"]),
				fill(map[string]any{"type": "text", "text": strings.Join(text, "\n\n")}, fieldsContent["text"])}
		}
		cm := map[string]any{"id": id, "role": "assistant", "content": content, "source": "generate", "model": model}
		if len(calls) > 0 {
			cm["tool_calls"] = calls
		}
		return fill(cm, fieldsMessage["assistant"])
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
		return fill(cm, fieldsMessage["tool"])
	case "system", "developer":
		return fill(map[string]any{"id": id, "role": "system", "content": strings.Join(text, "\n\n"), "source": "input"}, fieldsMessage["system"])
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
		return fill(cm, fieldsMessage["user"])
	}
}

// output is the sample's output: the last answer's ModelOutput, or an empty one.
func (b *inspectBuilder) output(model string) map[string]any {
	if b.last != nil {
		return b.last
	}
	return fill(map[string]any{"model": model, "choices": []any{}, "completion": ""}, fieldsOutput)
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

// SampleOf finds run's sample in an Inspect eval log's bytes (the .json form, or the .eval zip):
// its exact bytes.
func SampleOf(b []byte, run string) (json.RawMessage, error) {
	if bytes.HasPrefix(b, []byte("PK\x03\x04")) {
		return sampleOfEval(b, run)
	}
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
