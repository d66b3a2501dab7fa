package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/policy"
)

// usageLog is an audit log of calls and gateway entries with their token counts, as the gateway
// writes them.
func usageLog() string {
	var b strings.Builder
	for i := range 6 {
		if i%2 == 0 {
			fmt.Fprintf(&b, `{"seq":%d,"kind":"call","argv":["python","train.py"],"exit":0}`+"\n", i+1)
			continue
		}
		fmt.Fprintf(&b, `{"seq":%d,"kind":"gateway","request":%d,"status":200,"usage":{"prompt":1000,"completion":200,"reasoning":50,"cached_prompt":600,"cache_write":100}}`+"\n", i+1, i/2+1)
	}
	b.WriteString(`{"seq":7,"kind":"gateway","request":4,"status":403,"refused":"the run's token budget is spent","usage":{"prompt":0,"completion":0,"reasoning":0}}` + "\n")
	return b.String()
}

var testPrice = policy.Price{Currency: "USD", Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15, Taken: "2026-11-01", Source: "https://provider.example/pricing"}

// The run's usage is its audit log's gateway entries summed; the verifier adds them up again, and
// a cost must be the tokens at the attested price.
func TestUsage(t *testing.T) {
	u, head, n, err := UsageFromAudit(strings.NewReader(usageLog()), &testPrice)
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Tokens{Input: 3000, CachedInput: 1800, CacheWrite: 300, Output: 600, Reasoning: 150}
	if u.Requests != 4 || u.Tokens != want || n != 7 {
		t.Fatalf("usage %+v (%d entries)", u, n)
	}
	if c := u.Cost.Amount; c != testPrice.Cost(want) || c != 0.013365 {
		t.Errorf("cost %v", c)
	}
	st, _ := fixture(t, 3, 7)
	st.Predicate.Audit = Audit{Head: head, Entries: n}
	st.Predicate.Budget.MaxTokens, st.Predicate.Budget.MaxCost = 4000, "5 USD"
	st.Predicate.Usage = u
	env := sign(t, st, "ed25519")
	v := verifier(t, "ed25519")
	got, err := Verify(env, v, WithAuditLog(strings.NewReader(usageLog())))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(got.Checks, ","), "model usage") {
		t.Errorf("checks %v", got.Checks)
	}
	// The schema takes it.
	canon, _ := st.Canonical()
	var doc struct{ Predicate json.RawMessage }
	json.Unmarshal(canon, &doc)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(doc.Predicate))
	if err := compileSchema(t).Validate(inst); err != nil {
		t.Errorf("schema: %v", err)
	}

	// Counts that are not the log's: refused, with both figures.
	fewer := *u
	fewer.Tokens.Output -= 100
	fewer.Cost = &Cost{Amount: testPrice.Cost(fewer.Tokens), Price: testPrice}
	st.Predicate.Usage = &fewer
	_, err = Verify(sign(t, st, "ed25519"), v, WithAuditLog(strings.NewReader(usageLog())))
	if r := reason(t, err); r != ReasonAudit || !strings.Contains(err.Error(), "500 output (150 reasoning)") || !strings.Contains(err.Error(), "600 output") {
		t.Errorf("undercounted usage: %s %v", r, err)
	}
	for _, tc := range []struct {
		name string
		edit func(u *Usage)
		msg  string
	}{
		{"cost not the tokens at the price", func(u *Usage) { u.Cost.Amount /= 2 }, "usage.cost.amount"},
		{"cached beyond input", func(u *Usage) { u.Tokens.CachedInput = u.Tokens.Input + 1 }, "usage.tokens"},
		{"reasoning beyond output", func(u *Usage) { u.Tokens.Reasoning = u.Tokens.Output + 1 }, "usage.tokens.reasoning"},
		{"negative", func(u *Usage) { u.Requests = -1 }, "negative"},
		{"negative price", func(u *Usage) { u.Cost.Price.Output = -1 }, "a price is negative"},
		{"currency not a code", func(u *Usage) { u.Cost.Price.Currency = "dollars" }, "not a currency code"},
		{"currency not the bound's", func(u *Usage) { u.Cost.Price.Currency = "EUR" }, "the track bounds the cost in USD"},
	} {
		c := *u
		cost := *u.Cost
		c.Cost = &cost
		tc.edit(&c)
		st.Predicate.Usage = &c
		if err := CheckPredicate(st.Predicate, st.Subject); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	st.Predicate.Usage = u
	st.Predicate.Budget.MaxCost = "5 dollars"
	if err := CheckPredicate(st.Predicate, st.Subject); err == nil || !strings.Contains(err.Error(), "budget.max_cost") {
		t.Errorf("bad max_cost: %v", err)
	}
}
