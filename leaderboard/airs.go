package leaderboard

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/outcome"
)

// SuiteAIRS is the --suite of AIRS task runs.
const SuiteAIRS = "airs"

// AIRSFormat is the version of the AIRS board's JSON output (leaderboard/FORMAT.md).
const AIRSFormat = "sealrun-airs-leaderboard/v1"

// AIRSFormats are the AIRS board's output formats.
var AIRSFormats = []string{"text", "markdown", "json"}

// AIRSBoard is the AIRS-Bench suite's board: every agent over every task, from verified
// sealed-task-run attestations only.
type AIRSBoard struct {
	Format    string      `json:"format"`
	Transform string      `json:"transform"`
	Bootstrap int         `json:"bootstrap_samples"`
	EloRounds int         `json:"elo_bootstrap_rounds"`
	Games     int         `json:"elo_games"`
	Seed      uint64      `json:"bootstrap_seed"`
	Tasks     []AIRSTask  `json:"tasks"`
	Agents    []AIRSAgent `json:"agents"` // by mean normalized score, best first; the SOTA player last
	Invalid   []AIRSRun   `json:"invalid_runs"`
	// Amended are the runs counted whose amendments label them legacy or note them (an
	// invalidated run is among Invalid).
	Amended  []AIRSRun   `json:"amended_runs"`
	Rejected []Rejection `json:"rejected"`
	Skipped  []Rejection `json:"skipped"`
	Keys     []KeyInfo   `json:"keys"`
	Rules    []string    `json:"rules"`
}

// AIRSTask is one task of the suite and its normalization.
type AIRSTask struct {
	Name          string   `json:"name"`
	SHA256        string   `json:"sha256"`
	Metric        string   `json:"metric"`
	LowerIsBetter bool     `json:"metric_lower_is_better"`
	SOTA          float64  `json:"sota_score"`
	Optimal       float64  `json:"optimal_score"`
	Min           *float64 `json:"s_min"`        // null: no valid run
	MinSource     string   `json:"s_min_source"` // "worst observed" or "no valid run"
}

// AIRSAgent is one agent's row: overall and per task.
type AIRSAgent struct {
	Name     string              `json:"name"`
	SOTA     bool                `json:"sota_player,omitempty"`
	Tasks    int                 `json:"tasks"`
	Runs     int                 `json:"runs"`
	Seeds    int                 `json:"seeds"` // per task in the aggregates: the fewest it has on any task
	MeanNS   float64             `json:"mean_normalized_score"`
	MeanNSCI [2]float64          `json:"mean_normalized_score_ci95"`
	IQMNS    float64             `json:"iqm_normalized_score"`
	IQMNSCI  [2]float64          `json:"iqm_normalized_score_ci95"`
	MedNS    float64             `json:"median_normalized_score"`
	MedNSCI  [2]float64          `json:"median_normalized_score_ci95"`
	VSR      float64             `json:"valid_submission_rate"`
	VSRCI    [2]float64          `json:"valid_submission_rate_ci95"`
	Elo      float64             `json:"elo"`
	EloCI    [2]float64          `json:"elo_ci95"`
	EloFit   float64             `json:"elo_fit_all_games"`
	EloRank  int                 `json:"elo_rank"`
	NSRank   int                 `json:"normalized_score_rank"`
	PerTask  map[string]AIRSCell `json:"per_task"`
}

// AIRSCell is one agent on one task.
type AIRSCell struct {
	Runs    int      `json:"runs"`
	Valid   int      `json:"valid"`
	MeanNS  float64  `json:"mean_normalized_score"`
	MeanRaw *float64 `json:"mean_metric"` // over its valid submissions; null without one
}

// AIRSRun is a run left out of the scores (invalid: the infrastructure's fault).
type AIRSRun struct {
	ID      string `json:"id"`
	Agent   string `json:"agent"`
	Task    string `json:"task"`
	Reason  string `json:"reason"`
	RerunOf string `json:"rerun_of,omitempty"`
	Path    string `json:"path"`
	// Amendments are the run's amendments that apply (sealrun amend; leaderboard/FORMAT.md, rule 12).
	Amendments []RunAmendment `json:"amendments,omitempty"`
}

// AIRSRules are the rules BuildAIRS applies (the AIRS-Bench paper, Eq. 1–5) with the default
// transform, printed in every output's footer.
var AIRSRules = airsRules(airs.MarchOf9s)

