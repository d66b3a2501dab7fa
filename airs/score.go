package airs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
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
	fit := EloFit(games, players)
	rounds := EloBootstrap(games, players, o.EloRounds, o.Seed)
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
func eloGames(tasks []Scoring, agents int, cells []map[int]*cellRuns) []Game {
	type entry struct {
		player int
		runs   []float64 // NaN: invalid
	}
	var games []Game
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
						games = append(games, Game{A: es[i].player, B: es[j].player, Outcome: Battle(x, y, task.LowerIsBetter)})
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
		ag.Elo, ag.EloCI = Quantile(xs, 0.5), [2]float64{Quantile(xs, 0.025), Quantile(xs, 0.975)}
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
	nsAgg := Aggregates(ns)
	ag.MeanNS, ag.IQMNS, ag.MedianNS = nsAgg[0], nsAgg[1], nsAgg[2]
	ag.VSR = Aggregates(vs)[0]
	nsCI := StratifiedBootstrap(ns, o.Bootstrap, rng)
	ag.MedianNSCI, ag.IQMNSCI, ag.MeanNSCI = nsCI[2], nsCI[1], nsCI[0]
	ag.VSRCI = StratifiedBootstrap(vs, o.Bootstrap, rng)[0]
	return ag
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Aggregates are rliable's mean, interquartile mean and median of a score matrix given as
// columns (one per task, each the same number of seeds): the mean over tasks of each task's
// mean; scipy's trim_mean(·, 0.25) of every score; the median over tasks of each task's mean.
func Aggregates(cols [][]float64) [3]float64 {
	var b aggBuf
	return b.agg(cols, false)
}

// aggBuf holds Aggregates' scratch space, reused across bootstrap resamples.
type aggBuf struct{ means, all []float64 }

// agg computes the aggregates; with meanOnly, only the mean (the others NaN).
func (b *aggBuf) agg(cols [][]float64, meanOnly bool) [3]float64 {
	if len(cols) == 0 || len(cols[0]) == 0 {
		return [3]float64{math.NaN(), math.NaN(), math.NaN()}
	}
	b.means, b.all = b.means[:0], b.all[:0]
	mean := 0.0
	for _, c := range cols {
		sum := 0.0
		for _, v := range c {
			sum += v
		}
		m := sum / float64(len(c))
		b.means = append(b.means, m)
		mean += m
		if !meanOnly {
			b.all = append(b.all, c...)
		}
	}
	mean /= float64(len(cols))
	if meanOnly {
		return [3]float64{mean, math.NaN(), math.NaN()}
	}
	sort.Float64s(b.all)
	cut := len(b.all) / 4 // int(0.25·n), as trim_mean cuts
	iqm := 0.0
	for _, v := range b.all[cut : len(b.all)-cut] {
		iqm += v
	}
	iqm /= float64(len(b.all) - 2*cut)
	sort.Float64s(b.means)
	return [3]float64{mean, iqm, sortedQuantile(b.means, 0.5)}
}

// StratifiedBootstrap is rliable's interval for each aggregate: n resamples, each drawing every
// task's seeds with replacement independently of the other tasks; the 2.5th and 97.5th
// percentiles (linear interpolation, numpy's default) of each aggregate over the resamples.
func StratifiedBootstrap(cols [][]float64, n int, rng *rand.Rand) [3][2]float64 {
	return stratifiedBootstrap(cols, n, rng, false)
}

// stratifiedBootstrap is StratifiedBootstrap; with meanOnly it computes only the mean's interval
// (the others NaN). It is long because it is one algorithm (resample within each task, then
// aggregate), kept whole so it reads against the notebook's.
func stratifiedBootstrap(cols [][]float64, n int, rng *rand.Rand, meanOnly bool) [3][2]float64 {
	nan := [2]float64{math.NaN(), math.NaN()}
	if len(cols) == 0 || len(cols[0]) == 0 {
		return [3][2]float64{nan, nan, nan}
	}
	// A resample draws each task's values from that task's own seeds: it is a count per
	// original value. With the original values ranked once, the interquartile mean of a
	// resample is a walk over the ranks with their counts, no sort.
	type pos struct{ j, i int }
	var order []pos
	for j, c := range cols {
		for i := range c {
			order = append(order, pos{j, i})
		}
	}
	sort.SliceStable(order, func(x, y int) bool { return cols[order[x].j][order[x].i] < cols[order[y].j][order[y].i] })
	rank := make([][]int, len(cols))
	for j, c := range cols {
		rank[j] = make([]int, len(c))
	}
	sorted := make([]float64, len(order))
	for r, p := range order {
		rank[p.j][p.i] = r
		sorted[r] = cols[p.j][p.i]
	}
	total := len(order)
	cut := total / 4 // int(0.25·n), as trim_mean cuts
	counts := make([]int, total)
	means := make([]float64, len(cols))
	samples := [3][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	for k := range n {
		if !meanOnly {
			clear(counts)
		}
		mean := 0.0
		for j, c := range cols {
			sum := 0.0
			for range c {
				i := rng.IntN(len(c))
				sum += c[i]
				if !meanOnly {
					counts[rank[j][i]]++
				}
			}
			means[j] = sum / float64(len(c))
			mean += means[j]
		}
		samples[0][k] = mean / float64(len(cols))
		if meanOnly {
			continue
		}
		iqm, at := 0.0, 0
		for r, m := range counts {
			if m == 0 {
				continue
			}
			lo, hi := max(at, cut), min(at+m, total-cut)
			if hi > lo {
				iqm += float64(hi-lo) * sorted[r]
			}
			at += m
		}
		samples[1][k] = iqm / float64(total-2*cut)
		sort.Float64s(means)
		samples[2][k] = sortedQuantile(means, 0.5)
	}
	out := [3][2]float64{nan, nan, nan}
	for m := range 3 {
		if meanOnly && m > 0 {
			break
		}
		sort.Float64s(samples[m])
		out[m] = [2]float64{sortedQuantile(samples[m], 0.025), sortedQuantile(samples[m], 0.975)}
	}
	return out
}

// Quantile is the q-quantile of xs with linear interpolation (numpy's and pandas' default);
// NaN for none. xs need not be sorted.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return sortedQuantile(s, q)
}

// sortedQuantile is Quantile of sorted s.
func sortedQuantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}

