package airs

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Transform is φ of the normalized score (the paper's Eq. 2).
type Transform string

const (
	// MarchOf9s is φ(s) = −log10(|s − s_opt|) (Eq. 3): closing the gap from 0.99 to 0.999 counts
	// as much as from 0.9 to 0.99.
	MarchOf9s Transform = "march-of-9s"
	// Identity is φ(s) = s (Eq. 8): linear progress from the worst score to the SOTA.
	Identity Transform = "identity"
)

// OptimumFloor is how close to the optimum a score counts: |s − s_opt| below it is taken as it,
// so that a score at the optimum (where −log10 of 0 is +∞) has a finite transform, −log10(1e-9)
// = 9: "nine nines". A run that reaches the optimum gets a large normalized score rather than an
// infinite one that would swamp every mean.
const OptimumFloor = 1e-9

// Phi is the transform of a raw score s for a task whose optimal score is opt.
func Phi(tr Transform, s, opt float64) float64 {
	if tr == Identity {
		return s
	}
	return -math.Log10(math.Max(math.Abs(s-opt), OptimumFloor))
}

// Scoring is what scoring needs of a task: its metadata's numbers.
type Scoring struct {
	Name           string
	LowerIsBetter  bool
	SOTA           float64
	Optimal        float64
	EstimatedWorst float64
}

// ScoringOf takes a parsed task's numbers.
func ScoringOf(m *Metadata) Scoring {
	return Scoring{Name: m.Info.Name, LowerIsBetter: m.MetricLowerIsBetter, SOTA: m.Info.SOTA.Score, Optimal: m.Info.OptimalScore, EstimatedWorst: m.Info.EstimatedWorstScore}
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

// MinObserved is how many valid runs a task needs before its worst observed score is s_min;
// with fewer, s_min is the metadata's estimated_worst_score.
const MinObserved = 2

// Where s_min came from.
const (
	MinFromRuns     = "worst observed"
	MinFromEstimate = "estimated_worst_score"
)

// Bounds are one task's normalization: s_min, the SOTA and the optimum, and where s_min came from.
type Bounds struct {
	Min, SOTA, Optimal float64
	MinSource          string
}

// TaskBounds picks s_min for a task (Eq. 2): the worst valid score observed across every agent
// and seed when at least MinObserved valid runs exist and that score is worse than the SOTA;
// otherwise estimated_worst_score (one run is no spread, and a worst score at or past the SOTA
// would make the SOTA's normalized score undefined).
func TaskBounds(t Scoring, runs []Run) Bounds {
	b := Bounds{Min: t.EstimatedWorst, SOTA: t.SOTA, Optimal: t.Optimal, MinSource: MinFromEstimate}
	worse := func(a, c float64) bool {
		if t.LowerIsBetter {
			return a > c
		}
		return a < c
	}
	n, worst := 0, 0.0
	for _, r := range runs {
		if r.Task != t.Name || !r.Valid {
			continue
		}
		if n == 0 || worse(r.Score, worst) {
			worst = r.Score
		}
		n++
	}
	if n >= MinObserved && worse(worst, t.SOTA) {
		b.Min, b.MinSource = worst, MinFromRuns
	}
	return b
}

// Normalized is a raw score's normalized score (Eq. 2): 0 at s_min, 1 at the SOTA, above 1 past
// it, clipped below at 0.
func Normalized(tr Transform, s float64, b Bounds) float64 {
	lo, hi := Phi(tr, b.Min, b.Optimal), Phi(tr, b.SOTA, b.Optimal)
	if hi == lo {
		return 0
	}
	return math.Max(0, (Phi(tr, s, b.Optimal)-lo)/(hi-lo))
}

// SOTAPlayer is the name of the SOTA in Elo tables: a player that scores the SOTA on every task.
const SOTAPlayer = "SOTA"

// Options configure Summarize.
type Options struct {
	Transform Transform // default MarchOf9s
	Bootstrap int       // bootstrap samples for the confidence intervals (default 1000; 0 → default)
	Seed      uint64    // the bootstrap's seed (default 1): the same input gives the same intervals
	// Prior is the Gaussian prior's precision on each Bradley–Terry θ (default 0.01): it keeps
	// the ratings finite when a player wins or loses every game (the SOTA, often).
	Prior float64
}

func (o *Options) defaults() {
	if o.Transform == "" {
		o.Transform = MarchOf9s
	}
	if o.Bootstrap <= 0 {
		o.Bootstrap = 1000
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Prior <= 0 {
		o.Prior = 0.01
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
	Name     string
	Tasks    int
	Runs     int
	MeanNS   float64 // mean over its tasks of the task's mean normalized score
	MeanNSCI [2]float64
	VSR      float64 // mean valid submission rate (Eq. 1)
	VSRCI    [2]float64
	Elo      float64 // Eq. 5, SOTA included as a player
	EloCI    [2]float64
	PerTask  map[string]Cell
	IsSOTA   bool
	EloRank  int
	NSRank   int
}

// Summary is the suite's table.
type Summary struct {
	Transform Transform
	Bootstrap int
	Seed      uint64
	Tasks     []Scoring
	Bounds    map[string]Bounds
	Agents    []Agent // by mean normalized score, best first; the SOTA player last
}

// Summarize computes every agent's mean normalized score, valid submission rate and Elo rating
// with bootstrap 95% intervals (percentiles 2.5 and 97.5), resampling each agent's runs within
// each task with replacement; s_min stays what the full data gives. Runs of a task not in tasks
// are an error.
func Summarize(tasks []Scoring, runs []Run, o Options) (*Summary, error) {
	o.defaults()
	if o.Transform != MarchOf9s && o.Transform != Identity {
		return nil, fmt.Errorf("transform %q: use %s or %s", o.Transform, MarchOf9s, Identity)
	}
	s := &Summary{Transform: o.Transform, Bootstrap: o.Bootstrap, Seed: o.Seed, Tasks: tasks, Bounds: map[string]Bounds{}}
	taskIx := map[string]int{}
	for i, t := range tasks {
		if _, dup := taskIx[t.Name]; dup {
			return nil, fmt.Errorf("task %s is given twice", t.Name)
		}
		taskIx[t.Name] = i
		s.Bounds[t.Name] = TaskBounds(t, runs)
	}
	// cells[agent][task] = normalized scores of its runs (and validity).
	type cellRuns struct {
		ns    []float64
		valid []bool
		raw   []float64
	}
	agentIx := map[string]int{}
	var names []string
	var cells []map[int]*cellRuns
	for _, r := range runs {
		ti, ok := taskIx[r.Task]
		if !ok {
			return nil, fmt.Errorf("run %s of %s is on task %q, which is not in the suite", r.ID, r.Agent, r.Task)
		}
		if r.Agent == SOTAPlayer {
			return nil, fmt.Errorf("run %s: the agent name %q is the SOTA player's", r.ID, SOTAPlayer)
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
			ns = Normalized(o.Transform, r.Score, s.Bounds[r.Task])
		}
		c.ns, c.valid, c.raw = append(c.ns, ns), append(c.valid, r.Valid), append(c.raw, r.Score)
	}
	nA, nT := len(names), len(tasks)
	// stats computes each agent's mean NS and VSR and the Elo ratings from per-cell samples.
	stats := func(pick func(c *cellRuns, i int) int) (meanNS, vsr, elo []float64) {
		cellNS := make([][]float64, nA) // [agent][task], NaN when the agent did not run it
		meanNS, vsr = make([]float64, nA), make([]float64, nA)
		for a := range nA {
			cellNS[a] = make([]float64, nT)
			nTasks := 0
			for t := range nT {
				c := cells[a][t]
				if c == nil {
					cellNS[a][t] = math.NaN()
					continue
				}
				sum, valid := 0.0, 0
				for i := range c.ns {
					j := pick(c, i)
					sum += c.ns[j]
					if c.valid[j] {
						valid++
					}
				}
				cellNS[a][t] = sum / float64(len(c.ns))
				meanNS[a] += cellNS[a][t]
				vsr[a] += float64(valid) / float64(len(c.ns))
				nTasks++
			}
			meanNS[a] /= float64(nTasks)
			vsr[a] /= float64(nTasks)
		}
		return meanNS, vsr, eloRatings(cellNS, o.Prior)
	}
	meanNS, vsr, elo := stats(func(_ *cellRuns, i int) int { return i })
	rng := rand.New(rand.NewPCG(o.Seed, 0x5ea1))
	bNS, bVSR, bElo := make([][]float64, nA), make([][]float64, nA), make([][]float64, nA+1)
	for range o.Bootstrap {
		m, v, e := stats(func(c *cellRuns, _ int) int { return rng.IntN(len(c.ns)) })
		for a := range nA {
			bNS[a], bVSR[a] = append(bNS[a], m[a]), append(bVSR[a], v[a])
		}
		for a := range nA + 1 {
			bElo[a] = append(bElo[a], e[a])
		}
	}
	for a, name := range names {
		ag := Agent{Name: name, MeanNS: meanNS[a], VSR: vsr[a], Elo: elo[a], PerTask: map[string]Cell{},
			MeanNSCI: interval(bNS[a]), VSRCI: interval(bVSR[a]), EloCI: interval(bElo[a])}
		for t, c := range cells[a] {
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
		s.Agents = append(s.Agents, ag)
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
	s.Agents = append(s.Agents, Agent{Name: SOTAPlayer, IsSOTA: true, MeanNS: 1, VSR: 1, Elo: elo[nA], EloCI: interval(bElo[nA]), Tasks: nT,
		MeanNSCI: [2]float64{1, 1}, VSRCI: [2]float64{1, 1}})
	byElo := make([]int, len(s.Agents))
	for i := range byElo {
		byElo[i] = i
	}
	sort.SliceStable(byElo, func(i, j int) bool { return s.Agents[byElo[i]].Elo > s.Agents[byElo[j]].Elo })
	for r, i := range byElo {
		s.Agents[i].EloRank = r + 1
	}
	return s, nil
}

// interval is the 2.5th and 97.5th percentiles (nearest rank) of the bootstrap samples.
func interval(xs []float64) [2]float64 {
	if len(xs) == 0 {
		return [2]float64{math.NaN(), math.NaN()}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return [2]float64{at(0.025), at(0.975)}
}

// eloRatings fits the Bradley–Terry model to the games of every task and returns the Elo ratings
// (Eq. 5) of the agents and, last, the SOTA player. A task's games are every pair of its players
// (the agents that ran it and the SOTA, whose normalized score is 1): the higher mean normalized
// score wins, equal ones (two agents with no valid run among them) tie; a tie counts half a win
// each, as Chatbot Arena counts it.
func eloRatings(cellNS [][]float64, prior float64) []float64 {
	nA := len(cellNS)
	n := nA + 1
	wins := make([][]float64, n) // wins[i][j]: games i won against j (ties count 0.5)
	games := make([][]float64, n)
	for i := range n {
		wins[i], games[i] = make([]float64, n), make([]float64, n)
	}
	nT := 0
	if nA > 0 {
		nT = len(cellNS[0])
	}
	score := func(p, t int) float64 {
		if p == nA {
			return 1
		}
		return cellNS[p][t]
	}
	for t := range nT {
		for i := range n {
			si := score(i, t)
			if math.IsNaN(si) {
				continue
			}
			for j := i + 1; j < n; j++ {
				sj := score(j, t)
				if math.IsNaN(sj) {
					continue
				}
				games[i][j]++
				games[j][i]++
				switch {
				case si > sj:
					wins[i][j]++
				case sj > si:
					wins[j][i]++
				default:
					wins[i][j] += 0.5
					wins[j][i] += 0.5
				}
			}
		}
	}
	theta := bradleyTerry(wins, games, prior)
	mean := 0.0
	for _, t := range theta {
		mean += t
	}
	mean /= float64(n)
	elo := make([]float64, n)
	for i, t := range theta {
		elo[i] = 400/math.Ln10*(t-mean) + 1000
	}
	return elo
}

// bradleyTerry maximizes Σ wins[i][j]·log σ(θi − θj) − prior/2·Σθ² by Newton's method (the
// log-likelihood is concave, the prior makes it strictly so).
func bradleyTerry(wins, games [][]float64, prior float64) []float64 {
	n := len(wins)
	theta := make([]float64, n)
	g := make([]float64, n)
	h := make([][]float64, n)
	for i := range h {
		h[i] = make([]float64, n+1)
	}
	for iter := 0; iter < 100; iter++ {
		for i := range n {
			g[i] = -prior * theta[i]
			for j := range n + 1 {
				h[i][j] = 0
			}
			h[i][i] = -prior
		}
		for i := range n {
			for j := range n {
				if i == j || games[i][j] == 0 {
					continue
				}
				p := 1 / (1 + math.Exp(theta[j]-theta[i]))
				g[i] += wins[i][j] - games[i][j]*p
				w := games[i][j] * p * (1 - p)
				h[i][i] -= w
				h[i][j] += w
			}
		}
		// Solve H·Δ = −g (H negative definite) by Gaussian elimination with partial pivoting.
		for i := range n {
			h[i][n] = -g[i]
		}
		delta := solve(h, n)
		maxStep := 0.0
		for i := range n {
			theta[i] += delta[i]
			maxStep = math.Max(maxStep, math.Abs(delta[i]))
		}
		if maxStep < 1e-10 {
			break
		}
	}
	return theta
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