// airsRules are the rules with the normalized score's rule for the transform tr.
func airsRules(tr airs.Transform) []string {
	return []string{
		"Only sealed-task-run attestations that verified with a trusted key count; exam runs are skipped (their board is the default suite).",
		"A task is its directory's hash: two versions of a task are two tasks.",
		nsRule[tr],
		"s_min is the worst valid score observed on the task across every agent and seed (the published notebook's rule; estimated_worst_score is not used); the optimum is 1 when higher is better and 0 when lower is.",
		"A run without a valid submission (no promoted submission, or one evaluate.py gives no number for) counts 0; invalid runs (the infrastructure's fault) are left out and listed.",
		"Aggregates (rliable's, as the notebook): mean = the mean over tasks of each task's mean NS; IQM = the interquartile mean of every (seed, task) NS; each agent's seeds are cut to the fewest it has on any of its tasks.",
		"Valid submission rate: the share of an agent's runs with a valid submission, averaged over its tasks (Eq. 1).",
		"Elo: every run against every run of each other player on each task, on raw scores (an invalid run loses to any valid one, two invalid ones tie, scores within numpy's isclose(atol=1e-6) tie), the SOTA a player with 10 runs scoring the SOTA; Bradley–Terry fitted with no prior, P(a beats b) = 1/(1 + 10^((R_b − R_a)/400)), ratings centred on 1000. ELO is the median of 100 bootstrap rounds over the games, its interval their 2.5% and 97.5% quantiles.",
		"95% intervals of the NS and valid rate: percentiles 2.5 and 97.5 of 50,000 resamples that draw each task's seeds with replacement, task by task (rliable's stratified bootstrap), from a fixed seed.",
	}
}

// nsRule is the normalized score's rule for each transform (AIRSRules has the default's).
var nsRule = map[airs.Transform]string{
	airs.MarchOf9s: "Normalized score NS = (φ(s) − φ(s_min)) / (φ(s_sota) − φ(s_min)), φ(s) = −log10(|s − s_opt|) (the march of 9s), clipped below at 0; a run at the optimum takes |0.999 − s_opt| (φ = 3 when the optimum is 1); 0/0 counts 0 and a division by zero 100, as the notebook's normalized_score_log.",
	airs.Identity:  "Normalized score NS = (s − s_min) / (s_sota − s_min) (the identity transform, --transform identity, the notebook's normalized_score), clipped below at 0; 0/0 counts 0 and a division by zero 100.",
}

// BuildAIRS builds the AIRS board from the task runs among the verified entries.
func BuildAIRS(in *Inputs, keys []Key, o airs.Options) (*AIRSBoard, error) {
	b := &AIRSBoard{Format: AIRSFormat, Rejected: orEmpty(in.Rejected), Skipped: orEmpty(in.Skipped), Invalid: []AIRSRun{}, Amended: []AIRSRun{}, Rules: AIRSRules}
	for _, k := range keys {
		b.Keys = append(b.Keys, KeyInfo{k.Name, k.KeyID})
	}
	var amends map[string][]RunAmendment
	if len(in.Amendments) > 0 {
		var rejected, skipped []Rejection
		amends, rejected, skipped = Amendments(in)
		b.Rejected, b.Skipped = append(b.Rejected, rejected...), append(b.Skipped, skipped...)
	}
	tasks, names, runs := b.collect(in, amends)
	// Tasks are keyed by hash; they are shown by name, with the hash where two share a name.
	display := map[string]string{}
	for name, hashes := range names {
		for _, h := range hashes {
			display[h] = name
			if len(hashes) > 1 {
				display[h] = fmt.Sprintf("%s (%s)", name, h[:12])
			}
		}
	}
	var scorings []airs.Scoring
	for h, ti := range tasks {
		scorings = append(scorings, airs.Scoring{Name: h, LowerIsBetter: ti.LowerIsBetter, SOTA: ti.SOTA})
	}
	sort.Slice(scorings, func(i, j int) bool { return display[scorings[i].Name] < display[scorings[j].Name] })
	if len(runs) == 0 {
		b.Agents, b.Tasks = []AIRSAgent{}, []AIRSTask{}
		return b, nil
	}
	sum, err := airs.Summarize(scorings, runs, o)
	if err != nil {
		return nil, err
	}
	b.fill(sum, scorings, tasks, display)
	if len(in.Amendments) > 0 {
		b.Rules = append(b.Rules, AmendRule)
	}
	return b, nil
}

// Render writes the AIRS board in format (AIRSFormats).
func (b *AIRSBoard) Render(w io.Writer, format string) error {
	switch format {
	case "text", "markdown":
		return b.text(w, format == "markdown")
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	}
	return opt.New("leaderboard.AIRS", "Format", fmt.Sprintf("%q is not a format of the AIRS suite's board; use one of %s", format, strings.Join(AIRSFormats, ", ")))
}

