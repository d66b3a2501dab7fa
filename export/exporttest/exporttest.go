// Package exporttest checks exports against their formats' definitions, as written from the
// specs, for the export package's tests and the end-to-end ones on real runs.
package exporttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// ATIFRules checks a trajectory against ATIF's definition (Harbor's RFC 0001 and its models,
// v1.6), field by field: every object's fields are the RFC's (extra forbidden), the required
// ones present with their types, step ids 1, 2, … in order, source one of system, user and
// agent, the agent-only fields on agent steps only, every observation result's source_call_id
// one of its own step's tool calls, timestamps ISO 8601, total_steps the count of steps.
func ATIFRules(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var tr map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&tr); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	bad := func(format string, a ...any) { t.Helper(); t.Errorf("ATIF: "+format, a...) }
	only := func(where string, o map[string]any, allowed ...string) {
		t.Helper()
		for k := range o {
			if !slices.Contains(allowed, k) {
				bad("%s: field %q is not ATIF's (its objects forbid extra fields)", where, k)
			}
		}
	}
	str := func(where string, o map[string]any, k string, required bool) string {
		t.Helper()
		v, ok := o[k]
		if !ok {
			if required {
				bad("%s: %s is required", where, k)
			}
			return ""
		}
		s, isStr := v.(string)
		if !isStr {
			bad("%s: %s is %T, not a string", where, k, v)
		}
		return s
	}
	integer := func(where string, o map[string]any, k string) {
		t.Helper()
		if v, ok := o[k]; ok {
			if n, isNum := v.(json.Number); !isNum || strings.ContainsAny(n.String(), ".eE") {
				bad("%s: %s is %v, not an integer", where, k, v)
			}
		}
	}
	object := func(where string, o map[string]any, k string) map[string]any {
		t.Helper()
		v, ok := o[k]
		if !ok {
			return nil
		}
		m, isObj := v.(map[string]any)
		if !isObj {
			bad("%s: %s is %T, not an object", where, k, v)
		}
		return m
	}
	only("trajectory", tr, "schema_version", "session_id", "agent", "steps", "notes", "final_metrics", "continued_trajectory_ref", "extra")
	if v := str("trajectory", tr, "schema_version", true); !slices.Contains([]string{"ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.2", "ATIF-v1.3", "ATIF-v1.4", "ATIF-v1.5", "ATIF-v1.6"}, v) {
		bad("schema_version %q", v)
	}
	str("trajectory", tr, "session_id", true)
	str("trajectory", tr, "notes", false)
	object("trajectory", tr, "extra")
	ag := object("trajectory", tr, "agent")
	if ag == nil {
		bad("agent is required")
	}
	only("agent", ag, "name", "version", "model_name", "tool_definitions", "extra")
	str("agent", ag, "name", true)
	str("agent", ag, "version", true)
	str("agent", ag, "model_name", false)
	steps, ok := tr["steps"].([]any)
	if !ok || len(steps) == 0 {
		bad("steps: an array of at least one step is required")
	}
	for i, sv := range steps {
		s, ok := sv.(map[string]any)
		where := fmt.Sprintf("steps[%d]", i)
		if !ok {
			bad("%s: not an object", where)
			continue
		}
		only(where, s, "step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content", "tool_calls", "observation", "metrics", "is_copied_context", "extra")
		if id, _ := s["step_id"].(json.Number); id.String() != fmt.Sprint(i+1) {
			bad("%s: step_id %v, want %d (sequential from 1)", where, s["step_id"], i+1)
		}
		if ts := str(where, s, "timestamp", false); ts != "" {
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				bad("%s: timestamp %q is not ISO 8601: %v", where, ts, err)
			}
		}
		src := str(where, s, "source", true)
		if !slices.Contains([]string{"system", "user", "agent"}, src) {
			bad("%s: source %q", where, src)
		}
		str(where, s, "message", true)
		str(where, s, "reasoning_content", false)
		str(where, s, "model_name", false)
		if src != "agent" {
			for _, f := range []string{"model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"} {
				if _, has := s[f]; has {
					bad("%s: %s is only for agent steps (source is %s)", where, f, src)
				}
			}
		}
		if v, has := s["is_copied_context"]; has {
			if _, isBool := v.(bool); !isBool {
				bad("%s: is_copied_context is %T", where, v)
			}
		}
		object(where, s, "extra")
		ids := map[string]bool{}
		if tcs, has := s["tool_calls"]; has {
			list, _ := tcs.([]any)
			for k, cv := range list {
				c, _ := cv.(map[string]any)
				w := fmt.Sprintf("%s.tool_calls[%d]", where, k)
				only(w, c, "tool_call_id", "function_name", "arguments")
				ids[str(w, c, "tool_call_id", true)] = true
				str(w, c, "function_name", true)
				if _, isObj := c["arguments"].(map[string]any); !isObj {
					bad("%s: arguments is %T, want an object", w, c["arguments"])
				}
			}
		}
		if obs := object(where, s, "observation"); obs != nil {
			only(where+".observation", obs, "results")
			rs, isList := obs["results"].([]any)
			if !isList {
				bad("%s.observation: results is required", where)
			}
			for k, rv := range rs {
				r, _ := rv.(map[string]any)
				w := fmt.Sprintf("%s.observation.results[%d]", where, k)
				only(w, r, "source_call_id", "content", "subagent_trajectory_ref")
				if id := str(w, r, "source_call_id", false); id != "" && !ids[id] {
					bad("%s: source_call_id %q is none of its step's tool calls", w, id)
				}
				str(w, r, "content", false)
			}
		}
		if m := object(where, s, "metrics"); m != nil {
			only(where+".metrics", m, "prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids", "completion_token_ids", "logprobs", "extra")
			for _, f := range []string{"prompt_tokens", "completion_tokens", "cached_tokens"} {
				integer(where+".metrics", m, f)
			}
		}
	}
	if fm := object("trajectory", tr, "final_metrics"); fm != nil {
		only("final_metrics", fm, "total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd", "total_steps", "extra")
		for _, f := range []string{"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_steps"} {
			integer("final_metrics", fm, f)
		}
		if n, _ := fm["total_steps"].(json.Number); n.String() != fmt.Sprint(len(steps)) {
			bad("final_metrics.total_steps %v, %d steps (the RFC: a difference must be explained in notes)", fm["total_steps"], len(steps))
		}
	}
	return tr
}