// Outcome is a game's result for its first player.
type Outcome int8

const (
	Win  Outcome = 1
	Loss Outcome = -1
	Tie  Outcome = 0
)

// Battle is the notebook's game between two runs on a task (NaN: an invalid run): an invalid
// run loses to any valid one and two invalid ones tie; valid scores within numpy's isclose
// (|x − y| ≤ 1e-6 + 1e-5·|y|) tie; otherwise the better score wins.
func Battle(x, y float64, lowerIsBetter bool) Outcome {
	switch xn, yn := math.IsNaN(x), math.IsNaN(y); {
	case xn && yn:
		return Tie
	case xn:
		return Loss
	case yn:
		return Win
	}
	if math.Abs(x-y) <= 1e-6+1e-5*math.Abs(y) {
		return Tie
	}
	if (x < y) == lowerIsBetter {
		return Win
	}
	return Loss
}

// Game is one game between players A and B.
type Game struct {
	A, B    int
	Outcome Outcome // for A
}

// EloFit is the notebook's compute_mle_elo on a list of games: each game counted in both
// orders, a tie as half a win for each side, and the Bradley–Terry model P(a beats b) =
// 1/(1 + 10^((R_b − R_a)/400)) fitted by maximum likelihood with no prior; the ratings are
// centred on 1000 (the unpenalised fit's, started from zero, are). A player who wins or loses
// every game has no finite maximum: the fit stops as the notebook's optimiser does, once the
// mean log-loss's gradient is under 1e-6 or after 100 iterations (see SCORING.md). A player
// with no game is NaN.
func EloFit(games []Game, players int) []float64 {
	w := make([][]float64, players) // w[a][b]: a's wins over b, ties half
	for a := range w {
		w[a] = make([]float64, players)
	}
	for _, g := range games {
		switch g.Outcome {
		case Win:
			w[g.A][g.B]++
		case Loss:
			w[g.B][g.A]++
		default:
			w[g.A][g.B] += 0.5
			w[g.B][g.A] += 0.5
		}
	}
	return bradleyTerry(w)
}