// collect sorts the verified entries: exam runs skipped, invalid task runs (and those an
// amendment invalidates) listed, the others as runs to score, those amended listed too; tasks by
// hash, and the hashes of each task name.
func (b *AIRSBoard) collect(in *Inputs, amends map[string][]RunAmendment) (tasks map[string]*attest.TaskInfo, names map[string][]string, runs []airs.Run) {
	tasks = map[string]*attest.TaskInfo{}
	names = map[string][]string{} // task name -> hashes
	for _, e := range in.Entries {
		p := e.Predicate
		if p.Task == nil {
			b.Skipped = append(b.Skipped, Rejection{e.Path, "an exam run, not an AIRS task run: its board is the default suite"})
			continue
		}
		if _, ok := tasks[string(p.Task.SHA256)]; !ok {
			tasks[string(p.Task.SHA256)] = p.Task
			names[p.Task.Name] = append(names[p.Task.Name], string(p.Task.SHA256))
		}
		agent := Agent{Scaffold: p.Scaffold.Name, ScaffoldVersion: p.Scaffold.Version, Model: p.Agent.Model, Effort: p.Agent.ReasoningEffort}.Name()
		as := amends[p.Run.ID]
		invalidated, _ := amendedStatus(as)
		if p.Result.Status == outcome.Invalid || invalidated != nil {
			reason := p.Result.Reason
			if invalidated != nil {
				reason = "invalidated by amendment: " + invalidated.Reason
			}
			b.Invalid = append(b.Invalid, AIRSRun{ID: p.Run.ID, Agent: agent, Task: p.Task.Name, Reason: reason, RerunOf: p.Run.RerunOf, Path: e.Path, Amendments: as})
			continue
		}
		if len(as) > 0 {
			b.Amended = append(b.Amended, AIRSRun{ID: p.Run.ID, Agent: agent, Task: p.Task.Name, RerunOf: p.Run.RerunOf, Path: e.Path, Amendments: as})
		}
		r := airs.Run{Agent: agent, Task: string(p.Task.SHA256), ID: p.Run.ID, Valid: p.Result.ValidSubmission && p.Result.Value != nil}
		if r.Valid {
			r.Score = *p.Result.Value
		}
		runs = append(runs, r)
	}
	return tasks, names, runs
}

// fill writes the summary's tasks and agents into the board, tasks shown by their display names.
func (b *AIRSBoard) fill(sum *airs.Summary, scorings []airs.Scoring, tasks map[string]*attest.TaskInfo, display map[string]string) {
	b.Transform, b.Bootstrap, b.Seed, b.EloRounds, b.Games = string(sum.Transform), sum.Bootstrap, sum.Seed, sum.EloRounds, sum.Games
	b.Rules = airsRules(sum.Transform)
	for _, sc := range scorings {
		ti, bd := tasks[sc.Name], sum.Bounds[sc.Name]
		t := AIRSTask{Name: display[sc.Name], SHA256: sc.Name, Metric: ti.Metric, LowerIsBetter: ti.LowerIsBetter, SOTA: ti.SOTA, Optimal: bd.Optimal, MinSource: bd.MinSource}
		if !math.IsNaN(bd.Min) {
			m := bd.Min
			t.Min = &m
		}
		b.Tasks = append(b.Tasks, t)
	}
	for _, a := range sum.Agents {
		row := AIRSAgent{Name: a.Name, SOTA: a.IsSOTA, Tasks: a.Tasks, Runs: a.Runs, Seeds: a.Seeds, MeanNS: a.MeanNS, MeanNSCI: a.MeanNSCI,
			IQMNS: a.IQMNS, IQMNSCI: a.IQMNSCI, MedNS: a.MedianNS, MedNSCI: a.MedianNSCI, VSR: a.VSR, VSRCI: a.VSRCI,
			Elo: a.Elo, EloCI: a.EloCI, EloFit: a.EloFit, EloRank: a.EloRank, NSRank: a.NSRank, PerTask: map[string]AIRSCell{}}
		for h, c := range a.PerTask {
			cell := AIRSCell{Runs: c.Runs, Valid: c.Valid, MeanNS: c.MeanNS}
			if !math.IsNaN(c.MeanRaw) {
				v := c.MeanRaw
				cell.MeanRaw = &v
			}
			row.PerTask[display[h]] = cell
		}
		b.Agents = append(b.Agents, row)
	}
}

func ci(v [2]float64, prec int) string {
	return fmt.Sprintf("[%.*f, %.*f]", prec, v[0], prec, v[1])
}