// InspectRules checks an eval log against Inspect's definition (inspect_ai's EvalLog, log format
// version 2, as its pydantic models define it: log/_log.py, model/_chat_message.py,
// model/_model_output.py, event/_model.py, event/_tool.py, event/_base.py): the required fields
// with their types, the discriminated unions (a message's role, an event's kind) with the
// fields each takes, the enumerations (status, stop reasons, tool error types), ISO 8601 times,
// each (id, epoch) once, and a tool message answering a tool call made before it. Inspect's
// models ignore unknown fields; these rules refuse them, so that nothing is where a reader's
// tool would not look.
func InspectRules(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var log map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&log); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	c := &checker{t: t}
	c.only("log", log, "version", "status", "eval", "plan", "results", "stats", "error", "invalidated", "log_updates", "tags", "metadata", "samples", "reductions")
	if v := c.num("log", log, "version", true); v != "2" {
		c.bad("log: version %s, want 2", v)
	}
	c.enum("log", log, "status", true, "started", "success", "cancelled", "error")
	ev := c.obj("log", log, "eval", true)
	c.only("eval", ev, "eval_set_id", "eval_id", "run_id", "created", "task", "task_id", "task_version", "task_file", "task_display_name", "task_registry_name",
		"task_attribs", "task_args", "task_args_passed", "solver", "solver_args", "solver_args_passed", "tags", "dataset", "sandbox", "model", "model_generate_config",
		"model_base_url", "model_args", "model_roles", "config", "revision", "packages", "metadata", "scorers", "metrics")
	c.time("eval", ev, "created", true)
	c.str("eval", ev, "task", true)
	c.str("eval", ev, "model", true)
	c.obj("eval", ev, "config", true)
	ds := c.obj("eval", ev, "dataset", true)
	c.only("eval.dataset", ds, "name", "location", "samples", "sample_ids", "shuffled")
	if plan := c.obj("log", log, "plan", false); plan != nil {
		c.only("plan", plan, "name", "steps", "finish", "config")
		for i, s := range c.list("plan", plan, "steps") {
			st, _ := s.(map[string]any)
			c.only(fmt.Sprintf("plan.steps[%d]", i), st, "solver", "params", "params_passed")
			c.str(fmt.Sprintf("plan.steps[%d]", i), st, "solver", true)
		}
	}
	if res := c.obj("log", log, "results", false); res != nil {
		c.only("results", res, "total_samples", "completed_samples", "early_stopping", "scores", "metadata")
		c.num("results", res, "total_samples", false)
		c.num("results", res, "completed_samples", false)
		for i, s := range c.list("results", res, "scores") {
			sc, _ := s.(map[string]any)
			w := fmt.Sprintf("results.scores[%d]", i)
			c.only(w, sc, "name", "scorer", "reducer", "scored_samples", "unscored_samples", "params", "metrics", "metadata")
			c.str(w, sc, "name", true)
			c.str(w, sc, "scorer", true)
			for k, m := range c.obj(w, sc, "metrics", false) {
				mm, _ := m.(map[string]any)
				c.only(w+".metrics."+k, mm, "name", "value", "params", "metadata")
				c.str(w+".metrics."+k, mm, "name", true)
				c.num(w+".metrics."+k, mm, "value", true)
			}
		}
	}
	if st := c.obj("log", log, "stats", false); st != nil {
		c.only("stats", st, "started_at", "completed_at", "model_usage", "role_usage")
		c.time("stats", st, "started_at", false)
		c.time("stats", st, "completed_at", false)
		for k, u := range c.obj("stats", st, "model_usage", false) {
			c.usage("stats.model_usage."+k, u)
		}
	}
	seen := map[string]bool{}
	for i, sv := range c.list("log", log, "samples") {
		s, _ := sv.(map[string]any)
		w := fmt.Sprintf("samples[%d]", i)
		c.only(w, s, "id", "epoch", "input", "choices", "target", "sandbox", "files", "setup", "messages", "output", "scores", "metadata", "store", "events",
			"timelines", "model_usage", "role_usage", "started_at", "completed_at", "total_time", "working_time", "uuid", "invalidation", "error", "error_retries",
			"attachments", "events_data", "limit")
		switch s["id"].(type) {
		case string, json.Number:
		default:
			c.bad("%s: id is %T, want a string or an integer", w, s["id"])
		}
		epoch := c.num(w, s, "epoch", true)
		if k := fmt.Sprint(s["id"], "/", epoch); seen[k] {
			c.bad("%s: id and epoch %s again", w, k)
		} else {
			seen[k] = true
		}
		for _, f := range []string{"input", "target"} {
			switch s[f].(type) {
			case string, []any:
			default:
				c.bad("%s: %s is %T, want a string or a list", w, f, s[f])
			}
		}
		calls := map[string]bool{}
		for k, mv := range c.list(w, s, "messages") {
			c.message(fmt.Sprintf("%s.messages[%d]", w, k), mv, calls, true)
		}
		if out := c.obj(w, s, "output", false); out != nil {
			c.output(w+".output", out)
		}
		for k, sc := range c.obj(w, s, "scores", false) {
			c.score(w+".scores."+k, sc)
		}
		for k, u := range c.obj(w, s, "model_usage", false) {
			c.usage(w+".model_usage."+k, u)
		}
		c.time(w, s, "started_at", false)
		c.time(w, s, "completed_at", false)
		c.num(w, s, "total_time", false)
		c.num(w, s, "working_time", false)
		if e := c.obj(w, s, "error", false); e != nil {
			c.only(w+".error", e, "message", "traceback", "traceback_ansi")
			for _, f := range []string{"message", "traceback", "traceback_ansi"} {
				c.str(w+".error", e, f, true)
			}
		}
		for k, evv := range c.list(w, s, "events") {
			c.event(fmt.Sprintf("%s.events[%d]", w, k), evv)
		}
	}
	return log
}

