package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The mean ± SE in floating point and exactly agree, by hand: 1, 2, 3, 4 has mean 2.5 and
// SE √(5/3)/2.
func TestMeanSE(t *testing.T) {
	m, se := MeanSE([]float64{1, 2, 3, 4})
	if m != 2.5 || !near(se, math.Sqrt(5.0/3)/2) {
		t.Errorf("MeanSE = %v ± %v", m, se)
	}
	if m, se := MeanStderr([]float64{1, 2, 3, 4}); m != 2.5 || !near(se, math.Sqrt(5.0/3)/2) {
		t.Errorf("MeanStderr = %v ± %v", m, se)
	}
	if m, se := MeanSE([]float64{7}); m != 7 || se != 0 {
		t.Errorf("one value: %v ± %v", m, se)
	}
	if m, _ := MeanSE(nil); !math.IsNaN(m) {
		t.Errorf("none: %v", m)
	}
	xs := []*big.Rat{big.NewRat(1, 1), big.NewRat(2, 1), big.NewRat(3, 1), big.NewRat(4, 1)}
	mean, se2 := MeanSE2Rat(xs)
	if mean.Cmp(big.NewRat(5, 2)) != 0 || se2.Cmp(big.NewRat(5, 12)) != 0 {
		t.Errorf("MeanSE2Rat = %v, %v; want 5/2, 5/12", mean, se2)
	}
	if mean, se2 := MeanSE2Rat(xs[:1]); mean.Cmp(big.NewRat(1, 1)) != 0 || se2.Sign() != 0 {
		t.Errorf("one value: %v, %v", mean, se2)
	}
	if mean, se2 := MeanSE2Rat(nil); mean != nil || se2 != nil {
		t.Errorf("none: %v, %v", mean, se2)
	}
}

// rliable's aggregates, by hand.
func TestAggregatesByHand(t *testing.T) {
	// Three tasks of two seeds: task means 0.5, 1, 0.5.
	a := Aggregates([][]float64{{0, 1}, {1, 1}, {0.5, 0.5}})
	// mean 2/3; the six scores sorted 0 .5 .5 1 1 1, trim int(6/4) = 1 each end: .5 .5 1 1 → .75;
	// median of the task means .5 .5 1 → .5.
	if !near(a[0], 2.0/3) || !near(a[1], 0.75) || !near(a[2], 0.5) {
		t.Errorf("aggregates %v", a)
	}
	if q := Quantile([]float64{4, 1, 3, 2}, 0.5); q != 2.5 {
		t.Errorf("median %v", q)
	}
	if q := Quantile([]float64{1, 2, 3, 4}, 0.025); !near(q, 1.075) {
		t.Errorf("2.5%% quantile %v", q)
	}
	// A constant matrix has a point interval; resampling keeps values in range.
	ci := StratifiedBootstrap([][]float64{{1, 1}, {1, 1}}, 100, rand.New(rand.NewPCG(1, 2)))
	if ci[0] != [2]float64{1, 1} || ci[1] != [2]float64{1, 1} {
		t.Errorf("constant interval %v", ci)
	}
}

// The notebook's games: invalid runs lose to valid ones, two invalid tie, numpy's isclose ties.
func TestBattleRules(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		x, y  float64
		lower bool
		want  Outcome
	}{
		{0.8, 0.6, false, Win},
		{0.8, 0.6, true, Loss},
		{nan, 0.6, false, Loss},
		{0.6, nan, true, Win},
		{nan, nan, false, Tie},
		{1.0, 1.0000005, false, Tie},  // |d| = 5e-7 ≤ 1e-6 + 1e-5·1.0000005
		{100, 100.0009, false, Tie},   // |d| = 9e-4 ≤ 1e-6 + 1e-5·100.0009 = 1.001e-3
		{0.5, 0.50001, false, Loss},   // |d| = 1e-5 > 1e-6 + 5.0001e-6
		{0.50001, 0.5, false, Win},    //
		{100, 100.0011, true, Win},    // |d| = 1.1e-3 > 1.001e-3: lower wins
		{1e-7, 9e-7, true, Tie},       // both within atol
		{-3, -2.99999999, false, Tie}, //
	} {
		if got := Battle(c.x, c.y, c.lower); got != c.want {
			t.Errorf("Battle(%v, %v, lower %v) = %v; want %v", c.x, c.y, c.lower, got, c.want)
		}
	}
}

// The Bradley–Terry fit by hand: two players, A 3 wins and 1 loss: P = 3/4, so
// R_A − R_B = 400·log10(3) = 190.85, centred on 1000. Ties count half.
func TestEloFitByHand(t *testing.T) {
	g := []Game{{0, 1, Win}, {0, 1, Win}, {1, 0, Loss}, {0, 1, Loss}}
	r := EloFit(g, 2)
	d := 400 * math.Log10(3)
	if math.Abs(r[0]-(1000+d/2)) > 1e-3 || math.Abs(r[1]-(1000-d/2)) > 1e-3 {
		t.Errorf("ratings %v; want %v, %v", r, 1000+d/2, 1000-d/2)
	}
	// One win, two ties, one loss: even.
	r = EloFit([]Game{{0, 1, Win}, {0, 1, Tie}, {1, 0, Tie}, {0, 1, Loss}}, 2)
	if math.Abs(r[0]-1000) > 1e-6 || math.Abs(r[1]-1000) > 1e-6 {
		t.Errorf("even ratings %v", r)
	}
	// Three players in a cycle of equal strength: all 1000; a fourth with no game is NaN.
	r = EloFit([]Game{{0, 1, Win}, {1, 2, Win}, {2, 0, Win}}, 4)
	if math.Abs(r[0]-1000) > 1e-6 || math.Abs(r[1]-1000) > 1e-6 || math.Abs(r[2]-1000) > 1e-6 || !math.IsNaN(r[3]) {
		t.Errorf("cycle %v", r)
	}
	// A player who wins every game: the fit stops where the mean log-loss's gradient is under
	// 1e-6; ln10·(1 − P) < 1e-6 puts the gap near 400·log10(ln10/1e-6) ≈ 2545.
	r = EloFit([]Game{{0, 1, Win}, {0, 1, Win}}, 2)
	if gap := r[0] - r[1]; math.IsNaN(gap) || gap < 2000 || gap > 3000 || math.Abs(r[0]+r[1]-2000) > 1e-6 {
		t.Errorf("unbeaten: %v (gap %v)", r, r[0]-r[1])
	}
}

// A whole summary by hand: task T (higher is better, SOTA 0.9); agent a scores 0.8 and an
// invalid run, b scores 0.6 and 0.7. s_min = 0.6. Identity: a's runs score (0.8 − 0.6)/0.3 =
// 2/3 and 0, mean 1/3; b's 0 and 1/3, mean 1/6. VSR: a 1/2, b 1. Games: a–b 2 wins 2 losses;
// a and b lose all 20 of theirs to the SOTA's 10 copies: 44 games, a and b rate the same.
