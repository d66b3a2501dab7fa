package airs

import (
	"fmt"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The transforms and the normalized score, by hand (the paper's Eq. 2, 3 and 8, and the
// notebook's normalize_score and normalize_score_log).
func TestNormalizedByHand(t *testing.T) {
	acc := Bounds{Min: 0.5, SOTA: 0.9, Optimal: 1}   // φ(min) = log10 2 = 0.30103, φ(SOTA) = 1
	mae := Bounds{Min: 10, SOTA: 0.1, Optimal: 0}    // φ(min) = −1, φ(SOTA) = 1
	flat := Bounds{Min: 0.9, SOTA: 0.9, Optimal: 1}  // s_min is the SOTA: division by zero
	perfect := Bounds{Min: 0, SOTA: 0.1, Optimal: 0} // s_min at the optimum: φ(min) = +∞
	l2 := math.Log10(2)
	for _, c := range []struct {
		name string
		tr   Transform
		s    float64
		b    Bounds
		want float64
	}{
		{"accuracy at the worst", MarchOf9s, 0.5, acc, 0},
		{"accuracy at the SOTA", MarchOf9s, 0.9, acc, 1},
		{"accuracy one nine past the SOTA", MarchOf9s, 0.99, acc, (2 - l2) / (1 - l2)},                   // 2.430677
		{"accuracy at the optimum: |0.999 − 1|, φ = 3", MarchOf9s, 1, acc, (3 - l2) / (1 - l2)},          // 3.861353
		{"accuracy below the worst: clipped", MarchOf9s, 0.4, acc, 0},                                    // (0.221849 − 0.30103)/… < 0
		{"mae halfway in nines", MarchOf9s, 1, mae, 0.5},                                                 // φ(1) = 0: (0 − (−1)) / 2
		{"mae past the SOTA", MarchOf9s, 0.01, mae, 1.5},                                                 // φ = 2: 3/2
		{"mae at the optimum: |0.999 − 0|", MarchOf9s, 0, mae, (-math.Log10(0.999) + 1) / 2},             // 0.500217
		{"mae worse than the worst: clipped", MarchOf9s, 20, mae, 0},                                     //
		{"s_min is the SOTA, a better run: ∞ → 100", MarchOf9s, 0.95, flat, InfiniteNS},                  //
		{"s_min is the SOTA, the same run: 0/0 → 0", MarchOf9s, 0.9, flat, 0},                            //
		{"s_min is the SOTA, a worse run: −∞ → 100 (as the notebook)", MarchOf9s, 0.5, flat, InfiniteNS}, //
		{"s_min at the optimum: NaN → 0", MarchOf9s, 0, perfect, 0},                                      //
		{"identity halfway", Identity, 0.7, acc, 0.5},
		{"identity past the SOTA", Identity, 0.98, acc, 1.2},
		{"identity mae", Identity, 5.05, mae, 0.5},
		{"identity below the worst", Identity, 0.1, acc, 0},
		{"identity s_min is the SOTA: ∞ → 100", Identity, 0.95, flat, InfiniteNS},
	} {
		if got := Normalized(c.tr, c.s, c.b); !near(got, c.want) {
			t.Errorf("%s: NS(%v) = %v; want %v", c.name, c.s, got, c.want)
		}
	}
	if got := Phi(MarchOf9s, 1, 1); !near(got, 3) {
		t.Errorf("φ(optimum 1) = %v; want 3", got)
	}
	if got := Phi(MarchOf9s, 0, 0); !near(got, 0.00043451177401769) {
		t.Errorf("φ(optimum 0) = %v; want −log10(0.999)", got)
	}
}

// s_min is the worst valid run of any agent; with none, every run of the task scores 0.
func TestTaskBounds(t *testing.T) {
	task := Scoring{Name: "t", SOTA: 0.9}
	run := func(s float64, valid bool) Run { return Run{Agent: "a", Task: "t", Valid: valid, Score: s} }
	b := TaskBounds(task, []Run{run(0.3, true), run(0.6, true), run(0, false), run(0.95, true)})
	if b.Min != 0.3 || b.MinSource != MinFromRuns || b.Optimal != 1 {
		t.Errorf("bounds %+v", b)
	}
	if b := TaskBounds(task, []Run{run(0, false)}); !math.IsNaN(b.Min) || b.MinSource != MinNone || Normalized(MarchOf9s, 0.5, b) != 0 {
		t.Errorf("no valid run: %+v", b)
	}
	lower := Scoring{Name: "t", LowerIsBetter: true, SOTA: 0.1}
	if b := TaskBounds(lower, []Run{run(3, true), run(5, true)}); b.Min != 5 || b.Optimal != 0 {
		t.Errorf("lower is better: %+v", b)
	}
}

func TestSummarizeByHand(t *testing.T) {
	tasks := []Scoring{{Name: "T", SOTA: 0.9}}
	runs := []Run{
		{Agent: "a", Task: "T", ID: "1", Valid: true, Score: 0.8},
		{Agent: "a", Task: "T", ID: "2"},
		{Agent: "b", Task: "T", ID: "3", Valid: true, Score: 0.6},
		{Agent: "b", Task: "T", ID: "4", Valid: true, Score: 0.7},
	}
	s, err := Summarize(tasks, runs, Options{Transform: Identity, Bootstrap: 200, EloRounds: 20})
	if err != nil {
		t.Fatal(err)
	}
	if s.Games != 44 || s.Bounds["T"].Min != 0.6 {
		t.Errorf("games %d bounds %+v", s.Games, s.Bounds["T"])
	}
	by := map[string]Agent{}
	for _, a := range s.Agents {
		by[a.Name] = a
	}
	a, b, sota := by["a"], by["b"], by[SOTAPlayer]
	if !near(a.MeanNS, 1.0/3) || !near(b.MeanNS, 1.0/6) || a.VSR != 0.5 || b.VSR != 1 || a.NSRank != 1 || b.NSRank != 2 {
		t.Errorf("a %+v\nb %+v", a, b)
	}
	if !near(a.IQMNS, 1.0/3) || !near(a.MedianNS, 1.0/3) || a.Seeds != 2 {
		t.Errorf("a's aggregates %v %v seeds %d", a.IQMNS, a.MedianNS, a.Seeds)
	}
	if math.Abs(a.EloFit-b.EloFit) > 1e-6 || sota.EloFit < a.EloFit+1000 || sota.EloRank != 1 || !sota.IsSOTA {
		t.Errorf("Elo fit a %v b %v SOTA %v (rank %d)", a.EloFit, b.EloFit, sota.EloFit, sota.EloRank)
	}
	if a.MeanNSCI[0] > a.MeanNS || a.MeanNSCI[1] < a.MeanNS || a.EloCI[0] > a.Elo || a.EloCI[1] < a.Elo {
		t.Errorf("intervals: NS %v %v, Elo %v %v", a.MeanNS, a.MeanNSCI, a.Elo, a.EloCI)
	}
	// The same input gives the same table.
	again, _ := Summarize(tasks, runs, Options{Transform: Identity, Bootstrap: 200, EloRounds: 20})
	if fmt.Sprint(again.Agents) != fmt.Sprint(s.Agents) {
		t.Errorf("not deterministic")
	}
}

// Seeds are cut to the fewest an agent has on any of its tasks (rliable's matrix).
func TestSeedsCut(t *testing.T) {
	tasks := []Scoring{{Name: "A", SOTA: 0.9}, {Name: "B", SOTA: 0.9}}
	runs := []Run{
		{Agent: "x", Task: "A", Valid: true, Score: 0.5}, {Agent: "x", Task: "A", Valid: true, Score: 0.9}, {Agent: "x", Task: "A", Valid: true, Score: 0.7},
		{Agent: "x", Task: "B", Valid: true, Score: 0.5}, {Agent: "x", Task: "B", Valid: true, Score: 0.9},
	}
	s, err := Summarize(tasks, runs, Options{Transform: Identity, Bootstrap: 10, EloRounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	x := s.Agents[0]
	// A's first two seeds: 0 and 1; B's: 0 and 1: mean 0.5 (the third seed of A is left out).
	if x.Seeds != 2 || !near(x.MeanNS, 0.5) || x.Runs != 5 || x.PerTask["A"].Runs != 3 {
		t.Errorf("%+v", x)
	}
}

func TestSummarizeRefusals(t *testing.T) {
	tasks := []Scoring{{Name: "a", SOTA: 0.9}}
	if _, err := Summarize(tasks, []Run{{Agent: "x", Task: "b", ID: "r1"}}, Options{}); err == nil {
		t.Error("a run of an unknown task was accepted")
	}
	if _, err := Summarize(tasks, []Run{{Agent: SOTAPlayer, Task: "a", ID: "r1"}}, Options{}); err == nil {
		t.Error("an agent named SOTA was accepted")
	}
	if _, err := Summarize(append(tasks, tasks[0]), nil, Options{}); err == nil {
		t.Error("a task given twice was accepted")
	}
	if _, err := Summarize(tasks, nil, Options{Transform: "log"}); err == nil {
		t.Error("an unknown transform was accepted")
	}
}

// BenchmarkSummarize is the paper's size: 20 tasks × 14 agents × 10 seeds, with the notebook's
// 50,000 resamples and 100 Elo rounds.
func BenchmarkSummarize(b *testing.B) {
	tasks, runs := suite(20, 14, 10)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Summarize(tasks, runs, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func suite(nT, nA, seeds int) ([]Scoring, []Run) {
	var tasks []Scoring
	var runs []Run
	for t := range nT {
		name := fmt.Sprintf("task%02d", t)
		tasks = append(tasks, Scoring{Name: name, SOTA: 0.9, LowerIsBetter: false})
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