type checker struct{ t testing.TB }

func (c *checker) bad(format string, a ...any) { c.t.Helper(); c.t.Errorf("Inspect: "+format, a...) }

func (c *checker) only(where string, o map[string]any, allowed ...string) {
	c.t.Helper()
	for k := range o {
		if !slices.Contains(allowed, k) {
			c.bad("%s: field %q is none of Inspect's", where, k)
		}
	}
}

func (c *checker) str(where string, o map[string]any, k string, required bool) string {
	c.t.Helper()
	v, ok := o[k]
	if !ok || v == nil {
		if required {
			c.bad("%s: %s is required", where, k)
		}
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		c.bad("%s: %s is %T, not a string", where, k, v)
	}
	return s
}

func (c *checker) num(where string, o map[string]any, k string, required bool) string {
	c.t.Helper()
	v, ok := o[k]
	if !ok || v == nil {
		if required {
			c.bad("%s: %s is required", where, k)
		}
		return ""
	}
	n, isNum := v.(json.Number)
	if !isNum {
		c.bad("%s: %s is %T, not a number", where, k, v)
	}
	return n.String()
}

func (c *checker) obj(where string, o map[string]any, k string, required bool) map[string]any {
	c.t.Helper()
	v, ok := o[k]
	if !ok || v == nil {
		if required {
			c.bad("%s: %s is required", where, k)
		}
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		c.bad("%s: %s is %T, not an object", where, k, v)
	}
	return m
}