// EloBootstrap is the notebook's get_bootstrap_result: rounds resamples of the games (counted
// in both orders, as the notebook's battle table is) with replacement, each fitted by EloFit.
// Round r draws from its own stream of seed, so rounds run in parallel and give the same result.
func EloBootstrap(games []Game, players, rounds int, seed uint64) [][]float64 {
	n := 2 * len(games)
	if n == 0 {
		return nil
	}
	out := make([][]float64, rounds)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sample := make([]Game, 0, n)
			for r := range next {
				rng := rand.New(rand.NewPCG(seed, 0x5ea1_0000+uint64(r)))
				sample = sample[:0]
				for range n {
					i := rng.IntN(n)
					g := games[i/2]
					if i%2 == 1 { // the swapped copy
						g = Game{A: g.B, B: g.A, Outcome: -g.Outcome}
					}
					sample = append(sample, g)
				}
				out[r] = EloFit(sample, players)
			}
		}()
	}
	for r := range rounds {
		next <- r
	}
	close(next)
	wg.Wait()
	return out
}

// bradleyTerry maximizes Σ w[a][b]·log σ(ln10·(θa − θb)) over θ with Σθ = 0 by Newton's method,
// stopping when the mean log-loss's gradient is under 1e-6 (at most 100 steps), and returns 400·θ +
// 1000. Players with no game are NaN. It is long because it is one algorithm, kept whole so it
// reads against the notebook's.
func bradleyTerry(w [][]float64) []float64 {
	n := len(w)
	active := make([]bool, n)
	total := 0.0
	for a := range n {
		for b := range n {
			if w[a][b] > 0 {
				active[a], active[b] = true, true
				total += w[a][b]
			}
		}
	}
	out := make([]float64, n)
	if total == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	theta := make([]float64, n)
	g := make([]float64, n)
	h := make([][]float64, n)
	for i := range h {
		h[i] = make([]float64, n+1)
	}
	ln10 := math.Ln10
	for iter := 0; iter < 100; iter++ {
		for i := range n {
			g[i] = 0
			for j := range n + 1 {
				h[i][j] = 0
			}
		}
		for a := range n {
			for b := range n {
				if a == b || (w[a][b] == 0 && w[b][a] == 0) {
					continue
				}
				// a's games against b: w[a][b] wins, w[b][a] losses.
				p := 1 / (1 + math.Exp(-ln10*(theta[a]-theta[b])))
				// d/dθa of the log-likelihood of these games (counted from a's side only; b's
				// side is counted when the loop reaches (b, a)).
				gr := ln10 * (w[a][b]*(1-p) - w[b][a]*p)
				g[a] += gr / total
				c := ln10 * ln10 * (w[a][b] + w[b][a]) * p * (1 - p) / total
				h[a][a] -= c
				h[a][b] += c
			}
		}
		maxG := 0.0
		for i := range n {
			maxG = math.Max(maxG, math.Abs(g[i]))
		}
		if maxG < 1e-6 {
			break
		}
		// Solve (H − 11ᵀ − εI)·Δ = −g: the 11ᵀ term fixes the free shift (Σθ stays 0, since
		// Σg = 0), ε the players with no game.
		for i := range n {
			for j := range n {
				h[i][j] -= 1
			}
			h[i][i] -= 1e-12
			h[i][n] = -g[i]
		}
		delta := solve(h, n)
		// A player who wins every game has its optimum at infinity, where the Hessian
		// vanishes: steps are capped at 1 (400 Elo) so the fit walks there as the gradient
		// shrinks instead of jumping.
		step := 0.0
		for i := range n {
			step = math.Max(step, math.Abs(delta[i]))
		}
		scale := 1.0
		if step > 1 {
			scale = 1 / step
		}
		for i := range n {
			theta[i] += scale * delta[i]
		}
	}
	for i := range n {
		out[i] = 400*theta[i] + 1000
		if !active[i] {
			out[i] = math.NaN()
		}
	}
	return out
}

func solve(a [][]float64, n int) []float64 {
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r][n]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}
