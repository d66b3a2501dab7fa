// Package stats is sealrun's statistics, in one place: the mean and its standard error (in
// floating point, and exactly in rationals as the exam board ranks by), and the AIRS-Bench
// suite's aggregates as upstream's notebook computes them (rliable's mean, interquartile mean
// and median with their stratified bootstrap intervals; Elo ratings by a Bradley–Terry fit and
// their bootstrap). It imports nothing of sealrun's.
package stats

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
)

// MeanSE is the mean of xs and its standard error, √(ss / (n−1) / n) with ss the squared
// deviations from the mean (0 for one value; NaN mean for none): the boards' cost per run, in
// the order the exact MeanSE2Rat's square root is taken.
func MeanSE(xs []float64) (mean, se float64) {
	mean, ss := meanSS(xs)
	if n := float64(len(xs)); n > 1 {
		se = math.Sqrt(ss / (n - 1) / n)
	}
	return mean, se
}

// MeanStderr is the mean of xs and Inspect's stderr of it, the sample standard deviation over
// √n: the same value as MeanSE's, in the order Inspect computes it, so that an Inspect eval
// log's reducer is the bytes Inspect would write (and those already published stay so).
func MeanStderr(xs []float64) (mean, se float64) {
	mean, ss := meanSS(xs)
	if n := float64(len(xs)); n > 1 {
		se = math.Sqrt(ss/(n-1)) / math.Sqrt(n)
	}
	return mean, se
}

// meanSS is the mean of xs and the sum of their squared deviations from it.
func meanSS(xs []float64) (mean, ss float64) {
	if len(xs) == 0 {
		return math.NaN(), 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, ss
}

// MeanSE2Rat is the exact mean of xs and the square of its standard error, ss / (n−1) / n (0
// for one value); nil, nil for none.
func MeanSE2Rat(xs []*big.Rat) (mean, se2 *big.Rat) {
	n := len(xs)
	if n == 0 {
		return nil, nil
	}
	sum := new(big.Rat)
	for _, x := range xs {
		sum.Add(sum, x)
	}
	mean = new(big.Rat).Quo(sum, big.NewRat(int64(n), 1))
	se2 = new(big.Rat)
	if n > 1 {
		ss := new(big.Rat)
		for _, x := range xs {
			d := new(big.Rat).Sub(x, mean)
			ss.Add(ss, d.Mul(d, d))
		}
		se2.Quo(ss, big.NewRat(int64((n-1)*n), 1))
	}
	return mean, se2
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
