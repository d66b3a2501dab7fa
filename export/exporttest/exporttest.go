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