func (c *checker) list(where string, o map[string]any, k string) []any {
	c.t.Helper()
	v, ok := o[k]
	if !ok || v == nil {
		return nil
	}
	l, isList := v.([]any)
	if !isList {
		c.bad("%s: %s is %T, not a list", where, k, v)
	}
	return l
}

func (c *checker) enum(where string, o map[string]any, k string, required bool, values ...string) {
	c.t.Helper()
	if v := c.str(where, o, k, required); v != "" && !slices.Contains(values, v) {
		c.bad("%s: %s %q is none of %v", where, k, v, values)
	}
}

func (c *checker) time(where string, o map[string]any, k string, required bool) {
	c.t.Helper()
	if v := c.str(where, o, k, required); v != "" {
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			c.bad("%s: %s %q is not an ISO 8601 time: %v", where, k, v, err)
		}
	}
}

func (c *checker) usage(where string, v any) {
	c.t.Helper()
	u, _ := v.(map[string]any)
	c.only(where, u, "input_tokens", "output_tokens", "total_tokens", "input_tokens_cache_write", "input_tokens_cache_read", "reasoning_tokens", "total_cost")
	for k := range u {
		c.num(where, u, k, false)
	}
}

func (c *checker) score(where string, v any) {
	c.t.Helper()
	s, _ := v.(map[string]any)
	c.only(where, s, "value", "answer", "explanation", "metadata", "history")
	if _, ok := s["value"]; !ok {
		c.bad("%s: value is required", where)
	}
	c.str(where, s, "answer", false)
	c.str(where, s, "explanation", false)
}

// message checks a ChatMessage (discriminated by role); calls are the tool call ids made so far.
func (c *checker) message(where string, v any, calls map[string]bool, inSample bool) {
	c.t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		c.bad("%s: not an object", where)
		return
	}
	base := []string{"id", "content", "source", "metadata", "role"}
	role := c.str(where, m, "role", true)
	switch role {
	case "system":
		c.only(where, m, base...)
	case "user":
		c.only(where, m, append(base, "tool_call_id")...)
	case "assistant":
		c.only(where, m, append(base, "tool_calls", "model")...)
		for i, tv := range c.list(where, m, "tool_calls") {
			tc, _ := tv.(map[string]any)
			w := fmt.Sprintf("%s.tool_calls[%d]", where, i)
			c.only(w, tc, "id", "function", "arguments", "parse_error", "view", "type")
			calls[c.str(w, tc, "id", true)] = true
			c.str(w, tc, "function", true)
			c.obj(w, tc, "arguments", true)
		}
	case "tool":
		c.only(where, m, append(base, "tool_call_id", "function", "error")...)
		if id := c.str(where, m, "tool_call_id", false); id != "" && inSample && !calls[id] {
			c.bad("%s: tool_call_id %q answers no tool call before it", where, id)
		}
		if e := c.obj(where, m, "error", false); e != nil {
			c.only(where+".error", e, "type", "message")
			c.enum(where+".error", e, "type", true, "parsing", "timeout", "unicode_decode", "permission", "file_not_found", "is_a_directory", "limit", "approval", "unknown", "output_limit")
		}
	default:
		c.bad("%s: role %q is none of system, user, assistant, tool", where, role)
	}
	c.enum(where, m, "source", false, "input", "generate")
	switch ct := m["content"].(type) {
	case string:
	case []any:
		for i, pv := range ct {
			p, _ := pv.(map[string]any)
			w := fmt.Sprintf("%s.content[%d]", where, i)
			switch c.str(w, p, "type", true) {
			case "text":
				c.only(w, p, "type", "text", "refusal", "citations", "internal")
				c.str(w, p, "text", true)
			case "reasoning":
				c.only(w, p, "type", "reasoning", "summary", "signature", "redacted", "internal")
				c.str(w, p, "reasoning", true)
			default:
				c.bad("%s: content type %v is not one this export writes", w, p["type"])
			}
		}
	default:
		c.bad("%s: content is %T, want a string or a list", where, m["content"])
	}
}

