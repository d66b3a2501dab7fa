package hostconfig

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/policy"
)

// PricesConfig is [prices]: what each model costs on this host, per million tokens, in one
// currency, and when and where those prices were read. A run's tokens are priced with its
// model's entry (report.json, the attestation, the transcript, the leaderboard), and a track's
// max_cost needs one.
//
//	[prices]
//	currency = "USD"
//	taken = "2026-11-20"
//	source = "https://openai.com/api/pricing/"
//	[prices.models."openai/gpt-5.1"]
//	input = 1.25
//	cached_input = 0.125
//	output = 10.0
type PricesConfig struct {
	Currency string                `toml:"currency"`
	Taken    string                `toml:"taken"`
	Source   string                `toml:"source"`
	Models   map[string]PriceEntry `toml:"models"`
}

// PriceEntry is one model's prices per million tokens. cached_input and cache_write default to
// input; Currency, when given, must be the table's.
type PriceEntry struct {
	Input       *float64 `toml:"input"`
	CachedInput *float64 `toml:"cached_input"`
	CacheWrite  *float64 `toml:"cache_write"`
	Output      *float64 `toml:"output"`
	Currency    string   `toml:"currency"`
}

// validate reports every problem of [prices], as validate's bad does.
func (pc PricesConfig) validate(providers map[string]controller.ProviderConfig, bad func(key, format string, args ...any)) {
	if len(pc.Models) == 0 {
		if pc.Currency != "" || pc.Taken != "" || pc.Source != "" {
			bad("prices.models", "missing; [prices] prices models: add [prices.models.\"PROVIDER/MODEL\"] with input and output per million tokens")
		}
		return
	}
	if !policy.CurrencyRE.MatchString(pc.Currency) {
		bad("prices.currency", "%q is not a currency code; give the three capital letters of ISO 4217, for example \"USD\"", pc.Currency)
	}
	if d, err := time.Parse(time.DateOnly, pc.Taken); err != nil {
		bad("prices.taken", "%q is not a date; give the day the prices were read from the provider, as \"2026-11-20\"", pc.Taken)
	} else if d.After(time.Now().Add(24 * time.Hour)) {
		bad("prices.taken", "%s is in the future; give the day the prices were read", pc.Taken)
	}
	keys := make([]string, 0, len(pc.Models))
	for k := range pc.Models {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, key := pc.Models[k], fmt.Sprintf("prices.models.%q", k)
		a, err := controller.ParseAgent(k)
		switch {
		case err != nil || a.Effort != "":
			bad(key, "%q does not name a model; write the key as \"PROVIDER/MODEL\" as --agent does, without @EFFORT (the effort does not change the price)", k)
		case a.Provider == NoProvider:
			bad(key, "provider %q has no model to price", NoProvider)
		default:
			if _, ok := providers[a.Provider]; !ok {
				bad(key, "provider %q is not configured; add [providers.%s] or fix the key", a.Provider, a.Provider)
			}
		}
		for _, f := range []struct {
			name     string
			v        *float64
			required bool
		}{{"input", e.Input, true}, {"cached_input", e.CachedInput, false}, {"cache_write", e.CacheWrite, false}, {"output", e.Output, true}} {
			switch {
			case f.v == nil && f.required:
				bad(key+"."+f.name, "missing; give the price per million %s tokens in %s", strings.ReplaceAll(f.name, "_", " "), pc.Currency)
			case f.v != nil && (*f.v < 0 || *f.v > 1e6):
				bad(key+"."+f.name, "%v; give a price per million tokens from 0 to 1000000", *f.v)
			}
		}
		if e.Currency != "" && e.Currency != pc.Currency {
			bad(key+".currency", "%q, but [prices] is in %q: one table, one currency; convert the prices to %s", e.Currency, pc.Currency, pc.Currency)
		}
	}
}

// Price is the host's price of an agent's model, or nil.
func (pc PricesConfig) Price(a controller.Agent) *policy.Price {
	e, ok := pc.Models[a.Provider+"/"+a.Model]
	if !ok || e.Input == nil || e.Output == nil {
		return nil
	}
	p := &policy.Price{Currency: pc.Currency, Input: *e.Input, CachedInput: *e.Input, CacheWrite: *e.Input, Output: *e.Output, Taken: pc.Taken, Source: pc.Source}
	if e.CachedInput != nil {
		p.CachedInput = *e.CachedInput
	}
	if e.CacheWrite != nil {
		p.CacheWrite = *e.CacheWrite
	}
	return p
}