// text writes the AIRS board as plain text or Markdown (md): the agents, then each task, the
// rejected inputs and the rules. It is long because it is the board's sections in the order
// printed.
func (b *AIRSBoard) text(w io.Writer, md bool) error {
	ew := &errWriter{w: w}
	head := func(s string) {
		if md {
			ew.printf("## %s\n\n", s)
		} else {
			ew.printf("%s\n", s)
		}
	}
	runs := 0
	for _, a := range b.Agents {
		if !a.SOTA {
			runs += a.Runs
		}
	}
	head(fmt.Sprintf("AIRS-Bench suite: %d task(s), %d agent(s), %d counted run(s), %d invalid", len(b.Tasks), max(0, len(b.Agents)-1), runs, len(b.Invalid)))
	if len(b.Agents) == 0 {
		ew.printf("no AIRS task runs among the verified attestations\n")
	} else {
		ew.printf("normalized score: %s; 95%% intervals from %d stratified resamples, Elo from %d bootstrap rounds of %d games (seed %d)\n\n", b.Transform, b.Bootstrap, b.EloRounds, b.Games, b.Seed)
		rows := [][]string{{"NS RANK", "AGENT", "TASKS", "RUNS", "SEEDS", "MEAN NS", "95% CI", "IQM NS", "95% CI", "VALID RATE", "95% CI", "ELO", "95% CI", "ELO RANK"}}
		for _, a := range b.Agents {
			rank, runs, seeds, vsr, vsrci := fmt.Sprint(a.NSRank), fmt.Sprint(a.Runs), fmt.Sprint(a.Seeds), fmt.Sprintf("%.2f", a.VSR), ci(a.VSRCI, 2)
			mean, meanci, iqm, iqmci := fmt.Sprintf("%.3f", a.MeanNS), ci(a.MeanNSCI, 3), fmt.Sprintf("%.3f", a.IQMNS), ci(a.IQMNSCI, 3)
			if a.SOTA {
				rank, runs, seeds, vsr, vsrci, mean, meanci, iqm, iqmci = "-", "-", "-", "-", "-", "1 (by definition)", "-", "-", "-"
			}
			rows = append(rows, []string{rank, a.Name, fmt.Sprint(a.Tasks), runs, seeds, mean, meanci, iqm, iqmci, vsr, vsrci, fmt.Sprintf("%.0f", a.Elo), ci(a.EloCI, 0), fmt.Sprint(a.EloRank)})
		}
		b.table(ew, rows, md)
		for _, t := range b.Tasks {
			dir := "higher is better"
			if t.LowerIsBetter {
				dir = "lower is better"
			}
			ew.printf("\n")
			smin := "none"
			if t.Min != nil {
				smin = fmt.Sprintf("%g", *t.Min)
			}
			head(fmt.Sprintf("Task %s: %s, %s; SOTA %g, optimum %g, s_min %s (%s)", t.Name, t.Metric, dir, t.SOTA, t.Optimal, smin, t.MinSource))
			rows := [][]string{{"AGENT", "RUNS", "VALID", "MEAN NS", "MEAN " + strings.ToUpper(t.Metric)}}
			for _, a := range b.Agents {
				c, ok := a.PerTask[t.Name]
				if !ok || a.SOTA {
					continue
				}
				raw := "—"
				if c.MeanRaw != nil {
					raw = fmt.Sprintf("%.4g", *c.MeanRaw)
				}
				rows = append(rows, []string{a.Name, fmt.Sprint(c.Runs), fmt.Sprint(c.Valid), fmt.Sprintf("%.3f", c.MeanNS), raw})
			}
			b.table(ew, rows, md)
		}
	}
	if len(b.Invalid) > 0 {
		ew.printf("\n")
		head("Invalid runs (left out; the infrastructure's fault)")
		for _, r := range b.Invalid {
			ew.printf("  %s  %s  %s: %s\n", r.ID, r.Agent, r.Task, r.Reason)
		}
	}
	if len(b.Amended) > 0 {
		ew.printf("\n")
		head("Amended runs (counted; sealrun amend)")
		for _, r := range b.Amended {
			for _, a := range r.Amendments {
				ew.printf("  %s  %s  %s: %s\n", r.ID, r.Agent, r.Task, a.Text())
			}
		}
	}
	if len(b.Rejected) > 0 {
		ew.printf("\n")
		head(fmt.Sprintf("Rejected (%d): contribute nothing", len(b.Rejected)))
		for _, r := range b.Rejected {
			ew.printf("  %s: %s\n", r.Path, r.Reason)
		}
	}
	if len(b.Skipped) > 0 {
		ew.printf("\n%d file(s) skipped (not AIRS task attestations)\n", len(b.Skipped))
	}
	ew.printf("\n")
	head("Rules")
	for _, r := range b.Rules {
		ew.printf("- %s\n", r)
	}
	return ew.err
}

func (b *AIRSBoard) table(ew *errWriter, rows [][]string, md bool) {
	if !md {
		writeAligned(ew, rows)
		return
	}
	for i, r := range rows {
		ew.printf("| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			ew.printf("|%s\n", strings.Repeat("---|", len(r)))
		}
	}
}
