package policy

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Tokens is model usage: one request's, as the provider reported it, or a run's sum.
type Tokens struct {
	Input       int64 `json:"input"`        // every input token, cached ones included
	CachedInput int64 `json:"cached_input"` // of Input: read from the provider's prompt cache
	CacheWrite  int64 `json:"cache_write"`  // of Input: written to the prompt cache (Anthropic)
	Output      int64 `json:"output"`       // every output token, reasoning included
	Reasoning   int64 `json:"reasoning"`    // of Output: reasoning ("thinking") tokens
}

// Add adds u to t.
func (t *Tokens) Add(u Tokens) {
	t.Input += u.Input
	t.CachedInput += u.CachedInput
	t.CacheWrite += u.CacheWrite
	t.Output += u.Output
	t.Reasoning += u.Reasoning
}

// Total is what a track's max_tokens counts: input (cached included) and output.
func (t Tokens) Total() int64 { return t.Input + t.Output }

// Usage is a run's model use: its gateway requests (refused ones included) and their tokens, as
// the provider reported them, summed from the run's audit log; and their cost at the host's price
// for the run's model, when the host had one. report.json and the attestation carry it.
type Usage struct {
	Requests int    `json:"requests"`
	Tokens   Tokens `json:"tokens"`
	Cost     *Cost  `json:"cost,omitempty"`
}

// Cost is a run's tokens priced: Amount is Price.Cost(Tokens).
type Cost struct {
	Amount float64 `json:"amount"`
	Price  Price   `json:"price"`
}

// Price is what one model costs, per million tokens, in one currency. CachedInput and
// CacheWrite are the price of those parts of the input (equal to Input where the provider makes
// no difference).
type Price struct {
	Currency    string  `json:"currency"`
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	CacheWrite  float64 `json:"cache_write"`
	Output      float64 `json:"output"`
	// Taken is the date the prices were read from the provider (YYYY-MM-DD); Source, where.
	Taken  string `json:"taken"`
	Source string `json:"source,omitempty"`
}

// Cost is what t costs at p: uncached input, cached input, cache writes and output, each at its
// price, rounded to a millionth of the currency unit.
func (p Price) Cost(t Tokens) float64 {
	fresh := max(0, t.Input-t.CachedInput-t.CacheWrite)
	c := (float64(fresh)*p.Input + float64(t.CachedInput)*p.CachedInput + float64(t.CacheWrite)*p.CacheWrite + float64(t.Output)*p.Output) / 1e6
	return RoundMoney(c)
}

// RoundMoney rounds an amount to a millionth of its unit: how sealrun writes every cost, so that
// a verifier's sum is the same figure.
func RoundMoney(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// FormatMoney writes an amount for reading: four decimals, or six below a hundredth.
func FormatMoney(v float64) string {
	if v != 0 && math.Abs(v) < 0.01 {
		return strconv.FormatFloat(v, 'f', 6, 64)
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// Money is an amount in one currency: a track's max_cost ("25.00 USD").
type Money struct {
	Amount   float64
	Currency string
}

// String writes m as a track writes it.
func (m Money) String() string {
	return strconv.FormatFloat(m.Amount, 'f', -1, 64) + " " + m.Currency
}

// IsZero reports whether m is unset.
func (m Money) IsZero() bool { return m.Currency == "" }

var moneyRE = regexp.MustCompile(`^([0-9]{1,9})(\.[0-9]{1,6})? ([A-Z]{3})$`)

// CurrencyRE is a currency code: three capital letters (ISO 4217, USD, EUR).
var CurrencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// ParseMoney parses "AMOUNT CUR": a decimal amount above zero (at most six decimals) and a
// three-letter currency code, for example "25.00 USD". A track holds it as a string: its TOML
// has no floats, so that its canonical form (and its id) is exact.
func ParseMoney(s string) (Money, error) {
	m := moneyRE.FindStringSubmatch(s)
	if m == nil {
		return Money{}, fmt.Errorf("%q is not an amount and a currency; write it as \"25.00 USD\" (a decimal amount, a space, the three-letter currency code)", s)
	}
	v, err := strconv.ParseFloat(m[1]+m[2], 64)
	if err != nil || v <= 0 {
		return Money{}, fmt.Errorf("%q: the amount must be above zero", s)
	}
	return Money{Amount: v, Currency: strings.ToUpper(m[3])}, nil
}
