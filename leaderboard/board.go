package leaderboard

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/stats"
)

func decodeB64(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

// Agent is a row's identity: the scaffold, the model and its reasoning effort (each effort is
// its own row).
type Agent struct {
	Scaffold        string `json:"scaffold"`
	ScaffoldVersion string `json:"scaffold_version"`
	Model           string `json:"model"`
	Effort          string `json:"reasoning_effort"`
}

// Name is the agent as the tables print it: "opencode 1.2 · model@effort". A scripted scaffold
// (provider none: model "none/…") is never presented as a model: "scripted-demo 1.0.0 · no model";
// nor is a scripted model (provider scripted, as sealrun demo --scaffold opencode runs):
// "opencode 1.18.33 · scripted (not a model)". A person (a human run, model "human/HANDLE") is
// "human · HANDLE": no scaffold drove the run.
func (a Agent) Name() string {
	if handle, ok := strings.CutPrefix(a.Model, "human/"); ok {
		return "human · " + handle
	}
	if a.Model == "scripted" || strings.HasPrefix(a.Model, "scripted/") {
		return a.Scaffold + " " + a.ScaffoldVersion + " · scripted (not a model)"
	}
	if (a.Model == "none" || strings.HasPrefix(a.Model, "none/")) && a.Effort == "" {
		return a.Scaffold + " " + a.ScaffoldVersion + " · no model (scripted)"
	}
	s := a.Scaffold + " " + a.ScaffoldVersion + " · " + a.Model
	if a.Effort != "" {
		s += "@" + a.Effort
	}
	return s
}

// Run is one verified run of a row.
type Run struct {
	ID             string          `json:"id"`
	RerunOf        string          `json:"rerun_of"`
	Seed           int64           `json:"seed"`
	Status         outcome.Outcome `json:"status"`
	Reason         string          `json:"reason"`
	Passed         int             `json:"passed"`
	Questions      int             `json:"questions"`
	BitsPerByte    *float64        `json:"bits_per_byte"`
	BestValidation *float64        `json:"best_validation"` // best validation percent of its candidates
	// Tokens (input and output) and Cost (in Currency) are the run's model use, where its
	// attestation says (cost: where the host priced the model).
	Tokens   *int64   `json:"tokens,omitempty"`
	Cost     *float64 `json:"cost,omitempty"`
	Currency string   `json:"currency,omitempty"`
	// Pauses are the pauses its operator granted (a human run's; absent: none).
	Pauses []attest.Pause `json:"pauses,omitempty"`
	// People says, for a human run, who it was for and who attached to its terminal, as its
	// attestation says ("" for an agent's run, or a human run attested before people were bound).
	People string `json:"people,omitempty"`
	Key    string `json:"key"` // the key file that verified it
	KeyID  string `json:"key_id"`
	Path   string `json:"path"`
	// Amendments are what was found about the run after it ended (sealrun amend) and applies;
	// Legacy: one labels it graded under a superseded protocol.
	Amendments []RunAmendment `json:"amendments,omitempty"`
	Legacy     bool           `json:"legacy,omitempty"`
}

// InvalidRun is a run excluded from the means, with the runs that rerun it.
type InvalidRun struct {
	Run
	Reruns []string `json:"reruns"`
}

// Row is one agent on one track.
type Row struct {
	Agent       Agent        `json:"agent"`
	Rank        int          `json:"rank"` // 0: not ranked (no valid run, or a withdrawn track)
	Tied        bool         `json:"tied"` // another row has the same rank
	N           int          `json:"valid_seeds"`
	Required    int64        `json:"required_seeds"`
	Provisional bool         `json:"provisional"`
	MeanPct     *float64     `json:"mean"`          // percent; null without a valid run
	MeanExact   string       `json:"mean_fraction"` // the exact mean fraction of questions, "a/b" ("" without a valid run)
	SEPct       *float64     `json:"se"`            // percent; null when n < 2
	Failed      int          `json:"failed"`
	Runs        []Run        `json:"runs"` // valid runs (graded and failed), by seed
	Invalid     []InvalidRun `json:"invalid_runs"`
	BitsPerByte *float64     `json:"bits_per_byte"`   // mean over runs that measured it
	Validation  *float64     `json:"best_validation"` // mean of each run's best validation percent
	// Cost is the mean cost of the row's valid runs ± SE, where every one of them was priced
	// in one currency; nil otherwise.
	Cost *CostStat `json:"cost,omitempty"`
	// SignedBy are the trusted keys (their file names) that signed the row's runs, valid and
	// invalid: on a cluster where each node signs with its own key, which nodes it came from.
	SignedBy []string `json:"signed_by"`
	// TestBuild: a run of the row came from a test build of sealrund (test seams compiled in).
	TestBuild bool `json:"test_build"`
	// Ledger is what the given run ledgers say of the row (--ledger); nil without ledgers.
	Ledger *RowLedger `json:"ledger,omitempty"`
	// Pauses counts the pauses granted to the row's valid runs, and their length in all (a
	// human row's; nil: none).
	Pauses *PauseStat `json:"pauses,omitempty"`

	// Exact values: the mean fraction of questions and the squared standard error.
	mean, se2 *big.Rat
}

// PauseStat is the pauses of a row's valid runs.
type PauseStat struct {
	Count   int     `json:"count"`
	Seconds float64 `json:"seconds"` // in all
}

// CostStat is a row's mean cost per run.
type CostStat struct {
	Mean     float64  `json:"mean"`
	SE       *float64 `json:"se"` // null when n < 2
	Currency string   `json:"currency"`
	Tokens   float64  `json:"mean_tokens"` // input and output tokens, mean per run
}

// Table is one track's leaderboard.
type Table struct {
	Track         attest.TrackInfo `json:"track"`
	Questions     int              `json:"questions"`
	SeedsRequired int64            `json:"seeds_required"`
	Ranked        bool             `json:"ranked"` // false for a withdrawn track
	Rows          []Row            `json:"rows"`
	Warnings      []string         `json:"warnings"`
}

// Board is every table, and what was not counted.
type Board struct {
	Format   string      `json:"format"`
	Tables   []Table     `json:"tables"`
	Rejected []Rejection `json:"rejected"`
	Skipped  []Rejection `json:"skipped"`
	Keys     []KeyInfo   `json:"keys"`
	Rules    []string    `json:"rules"`
	// Ledgers are the run ledgers the rows were accounted against (those not rejected).
	Ledgers []LedgerInfo `json:"ledgers,omitempty"`
	// Unpublished are runs the ledgers hold of a track on the board whose agent has no row (every
	// attestation of it withheld).
	Unpublished []string `json:"unpublished_runs,omitempty"`
	// Exports, set by publish, links each run's trajectory.json (ATIF) in the HTML board: a
	// publication has one beside each run's transcript.
	Exports bool `json:"-"`
}

// KeyInfo names a trusted key.
type KeyInfo struct {
	Name  string `json:"name"`
	KeyID string `json:"key_id"`
}

// Format is the version of the JSON output (leaderboard/FORMAT.md).
const Format = "sealrun-leaderboard/v1"

// Rules are the rules Build applies, printed in every output's footer.
var Rules = []string{
	"Only attestations that verified with a trusted key count; two attestations of one run count once, two different ones for one run are both rejected.",
	"One table per track id; tracks are never merged. Legacy tracks are labelled; withdrawn tracks are shown unranked.",
	"A row is one agent: scaffold, model and reasoning effort (each effort its own row).",
	"Score of a run = passed / questions on the hidden exam. Failed runs (the agent's fault) count with what they scored; invalid runs (the infrastructure's) are excluded and listed with their reruns.",
	"Mean over the valid runs; SE = sample standard deviation / sqrt(n); with n = 1 there is no SE (shown as —).",
	"Cost = the run's model tokens at the price its host attested (per provider and model, with the date the prices were taken); a row's cost is the mean over its valid runs ± SE, shown only when every one of them was priced in one currency.",
	"A row is official with at least the track's required valid seeds, provisional below.",
	"Rank = 1 + the number of rows whose whole interval [mean − SE, mean + SE] lies above this row's interval (a row with n = 1 is the point mean). Rows whose intervals overlap are never ranked apart; '=' marks a shared rank. Ties are not formed transitively: A may tie B and B tie C while A ranks above C.",
	"Means and SEs are exact fractions until display; percentages are rounded half away from zero to one decimal (bits per byte to three).",
	"Bits per byte and the best validation score are diagnostics, never the score: a validation score far above the hidden score is the overfitting signal.",
}

// LedgerRule is the rule added when the board is checked against run ledgers.
const LedgerRule = "With --ledger: each host's run ledger (a signed Merkle log of every run it accepted and how each ended) must agree with every head the attestations carry; a row is accounted for when every run of its track and agent in the ledgers ended and was published, and every published run is in a ledger. A forked, truncated or edited ledger is rejected."

// Build aggregates verified entries into one table per track.
func Build(in *Inputs, keys []Key) *Board {
	b := &Board{Format: Format, Rejected: orEmpty(in.Rejected), Skipped: orEmpty(in.Skipped), Rules: Rules}
	for _, k := range keys {
		b.Keys = append(b.Keys, KeyInfo{k.Name, k.KeyID})
	}
	byTrack := map[string][]Entry{}
	var ids []string
	for _, e := range in.Entries {
		if e.Predicate.Task != nil {
			b.Skipped = append(b.Skipped, Rejection{e.Path, fmt.Sprintf("a run of the AIRS task %s, not of an exam: its board is sealrun leaderboard --suite airs", e.Predicate.Task.Name)})
			continue
		}
		id := e.Predicate.Track.ID
		if _, ok := byTrack[id]; !ok {
			ids = append(ids, id)
		}
		byTrack[id] = append(byTrack[id], e)
	}
	amends := b.amendmentsByRun(in)
	for _, id := range ids {
		b.Tables = append(b.Tables, buildTable(byTrack[id], in.HumanBaseline, amends))
	}
	if len(in.Ledgers) > 0 {
		n := len(b.Rejected)
		good := b.checkLedgers(in)
		b.accountRows(in, good, len(b.Rejected) > n)
		b.Rules = append(slices.Clone(b.Rules), LedgerRule)
	}
	statusOrder := map[string]int{"active": 0, "legacy": 1, "withdrawn": 2}
	sort.SliceStable(b.Tables, func(i, j int) bool {
		ti, tj := b.Tables[i].Track, b.Tables[j].Track
		if statusOrder[ti.Status] != statusOrder[tj.Status] {
			return statusOrder[ti.Status] < statusOrder[tj.Status]
		}
		if ti.Name != tj.Name {
			return ti.Name < tj.Name
		}
		if ti.Version != tj.Version {
			return ti.Version < tj.Version
		}
		return ti.ID < tj.ID
	})
	return b
}

func orEmpty(r []Rejection) []Rejection {
	if r == nil {
		return []Rejection{}
	}
	return r
}

// buildTable builds one track's table from its verified entries: a row per agent with its valid
// seeds, failed runs and invalid runs (each with the runs that rerun it), then the rows' statistics
// and ranks. It is long because it sorts each kind of run into its row in one pass.
func buildTable(entries []Entry, humanBaseline bool, amends map[string][]RunAmendment) Table {
	p0 := entries[0].Predicate
	t := Table{Track: p0.Track, Questions: p0.Exam.Questions, SeedsRequired: p0.Track.SeedsRequired, Ranked: p0.Track.Status != "withdrawn", Warnings: []string{}}
	switch p0.Track.Status {
	case "legacy":
		t.Warnings = append(t.Warnings, "legacy track: its results verify and are labelled legacy")
	case "withdrawn":
		t.Warnings = append(t.Warnings, "withdrawn track: its results verify but are not ranked")
	}
	rows := map[Agent]*Row{}
	var order []Agent
	people := map[Agent][]string{}  // a human baseline row's people
	reruns := map[string][]string{} // invalid run id -> the runs that rerun it
	for _, e := range entries {
		if r := e.Predicate.Run.RerunOf; r != "" {
			reruns[r] = append(reruns[r], e.Predicate.Run.ID)
		}
	}
	for _, e := range entries {
		p := e.Predicate
		a := Agent{Scaffold: p.Scaffold.Name, ScaffoldVersion: p.Scaffold.Version, Model: p.Agent.Model, Effort: p.Agent.ReasoningEffort}
		if handle, ok := strings.CutPrefix(a.Model, "human/"); ok && humanBaseline {
			a.Model = "human/baseline"
			if !slices.Contains(people[a], handle) {
				people[a] = append(people[a], handle)
			}
		}
		row := rows[a]
		if row == nil {
			row = &Row{Agent: a, Required: t.SeedsRequired, Runs: []Run{}, Invalid: []InvalidRun{}}
			rows[a] = row
			order = append(order, a)
		}
		if p.Build != nil && p.Build.TestSeams {
			row.TestBuild = true
		}
		run := Run{ID: p.Run.ID, RerunOf: p.Run.RerunOf, Seed: p.Seed, Status: p.Result.Status, Reason: p.Result.Reason,
			Passed: p.Result.Passed, Questions: p.Result.Questions, BitsPerByte: p.Result.BitsPerByte, Key: e.Key, KeyID: e.KeyID, Path: e.Path}
		if u := p.Usage; u != nil {
			n := u.Tokens.Total()
			run.Tokens = &n
			if c := u.Cost; c != nil {
				v := c.Amount
				run.Cost, run.Currency = &v, c.Price.Currency
			}
		}
		run.Pauses = p.Timeline.Pauses
		run.People = peopleOf(p.Human)
		for _, s := range p.Submissions.History {
			if run.BestValidation == nil || s.ValidationScore > *run.BestValidation {
				v := s.ValidationScore
				run.BestValidation = &v
			}
		}
		run.Amendments = amends[p.Run.ID]
		invalidated, legacy := amendedStatus(run.Amendments)
		run.Legacy = legacy != nil
		switch {
		case p.Result.Status == outcome.Invalid || invalidated != nil:
			if invalidated != nil {
				run.Reason = "invalidated by amendment: " + invalidated.Reason
			}
			rr := reruns[p.Run.ID]
			sort.Strings(rr)
			row.Invalid = append(row.Invalid, InvalidRun{Run: run, Reruns: append([]string{}, rr...)})
		default:
			row.Runs = append(row.Runs, run)
			if n := len(run.Pauses); n > 0 {
				if row.Pauses == nil {
					row.Pauses = &PauseStat{}
				}
				row.Pauses.Count += n
				row.Pauses.Seconds += p.Timeline.PausedFor().Seconds()
			}
			if p.Result.Status == outcome.Failed {
				row.Failed++
			}
		}
	}
	for _, a := range order {
		row := rows[a]
		if ps := people[a]; len(ps) > 0 {
			slices.Sort(ps)
			row.Agent.Model = "human/baseline: " + strings.Join(ps, ", ")
		}
		sort.Slice(row.Runs, func(i, j int) bool {
			if row.Runs[i].Seed != row.Runs[j].Seed {
				return row.Runs[i].Seed < row.Runs[j].Seed
			}
			return row.Runs[i].ID < row.Runs[j].ID
		})
		sort.Slice(row.Invalid, func(i, j int) bool { return row.Invalid[i].ID < row.Invalid[j].ID })
		row.SignedBy = []string{}
		for _, r := range row.Runs {
			row.SignedBy = append(row.SignedBy, r.Key)
		}
		for _, r := range row.Invalid {
			row.SignedBy = append(row.SignedBy, r.Key)
		}
		slices.Sort(row.SignedBy)
		row.SignedBy = slices.Compact(row.SignedBy)
		row.stats()
		t.Rows = append(t.Rows, *row)
	}
	t.rank()
	return t
}

// stats computes the exact mean and squared standard error, then their display values.
func (r *Row) stats() {
	r.N = len(r.Runs)
	r.Provisional = int64(r.N) < r.Required
	if r.N == 0 {
		return
	}
	xs := make([]*big.Rat, r.N)
	for i, run := range r.Runs {
		xs[i] = big.NewRat(int64(run.Passed), int64(max(1, run.Questions)))
	}
	r.mean, r.se2 = stats.MeanSE2Rat(xs)
	if r.N > 1 {
		se, _ := r.se2.Float64()
		v := 100 * math.Sqrt(se)
		r.SEPct = &v
	}
	m, _ := r.mean.Float64()
	m *= 100
	r.MeanPct = &m
	r.MeanExact = r.mean.RatString()
	var bpb []float64
	var val []float64
	for _, run := range r.Runs {
		if run.BitsPerByte != nil {
			bpb = append(bpb, *run.BitsPerByte)
		}
		if run.BestValidation != nil {
			val = append(val, *run.BestValidation)
		}
	}
	r.BitsPerByte, r.Validation = meanOf(bpb), meanOf(val)
	r.Cost = costOf(r.Runs)
}

// costOf is the mean cost of runs ± SE, when each was priced, all in one currency.
func costOf(runs []Run) *CostStat {
	var xs []float64
	var tokens float64
	cur := ""
	for _, run := range runs {
		if run.Cost == nil || run.Tokens == nil || (cur != "" && run.Currency != cur) {
			return nil
		}
		cur = run.Currency
		xs = append(xs, *run.Cost)
		tokens += float64(*run.Tokens)
	}
	if len(xs) == 0 {
		return nil
	}
	mean, se := stats.MeanSE(xs)
	c := &CostStat{Mean: mean, Currency: cur, Tokens: tokens / float64(len(xs))}
	if len(xs) > 1 {
		c.SE = &se
	}
	return c
}

func meanOf(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	return &m
}

// above reports whether row a's interval lies wholly above row b's: mean_a − se_a > mean_b +
// se_b, decided exactly: with d = mean_a − mean_b > 0, d > se_a + se_b ⇔ L = d² − se_a² − se_b²
// > 0 and L² > 4·se_a²·se_b².
func above(a, b *Row) bool {
	d := new(big.Rat).Sub(a.mean, b.mean)
	if d.Sign() <= 0 {
		return false
	}
	l := new(big.Rat).Mul(d, d)
	l.Sub(l, a.se2)
	l.Sub(l, b.se2)
	if l.Sign() <= 0 {
		return false
	}
	l2 := new(big.Rat).Mul(l, l)
	r := new(big.Rat).Mul(a.se2, b.se2)
	r.Mul(r, big.NewRat(4, 1))
	return l2.Cmp(r) > 0
}

// rank orders rows by mean (exact, then by name) and ranks them (Rules).
func (t *Table) rank() {
	sort.SliceStable(t.Rows, func(i, j int) bool {
		a, b := &t.Rows[i], &t.Rows[j]
		switch {
		case a.mean == nil || b.mean == nil:
			if (a.mean == nil) != (b.mean == nil) {
				return b.mean == nil
			}
		case a.mean.Cmp(b.mean) != 0:
			return a.mean.Cmp(b.mean) > 0
		}
		return strings.Compare(a.Agent.Name(), b.Agent.Name()) < 0
	})
	if !t.Ranked {
		return
	}
	count := map[int]int{}
	for i := range t.Rows {
		r := &t.Rows[i]
		if r.mean == nil {
			continue
		}
		r.Rank = 1
		for j := range t.Rows {
			if o := &t.Rows[j]; j != i && o.mean != nil && above(o, r) {
				r.Rank++
			}
		}
		count[r.Rank]++
	}
	for i := range t.Rows {
		t.Rows[i].Tied = t.Rows[i].Rank > 0 && count[t.Rows[i].Rank] > 1
	}
}

// RoundHalfAway rounds x to the given decimals, halves away from zero (the display rule).
func RoundHalfAway(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

// MeanText is the mean percent to one decimal, rounded exactly from the fraction (half away
// from zero), or "—".
func (r *Row) MeanText() string {
	if r.mean == nil {
		return "—"
	}
	return pctText(r.mean)
}

// pctText formats a fraction as a percent with one decimal, rounding the exact value.
func pctText(x *big.Rat) string {
	q := new(big.Rat).Mul(x, big.NewRat(1000, 1)) // tenths of a percent
	neg := q.Sign() < 0
	if neg {
		q.Neg(q)
	}
	q.Add(q, big.NewRat(1, 2))
	n := new(big.Int).Quo(q.Num(), q.Denom()) // floor(q + 1/2)
	s := n.String()
	if len(s) < 2 {
		s = "0" + s
	}
	out := s[:len(s)-1] + "." + s[len(s)-1:]
	if neg && n.Sign() != 0 {
		out = "-" + out
	}
	return out
}

// SEText is the standard error in percent to one decimal, or "—" with fewer than two runs.
func (r *Row) SEText() string {
	if r.SEPct == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", RoundHalfAway(*r.SEPct, 1))
}

// peopleOf says who a human run was for and who attached, as a board's row details show it:
// "for bob; attached: bob (person) 2×, carol (proctor) 1×, root (operator, took the terminal
// over: fire drill) 1×".
func peopleOf(h *attest.Human) string {
	if h == nil {
		return ""
	}
	s := "for " + h.Person.Account
	if h.Person.Key != "" {
		s += " (key " + h.Person.Key + ")"
	}
	type who struct{ account, role, takeover string }
	var order []who
	n := map[who]int{}
	for _, a := range h.Attaches {
		name, _, _ := strings.Cut(a.Account, " (")
		w := who{name, a.Role, a.Takeover}
		if n[w] == 0 {
			order = append(order, w)
		}
		n[w]++
	}
	if len(order) == 0 {
		return s + "; no one attached"
	}
	var parts []string
	for _, w := range order {
		p := w.account + " (" + w.role
		if w.takeover != "" {
			p += ", took the terminal over: " + w.takeover
		}
		parts = append(parts, fmt.Sprintf("%s) %d×", p, n[w]))
	}
	s += "; attached: " + strings.Join(parts, ", ")
	if h.AttachesOmitted > 0 {
		s += fmt.Sprintf(" and %d more", h.AttachesOmitted)
	}
	return s
}
