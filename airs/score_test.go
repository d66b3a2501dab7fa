package airs

import (
	"fmt"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The transforms and the normalized score, by hand (the paper's Eq. 2, 3 and 8).
func TestNormalizedByHand(t *testing.T) {
	acc := Bounds{Min: 0, SOTA: 0.9, Optimal: 1}   // φ(min) = 0, φ(SOTA) = 1
	rmse := Bounds{Min: 10, SOTA: 0.1, Optimal: 0} // φ(min) = −1, φ(SOTA) = 1
	for _, c := range []struct {
		name string
		tr   Transform
		s    float64
		b    Bounds
		want float64
	}{
		{"accuracy at the worst", MarchOf9s, 0, acc, 0},
		{"accuracy at the SOTA", MarchOf9s, 0.9, acc, 1},
		{"accuracy one nine past the SOTA", MarchOf9s, 0.99, acc, 2},
		{"accuracy 0.5", MarchOf9s, 0.5, acc, math.Log10(2)},                     // −log10(0.5) = 0.30103
		{"accuracy at the optimum: the floor, nine nines", MarchOf9s, 1, acc, 9}, // −log10(1e-9) = 9
		{"rmse halfway in nines", MarchOf9s, 1, rmse, 0.5},                       // φ(1) = 0: (0 − (−1)) / 2
		{"rmse past the SOTA", MarchOf9s, 0.01, rmse, 1.5},                       // φ = 2: 3/2
		{"rmse worse than the worst: clipped", MarchOf9s, 20, rmse, 0},
		{"identity halfway", Identity, 0.45, acc, 0.5},
		{"identity past the SOTA", Identity, 0.99, acc, 1.1},
		{"identity rmse", Identity, 5.05, rmse, 0.5},
		{"identity below the worst", Identity, -1, acc, 0},
	} {
		if got := Normalized(c.tr, c.s, c.b); !near(got, c.want) {
			t.Errorf("%s: NS(%v) = %v; want %v", c.name, c.s, got, c.want)
		}
	}
	if got := Phi(MarchOf9s, 0.9, 1); !near(got, 1) {
		t.Errorf("φ(0.9) = %v", got)
	}
	if got := Phi(MarchOf9s, 1, 1); got != 9 {
		t.Errorf("φ(optimum) = %v; want 9 (the floor)", got)
	}
}

// s_min: the worst valid run when there are enough and it is worse than the SOTA; otherwise the
// estimate, and the bounds say which.
func TestTaskBounds(t *testing.T) {
	task := Scoring{Name: "t", SOTA: 0.9, Optimal: 1, EstimatedWorst: 0}
	run := func(s float64, valid bool) Run { return Run{Task: "t", Valid: valid, Score: s} }
	for _, c := range []struct {
		name   string
		runs   []Run
		min    float64
		source string
	}{
		{"no runs", nil, 0, MinFromEstimate},
		{"one valid run", []Run{run(0.3, true)}, 0, MinFromEstimate},
		{"two valid runs", []Run{run(0.3, true), run(0.6, true), run(0, false)}, 0.3, MinFromRuns},
		{"all past the SOTA", []Run{run(0.95, true), run(0.97, true)}, 0, MinFromEstimate},
	} {
		b := TaskBounds(task, c.runs)
		if b.Min != c.min || b.MinSource != c.source {
			t.Errorf("%s: %+v; want min %v from %s", c.name, b, c.min, c.source)
		}
	}
	lower := Scoring{Name: "t", LowerIsBetter: true, SOTA: 0.1, Optimal: 0, EstimatedWorst: 10}
	if b := TaskBounds(lower, []Run{run(3, true), run(5, true)}); b.Min != 5 || b.MinSource != MinFromRuns {
		t.Errorf("lower is better: %+v", b)
	}
}

// VSR and mean normalized score by hand; invalid runs count 0.
func TestSummaryByHand(t *testing.T) {
	tasks := []Scoring{{Name: "a", SOTA: 0.9, Optimal: 1, EstimatedWorst: 0}, {Name: "b", SOTA: 0.9, Optimal: 1, EstimatedWorst: 0}}
	runs := []Run{
		{Agent: "x", Task: "a", ID: "1", Valid: true, Score: 0.99}, // NS (2 − log10 2)/(1 − log10 2): a's worst observed, 0.5, is s_min
		{Agent: "x", Task: "a", ID: "2", Valid: true, Score: 0.5},  // NS 0 (it is the worst)
		{Agent: "x", Task: "a", ID: "3", Valid: false},             // NS 0
		{Agent: "x", Task: "b", ID: "4", Valid: true, Score: 0.9},  // one valid run on b: estimate 0 → NS 1
		{Agent: "y", Task: "a", ID: "5", Valid: false},             // NS 0
	}
	s, err := Summarize(tasks, runs, Options{Bootstrap: 50})
	if err != nil {
		t.Fatal(err)
	}
	if b := s.Bounds["a"]; b.Min != 0.5 || b.MinSource != MinFromRuns {
		t.Errorf("bounds a: %+v", b)
	}
	x, y, sota := s.Agents[0], s.Agents[1], s.Agents[2]
	// x: task a mean NS (ns99 + 0 + 0)/3, task b 1: mean (ns99/3 + 1)/2; VSR (2/3 + 1)/2 = 5/6.
	ns99 := (2 - math.Log10(2)) / (1 - math.Log10(2))
	if x.Name != "x" || !near(x.MeanNS, (ns99/3+1)/2) || !near(x.VSR, 5.0/6) || x.Tasks != 2 || x.Runs != 4 {
		t.Errorf("x: %+v", x)
	}
	if c := x.PerTask["a"]; c.Runs != 3 || c.Valid != 2 || !near(c.MeanRaw, 0.745) || !near(c.MeanNS, ns99/3) {
		t.Errorf("x on a: %+v", c)
	}
	if y.Name != "y" || y.MeanNS != 0 || y.VSR != 0 || !math.IsNaN(y.PerTask["a"].MeanRaw) {
		t.Errorf("y: %+v", y)
	}
	if !sota.IsSOTA || sota.Name != SOTAPlayer {
		t.Errorf("the SOTA player is not last: %+v", sota)
	}
	if x.MeanNSCI[0] > x.MeanNS || x.MeanNSCI[1] < x.MeanNS {
		t.Errorf("x's interval %v does not hold its mean %v", x.MeanNSCI, x.MeanNS)
	}
	// The same seed gives the same intervals; another seed, others.
	again, _ := Summarize(tasks, runs, Options{Bootstrap: 50})
	if again.Agents[0].EloCI != x.EloCI || again.Agents[0].MeanNSCI != x.MeanNSCI {
		t.Errorf("the bootstrap is not reproducible: %v %v", again.Agents[0].EloCI, x.EloCI)
	}
	if _, err := Summarize(tasks, append(runs, Run{Agent: "x", Task: "c", ID: "9"}), Options{}); err == nil {
		t.Error("a run on a task outside the suite was accepted")
	}
	if _, err := Summarize(tasks, runs, Options{Transform: "log"}); err == nil {
		t.Error("an unknown transform was accepted")
	}
}

// Elo by hand: against the SOTA alone, a player winning 2 of 3 games has θx − θs = ln 2 (the
// Bradley–Terry MLE: σ(d) = 2/3), so R = 1000 ± 400/ln10 · ln2/2 = 1000 ± 200·log10(2).
func TestEloByHand(t *testing.T) {
	tasks := []Scoring{{Name: "a", SOTA: 0.9, Optimal: 1}, {Name: "b", SOTA: 0.9, Optimal: 1}, {Name: "c", SOTA: 0.9, Optimal: 1}}
	runs := []Run{
		{Agent: "x", Task: "a", Valid: true, Score: 0.99}, // NS 2 > 1: wins
		{Agent: "x", Task: "b", Valid: true, Score: 0.99}, // wins
		{Agent: "x", Task: "c", Valid: true, Score: 0.5},  // loses
	}
	s, err := Summarize(tasks, runs, Options{Bootstrap: 1, Prior: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	d := 200 * math.Log10(2)
	if x, sota := s.Agents[0], s.Agents[1]; math.Abs(x.Elo-(1000+d)) > 1e-6 || math.Abs(sota.Elo-(1000-d)) > 1e-6 || x.EloRank != 1 {
		t.Errorf("Elo x %v, SOTA %v; want %v and %v", x.Elo, sota.Elo, 1000+d, 1000-d)
	}
	// One win each: equal ratings. Two agents with no valid run tie each other.
	runs = []Run{
		{Agent: "x", Task: "a", Valid: true, Score: 0.99}, {Agent: "x", Task: "b", Valid: true, Score: 0.5},
		{Agent: "p", Task: "a"}, {Agent: "q", Task: "a"},
	}
	s, _ = Summarize(tasks[:2], runs, Options{Bootstrap: 1})
	elo := map[string]float64{}
	for _, a := range s.Agents {
		elo[a.Name] = a.Elo
	}
	if math.Abs(elo["p"]-elo["q"]) > 1e-9 || elo["x"] <= elo["p"] {
		t.Errorf("ratings %v", elo)
	}
	// Ratings are centred on 1000 (Eq. 5).
	sum := 0.0
	for _, a := range s.Agents {
		sum += a.Elo
	}
	if math.Abs(sum/float64(len(s.Agents))-1000) > 1e-9 {
		t.Errorf("mean rating %v", sum/float64(len(s.Agents)))
	}
}

// An unbeaten SOTA keeps a finite rating (the prior).
func TestEloUnbeaten(t *testing.T) {
	tasks := []Scoring{{Name: "a", SOTA: 0.9, Optimal: 1}}
	s, _ := Summarize(tasks, []Run{{Agent: "x", Task: "a", Valid: true, Score: 0.1}, {Agent: "x", Task: "a", Valid: true, Score: 0.2}}, Options{Bootstrap: 10})
	for _, a := range s.Agents {
		if math.IsNaN(a.Elo) || math.IsInf(a.Elo, 0) || math.IsNaN(a.EloCI[0]) {
			t.Errorf("%s: Elo %v %v", a.Name, a.Elo, a.EloCI)
		}
	}
}

// BenchmarkSummarize is the size: 20 tasks × 14 agents × 10 seeds, 1,000 bootstrap
// samples (target ≤ 5 s).
func BenchmarkSummarize(b *testing.B) {
	tasks, runs := suite(20, 14, 10)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Summarize(tasks, runs, Options{Bootstrap: 1000}); err != nil {
			b.Fatal(err)
		}
	}
}

func suite(nT, nA, seeds int) ([]Scoring, []Run) {
	var tasks []Scoring
	var runs []Run
	for t := range nT {
		name := fmt.Sprintf("task%02d", t)
		tasks = append(tasks, Scoring{Name: name, SOTA: 0.9, Optimal: 1, EstimatedWorst: 0, LowerIsBetter: false})
		for a := range nA {
			for s := range seeds {
				v := (t*7+a*13+s*29)%10 != 0
				runs = append(runs, Run{Agent: fmt.Sprintf("agent%02d", a), Task: name, ID: fmt.Sprintf("%d-%d-%d", t, a, s), Valid: v,
					Score: 0.5 + 0.45*float64((t*31+a*17+s*7)%100)/100})
			}
		}
	}
	return tasks, runs
}