func (c *checker) output(where string, o map[string]any) {
	c.t.Helper()
	c.only(where, o, "model", "choices", "completion", "usage", "time", "metadata", "error")
	c.str(where, o, "model", false)
	c.str(where, o, "completion", false)
	for i, chv := range c.list(where, o, "choices") {
		ch, _ := chv.(map[string]any)
		w := fmt.Sprintf("%s.choices[%d]", where, i)
		c.only(w, ch, "message", "stop_reason", "logprobs")
		c.enum(w, ch, "stop_reason", false, "stop", "max_tokens", "model_length", "tool_calls", "content_filter", "unknown")
		msg := c.obj(w, ch, "message", true)
		if msg != nil && msg["role"] != "assistant" {
			c.bad("%s: message role %v, want assistant", w, msg["role"])
		}
		c.message(w+".message", msg, map[string]bool{}, false)
	}
	if u, ok := o["usage"]; ok && u != nil {
		c.usage(where+".usage", u)
	}
	c.num(where, o, "time", false)
}

// event checks an event (discriminated by its kind) and the fields every event has.
func (c *checker) event(where string, v any) {
	c.t.Helper()
	e, ok := v.(map[string]any)
	if !ok {
		c.bad("%s: not an object", where)
		return
	}
	base := []string{"event", "uuid", "span_id", "timestamp", "working_start", "metadata", "pending"}
	c.time(where, e, "timestamp", true)
	c.num(where, e, "working_start", true)
	switch kind := c.str(where, e, "event", true); kind {
	case "model":
		c.only(where, e, append(base, "model", "role", "input", "input_refs", "tools", "tool_choice", "config", "output", "retries", "error", "traceback", "traceback_ansi", "cache", "call", "completed", "working_time")...)
		c.str(where, e, "model", true)
		for i, m := range c.list(where, e, "input") {
			c.message(fmt.Sprintf("%s.input[%d]", where, i), m, map[string]bool{}, false)
		}
		for i, tv := range c.list(where, e, "tools") {
			ti, _ := tv.(map[string]any)
			c.only(fmt.Sprintf("%s.tools[%d]", where, i), ti, "name", "description", "parameters", "options")
			c.str(fmt.Sprintf("%s.tools[%d]", where, i), ti, "name", true)
		}
		if _, ok := e["tools"]; !ok {
			c.bad("%s: tools is required", where)
		}
		switch tc := e["tool_choice"].(type) {
		case string:
			if !slices.Contains([]string{"auto", "any", "none"}, tc) {
				c.bad("%s: tool_choice %q", where, tc)
			}
		case map[string]any:
		default:
			c.bad("%s: tool_choice is required", where)
		}
		c.obj(where, e, "config", true)
		if out := c.obj(where, e, "output", true); out != nil {
			c.output(where+".output", out)
		}
		c.time(where, e, "completed", false)
	case "tool":
		c.only(where, e, append(base, "type", "id", "function", "arguments", "view", "result", "truncated", "error", "events", "completed", "working_time", "agent", "agent_span_id", "failed", "message_id")...)
		c.str(where, e, "id", true)
		c.str(where, e, "function", true)
		c.obj(where, e, "arguments", true)
		if er := c.obj(where, e, "error", false); er != nil {
			c.enum(where+".error", er, "type", true, "parsing", "timeout", "unicode_decode", "permission", "file_not_found", "is_a_directory", "limit", "approval", "unknown", "output_limit")
		}
		c.time(where, e, "completed", false)
	case "score":
		c.only(where, e, append(base, "score", "target", "intermediate", "model_usage", "role_usage")...)
		c.score(where+".score", c.obj(where, e, "score", true))
	case "info":
		c.only(where, e, append(base, "source", "data")...)
		if _, ok := e["data"]; !ok {
			c.bad("%s: data is required", where)
		}
	default:
		c.bad("%s: event %q is not one this export writes (model, tool, score, info)", where, kind)
	}
}
