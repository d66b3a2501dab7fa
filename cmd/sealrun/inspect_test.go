package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

// schemaLeaves are the paths of every field a predicate JSON Schema allows: objects by key,
// lists of objects as path[0], lists of values and $refs to definitions as leaves.
func schemaLeaves(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		if props, ok := s["properties"].(map[string]any); ok {
			for k, v := range props {
				p := k
				if path != "" {
					p = path + "." + k
				}
				walk(p, v.(map[string]any))
			}
			return
		}
		if items, ok := s["items"].(map[string]any); ok && s["type"] == "array" {
			if _, obj := items["properties"]; obj {
				walk(path+"[0]", items)
				return
			}
		}
		out = append(out, path)
	}
	walk("", schema)
	slices.Sort(out)
	return out
}

// A predicate with every field the schemas allow, optional ones included.
func fullPredicate(t *testing.T, task bool) *attest.Statement {
	t.Helper()
	pred, _ := goldenPredicate(t)
	var p attest.Predicate
	if err := json.Unmarshal(pred, &p); err != nil {
		t.Fatal(err)
	}
	p.Run.RerunOf = "r-earlier"
	p.Host.Runtimes = map[string]string{"controller": "runc version 1.1.5", "runner": "crun version 1.8.1", "grader": "runsc version release-20260905.0"}
	p.Build = &attest.Build{Version: "v1", Commit: "abc", Modified: true, GoVersion: "go1.26", DaemonSHA256: "ab", TestSeams: true, SeamsUsed: []string{"hold"}, Toolchain: "cc,glibc", Helpers: map[string]string{"runner": "a", "runner-exec": "b", "sealrun-netns-hook": "c", "sealrun-hook-relay": "d"}}
	p.Ledger = &ledger.Ref{Origin: "o", Index: 1, Entry: "{}", Checkpoint: "c", Inclusion: []string{"aa"}}
	p.Budget.MaxTokens, p.Budget.MaxCost, p.Budget.Pauses = 1000, "2 USD", "10m0s"
	p.Timeline.Pauses = []attest.Pause{{Start: p.Timeline.Started.Add(time.Minute), End: p.Timeline.Started.Add(2 * time.Minute), By: "root", Reason: "fire alarm"}}
	p.Timeline.Deadline, p.Timeline.Finished = p.Timeline.Deadline.Add(time.Minute), p.Timeline.Finished.Add(time.Minute)
	price := policy.Price{Currency: "USD", Input: 1, CachedInput: 0.1, CacheWrite: 1.25, Output: 4, Taken: "2026-11-20", Source: "s"}
	p.Usage = &attest.Usage{Requests: 3, Tokens: policy.Tokens{Input: 10, CachedInput: 2, CacheWrite: 1, Output: 5, Reasoning: 1}}
	p.Usage.Cost = &attest.Cost{Amount: price.Cost(p.Usage.Tokens), Price: price}
	p.Human = &attest.Human{Person: attest.Person{Account: "bob", Key: "SHA256:k"}, Proctors: []string{"carol"}, AttachesOmitted: 1,
		Attaches: []attest.HumanAttach{{Account: "root (uid 0)", Key: "SHA256:k", Role: "operator", Takeover: "fire drill", Start: p.Timeline.Started, End: p.Timeline.Started}}}
	p.TPM = &attest.TPMInfo{AttestationKey: "ab", PCRs: []int{0, 23}, SealrundPCR: 23, None: "every field, to be printed"}
	if task {
		worst := 0.1
		value := 0.9
		p.Exam, p.Kit = attest.ExamInfo{}, attest.KitInfo{}
		p.Task = &attest.TaskInfo{Kind: "airs", Name: "T", SHA256: "aa", DataSHA256: "bb", Metric: "Accuracy", LowerIsBetter: true, SOTA: 1, Optimal: 1, Worst: &worst}
		p.Result = attest.Result{Status: "graded", Value: &value, ValidSubmission: true, Invalid: "x"}
	}
	return attest.NewStatement(&p)
}

// inspect prints every field of the predicate: each field of attest/predicate.schema.json and
// attest/task-predicate.schema.json is a line of its output.
func TestInspectPrintsEveryField(t *testing.T) {
	index := regexp.MustCompile(`\[[0-9]+\]`)
	for _, tc := range []struct {
		schema string
		task   bool
	}{{"../../attest/predicate.schema.json", false}, {"../../attest/task-predicate.schema.json", true}} {
		st := fullPredicate(t, tc.task)
		payload, err := st.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		printed := map[string]bool{}
		for _, f := range predicateFields(payload) {
			printed[index.ReplaceAllString(f[0], "[0]")] = true
		}
		for _, leaf := range schemaLeaves(t, tc.schema) {
			if !printed[leaf] {
				t.Errorf("%s: inspect does not print %s", tc.schema, leaf)
			}
		}
	}
}

// The CLI reference in docs/cli is what the commands say of themselves (make docs writes it):
// a flag or a help text changed without it fails here.
func TestCLIReferenceIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if r := sealrun(t, "docs", "--markdown", dir); r.code != 0 {
		t.Fatalf("sealrun docs: %+v", r)
	}
	fresh, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	checked, _ := filepath.Glob("../../docs/cli/*.md")
	names := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(names(fresh), names(checked)) {
		t.Fatalf("docs/cli has pages %v; the commands give %v: run make docs", names(checked), names(fresh))
	}
	for _, p := range fresh {
		want, _ := os.ReadFile(p)
		got, _ := os.ReadFile(filepath.Join("../../docs/cli", filepath.Base(p)))
		if string(got) != string(want) {
			t.Errorf("docs/cli/%s differs from what the commands say: run make docs", filepath.Base(p))
		}
	}
}
