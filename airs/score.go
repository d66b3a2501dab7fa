package airs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"

	"github.com/sealrun/sealrun/stats"
)

// The scores follow the published analysis: the paper's section 5.2 and, where the paper is
// silent, upstream's notebooks/create_summary_plots.ipynb. SCORING.md walks through each rule
// with a worked example and names what differs.

// Transform is φ of the normalized score (the paper's Eq. 2).
type Transform string

const (
	// MarchOf9s is φ(s) = −log10(|s − s_opt|) (Eq. 3): closing the gap from 0.99 to 0.999 counts
	// as much as from 0.9 to 0.99. The notebook's normalized_score_log.
	MarchOf9s Transform = "march-of-9s"
	// Identity is φ(s) = s (Eq. 8): linear progress from the worst score to the SOTA. The
	// notebook's normalized_score.
	Identity Transform = "identity"
)

// AtOptimum is what the notebook puts for |s − s_opt| when a score is exactly the optimum
// (where −log10 of 0 is +∞): |0.999 − s_opt|, so φ = 3 for a metric whose optimum is 1 and
// φ = −log10(0.999) ≈ 0.000435 for one whose optimum is 0.
const AtOptimum = 0.999

// InfiniteNS is what a normalized score that divides by zero becomes (the notebook replaces
// ±∞ by 100).
const InfiniteNS = 100

// Phi is the transform of a run's raw score s for a task whose optimum is opt (a score at the
// optimum is taken as AtOptimum).
func Phi(tr Transform, s, opt float64) float64 {
	if tr == Identity {
		return s
	}
	d := math.Abs(s - opt)
	if d == 0 {
		d = math.Abs(AtOptimum - opt)
	}
	return -math.Log10(d)
}

// phiBound is the transform of s_min or the SOTA: the notebook takes no AtOptimum for them, so
// one at the optimum is +∞ (and the normalized score NaN or 0).
func phiBound(tr Transform, s, opt float64) float64 {
	if tr == Identity {
		return s
	}
	return -math.Log10(math.Abs(s - opt))
}

// Scoring is what scoring needs of a task.
type Scoring struct {
	Name          string
	LowerIsBetter bool
	SOTA          float64 // the first entry of logging_info.sota
}

// ScoringOf takes a parsed task's numbers.
func ScoringOf(m *Metadata) Scoring {
	return Scoring{Name: m.Info.Name, LowerIsBetter: m.MetricLowerIsBetter, SOTA: m.Info.SOTA.Score}
}

// Run is one run of an agent on a task. Valid is false for a run that produced no number (an
// invalid submission, or a failed run with none): it scores 0 normalized, as the paper counts it.
type Run struct {
	Agent string
	Task  string
	ID    string
	Valid bool
	Score float64 // the raw metric, when Valid
}

// Where s_min came from.
const (
	MinFromRuns = "worst observed"
	MinNone     = "no valid run"
)

// Bounds are one task's normalization: s_min (the worst valid score of any agent), the SOTA and
// the optimum (the direction's: 1 when higher is better, 0 when lower is, as the notebook
// takes it).
type Bounds struct {
	Min, SOTA, Optimal float64
	MinSource          string
}

// TaskBounds picks s_min for a task as the notebook does: the worst valid score observed across
// every agent and seed (the SOTA is not a run). With no valid run it is NaN, and every run of
// the task scores 0.
func TaskBounds(t Scoring, runs []Run) Bounds {
	b := Bounds{Min: math.NaN(), SOTA: t.SOTA, Optimal: DirectionOptimum(t.LowerIsBetter), MinSource: MinNone}
	for _, r := range runs {
		if r.Task != t.Name || !r.Valid {
			continue
		}
		if b.MinSource == MinNone || (t.LowerIsBetter && r.Score > b.Min) || (!t.LowerIsBetter && r.Score < b.Min) {
			b.Min, b.MinSource = r.Score, MinFromRuns
		}
	}
	return b
}

// Normalized is a valid raw score's normalized score (Eq. 2) as the notebook computes it:
// (φ(s) − φ(s_min)) / (φ(s_sota) − φ(s_min)); NaN (0/0, or s_min at the optimum) is 0, ±∞ is
// InfiniteNS, and the result is clipped below at 0.
func Normalized(tr Transform, s float64, b Bounds) float64 {
	lo, hi := phiBound(tr, b.Min, b.Optimal), phiBound(tr, b.SOTA, b.Optimal)
	v := (Phi(tr, s, b.Optimal) - lo) / (hi - lo)
	switch {
	case math.IsNaN(v):
		return 0
	case math.IsInf(v, 0):
		return InfiniteNS
	}
	return math.Max(0, v)
}

// SOTAPlayer is the name of the SOTA in Elo tables.
const SOTAPlayer = "SOTA"

// SOTASeeds is how many runs the SOTA player has on each task, each scoring the SOTA (the
// notebook's ten copies).
const SOTASeeds = 10

// Options configure Summarize.
type Options struct {
	Transform Transform // default MarchOf9s
	// Bootstrap is the number of resamples for the normalized score's and valid rate's
	// intervals (default 50000, the notebook's reps).
	Bootstrap int
	// EloRounds is the number of bootstrap rounds of the Elo ratings (default 100, the
	// notebook's BOOTSTRAP_ROUNDS).
	EloRounds int
	Seed      uint64 // the bootstraps' seed (default 1): the same input gives the same table
}

func (o *Options) defaults() {
	if o.Transform == "" {
		o.Transform = MarchOf9s
	}
	if o.Bootstrap <= 0 {
		o.Bootstrap = 50000
	}
	if o.EloRounds <= 0 {
		o.EloRounds = 100
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Cell is one agent on one task.
type Cell struct {
	Runs, Valid int
	MeanNS      float64 // failed and invalid runs count 0
	MeanRaw     float64 // over the valid runs; NaN without one
}

// Agent is one agent's summary.
type Agent struct {
	Name  string
	Tasks int
	Runs  int
	// Seeds is how many seeds per task the aggregates use: the fewest the agent has on any of
	// its tasks (the notebook's score matrix drops the rows a task lacks).
	Seeds int
	// The normalized score aggregates (rliable's): the mean over tasks of the task's mean, the
	// interquartile mean of every (seed, task) score, the median over tasks of the task's mean;
	// each with a 95% percentile interval from a bootstrap stratified by task.
	MeanNS, IQMNS, MedianNS       float64
	MeanNSCI, IQMNSCI, MedianNSCI [2]float64
	VSR                           float64 // mean valid submission rate (Eq. 1)
	VSRCI                         [2]float64
	// Elo is the median of the bootstrap rounds' ratings, EloCI their 2.5% and 97.5% quantiles
	// (the notebook's rating, lower, upper); EloFit is the fit to all games.
	Elo     float64
	EloCI   [2]float64
	EloFit  float64
	PerTask map[string]Cell
	IsSOTA  bool
	EloRank int
	NSRank  int
}

// Summary is the suite's table.
type Summary struct {
	Transform Transform
	Bootstrap int
	EloRounds int
	Seed      uint64
	Tasks     []Scoring
	Bounds    map[string]Bounds
	Games     int     // Elo games, counted once each (the notebook's battles before doubling)
	Agents    []Agent // by mean normalized score, best first; the SOTA player last
}

// Summarize computes every agent's normalized score aggregates, valid submission rate and Elo
// rating with their intervals. Runs keep their order within an agent and task (that order
// numbers the seeds). Runs of a task not in tasks are an error.
func Summarize(tasks []Scoring, runs []Run, o Options) (*Summary, error) {
	o.defaults()
	if o.Transform != MarchOf9s && o.Transform != Identity {
		return nil, fmt.Errorf("transform %q: use %s or %s", o.Transform, MarchOf9s, Identity)
	}
	s := &Summary{Transform: o.Transform, Bootstrap: o.Bootstrap, EloRounds: o.EloRounds, Seed: o.Seed, Tasks: tasks, Bounds: map[string]Bounds{}}
	names, cells, err := s.group(runs)
	if err != nil {
		return nil, err
	}
	s.Agents = make([]Agent, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	for a, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			// Each agent's resamples have their own stream, so the table does not depend on
			// how the agents are scheduled.
			rng := rand.New(rand.NewPCG(o.Seed, uint64(a)+1))
			s.Agents[a] = summarizeAgent(name, tasks, cells[a], o, rng)
		}()
	}
	// The agents' resamples run while the games are played and the Elo rounds fitted.
	defer wg.Wait()
	games := eloGames(tasks, len(names), cells)
	s.Games = len(games)
	players := len(names) + 1 // the SOTA player last
	fit := stats.EloFit(games, players)
	rounds := stats.EloBootstrap(games, players, o.EloRounds, o.Seed)
	wg.Wait()
	s.rank(fit, rounds)
	return s, nil
}

// group computes each task's bounds and sorts the runs into cells by agent (in the order agents
// first appear) and task, each run's normalized score beside its raw one.
func (s *Summary) group(runs []Run) (names []string, cells []map[int]*cellRuns, err error) {
	taskIx := map[string]int{}
	for i, t := range s.Tasks {
		if _, dup := taskIx[t.Name]; dup {
			return nil, nil, fmt.Errorf("task %s is given twice", t.Name)
		}
		taskIx[t.Name] = i
		s.Bounds[t.Name] = TaskBounds(t, runs)
	}
	agentIx := map[string]int{}
	for _, r := range runs {
		ti, ok := taskIx[r.Task]
		if !ok {
			return nil, nil, fmt.Errorf("run %s of %s is on task %q, which is not in the suite", r.ID, r.Agent, r.Task)
		}
		if r.Agent == SOTAPlayer {
			return nil, nil, fmt.Errorf("run %s: the agent name %q is the SOTA player's", r.ID, SOTAPlayer)
		}
		ai, ok := agentIx[r.Agent]
		if !ok {
			ai = len(names)
			agentIx[r.Agent] = ai
			names = append(names, r.Agent)
			cells = append(cells, map[int]*cellRuns{})
		}
		c := cells[ai][ti]
		if c == nil {
			c = &cellRuns{}
			cells[ai][ti] = c
		}
		ns := 0.0
		if r.Valid {
			ns = Normalized(s.Transform, r.Score, s.Bounds[r.Task])
		}
		c.ns, c.valid, c.raw = append(c.ns, ns), append(c.valid, r.Valid), append(c.raw, r.Score)
	}
	return names, cells, nil
}

// eloGames plays every seed against every seed on each task, on raw scores (an invalid run is
// NaN), the SOTA a player (numbered agents, after the agents) with SOTASeeds runs at the SOTA.
func eloGames(tasks []Scoring, agents int, cells []map[int]*cellRuns) []stats.Game {
	type entry struct {
		player int
		runs   []float64 // NaN: invalid
	}
	var games []stats.Game
	for t, task := range tasks {
		var es []entry
		for a := range agents {
			c := cells[a][t]
			if c == nil {
				continue
			}
			e := entry{player: a}
			for i := range c.ns {
				v := math.NaN()
				if c.valid[i] {
					v = c.raw[i]
				}
				e.runs = append(e.runs, v)
			}
			es = append(es, e)
		}
		if len(es) == 0 {
			continue
		}
		sota := entry{player: agents}
		for range SOTASeeds {
			sota.runs = append(sota.runs, task.SOTA)
		}
		es = append(es, sota)
		for i := range es {
			for j := i + 1; j < len(es); j++ {
				for _, x := range es[i].runs {
					for _, y := range es[j].runs {
						games = append(games, stats.Game{A: es[i].player, B: es[j].player, Outcome: stats.Battle(x, y, task.LowerIsBetter)})
					}
				}
			}
		}
	}
	return games
}

// rank gives each player (the agents, then the SOTA) its Elo fit and bootstrap interval, orders
// the agents by mean normalized score and numbers both rankings; the SOTA row goes last.
func (s *Summary) rank(fit []float64, rounds [][]float64) {
	one := [2]float64{1, 1}
	sotaAgent := Agent{Name: SOTAPlayer, IsSOTA: true, Tasks: len(s.Tasks), PerTask: map[string]Cell{}, Seeds: SOTASeeds,
		MeanNS: 1, IQMNS: 1, MedianNS: 1, VSR: 1, MeanNSCI: one, IQMNSCI: one, MedianNSCI: one, VSRCI: one} // the SOTA scores 1 by definition
	for p := range len(s.Agents) + 1 {
		ag := &sotaAgent
		if p < len(s.Agents) {
			ag = &s.Agents[p]
		}
		ag.EloFit = fit[p]
		var xs []float64
		for _, r := range rounds {
			if !math.IsNaN(r[p]) {
				xs = append(xs, r[p])
			}
		}
		ag.Elo, ag.EloCI = stats.Quantile(xs, 0.5), [2]float64{stats.Quantile(xs, 0.025), stats.Quantile(xs, 0.975)}
	}
	sort.SliceStable(s.Agents, func(i, j int) bool {
		if s.Agents[i].MeanNS != s.Agents[j].MeanNS {
			return s.Agents[i].MeanNS > s.Agents[j].MeanNS
		}
		return s.Agents[i].Name < s.Agents[j].Name
	})
	for i := range s.Agents {
		s.Agents[i].NSRank = i + 1
	}
	s.Agents = append(s.Agents, sotaAgent)
	byElo := make([]int, len(s.Agents))
	for i := range byElo {
		byElo[i] = i
	}
	sort.SliceStable(byElo, func(i, j int) bool { return s.Agents[byElo[i]].Elo > s.Agents[byElo[j]].Elo })
	for r, i := range byElo {
		s.Agents[i].EloRank = r + 1
	}
}

// cellRuns are one agent's runs on one task, in order.
type cellRuns struct {
	ns    []float64
	valid []bool
	raw   []float64
}

// summarizeAgent is one agent's row: its cells and its aggregates with their intervals.
func summarizeAgent(name string, tasks []Scoring, cells map[int]*cellRuns, o Options, rng *rand.Rand) Agent {
	ag := Agent{Name: name, PerTask: map[string]Cell{}}
	// The (seed × task) matrices of normalized scores and validity, seeds cut to the fewest.
	var taskList []int
	for t := range cells {
		taskList = append(taskList, t)
	}
	sort.Ints(taskList)
	seeds := math.MaxInt
	for _, t := range taskList {
		seeds = min(seeds, len(cells[t].ns))
	}
	ns, vs := make([][]float64, len(taskList)), make([][]float64, len(taskList))
	for j, t := range taskList {
		c := cells[t]
		for i := range seeds {
			ns[j] = append(ns[j], c.ns[i])
			vs[j] = append(vs[j], b2f(c.valid[i]))
		}
		cell := Cell{Runs: len(c.ns), MeanRaw: math.NaN()}
		rawSum := 0.0
		for i := range c.ns {
			cell.MeanNS += c.ns[i]
			if c.valid[i] {
				cell.Valid++
				rawSum += c.raw[i]
			}
		}
		cell.MeanNS /= float64(cell.Runs)
		if cell.Valid > 0 {
			cell.MeanRaw = rawSum / float64(cell.Valid)
		}
		ag.PerTask[tasks[t].Name] = cell
		ag.Tasks++
		ag.Runs += cell.Runs
	}
	ag.Seeds = seeds
	nsAgg := stats.Aggregates(ns)
	ag.MeanNS, ag.IQMNS, ag.MedianNS = nsAgg[0], nsAgg[1], nsAgg[2]
	ag.VSR = stats.Aggregates(vs)[0]
	nsCI := stats.StratifiedBootstrap(ns, o.Bootstrap, rng)
	ag.MedianNSCI, ag.IQMNSCI, ag.MeanNSCI = nsCI[2], nsCI[1], nsCI[0]
	ag.VSRCI = stats.StratifiedBootstrap(vs, o.Bootstrap, rng)[0]
	return ag
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
