package attest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/audit"
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

// TestHumanAgainstAudit: the attestation's attaches are the audit log's, read from the records
// sealrund writes (a reason that says anything included), each from its attach to its detach;
// one that is not, or a count that is not theirs, fails naming why.
func TestHumanAgainstAudit(t *testing.T) {
	const key = "SHA256:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	at := func(s int) string { return t0.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano) }
	bob := "bob (uid 1001, pid 42) with key " + key + ", the person"
	take := "root (uid 0, pid 9), an operator taking the terminal over: bob asked, the person was ill, a proctor"
	lines := []string{
		`{"kind":"attach","time":"` + at(1) + `","event":"attach","user":"` + bob + `"}`,
		`{"kind":"attach","time":"` + at(2) + `","event":"watch","user":"carol (uid 1003, pid 7), a proctor"}`,
		`{"kind":"attach","time":"` + at(3) + `","event":"detach","user":"` + bob + `","reason":"another attach took the terminal"}`,
		`{"kind":"attach","time":"` + at(3) + `","event":"attach","user":"` + take + `"}`,
		`{"kind":"attach","time":"` + at(4) + `","event":"watch","user":"root (uid 0, pid 9), an operator"}`,
		`{"kind":"attach","time":"` + at(5) + `","event":"detach","user":"` + take + `","reason":"detached"}`,
		`{"kind":"attach","time":"` + at(6) + `","event":"attach","user":"alice (uid 1002, pid 5)"}`, // before people were bound: not read
	}
	var log bytes.Buffer
	l, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		var body map[string]any
		json.Unmarshal([]byte(line), &body)
		kind := body["kind"].(string)
		delete(body, "kind")
		if _, _, err := l.Append(kind, body); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	data, _ := os.ReadFile(l.Path())
	log.Write(data)
	facts, err := ReadAudit(bytes.NewReader(log.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	tt := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	want := []HumanAttach{
		{Account: "bob (uid 1001)", Key: key, Role: RolePerson, Start: tt(1), End: tt(3)},
		{Account: "carol (uid 1003)", Role: RoleProctor, Watch: true, Start: tt(2), End: end},
		{Account: "root (uid 0)", Role: RoleOperator, Takeover: "bob asked, the person was ill, a proctor", Start: tt(3), End: tt(5)},
		{Account: "root (uid 0)", Role: RoleOperator, Watch: true, Start: tt(4), End: end},
	}
	listed, omitted := ListAttaches(facts.Attaches, end)
	if len(listed) != len(want) || omitted != 0 {
		t.Fatalf("read %+v, %d omitted", listed, omitted)
	}
	for i := range want {
		if listed[i] != want[i] {
			t.Errorf("attach %d: %+v, want %+v", i, listed[i], want[i])
		}
	}
	h := &Human{Person: Person{Account: "bob", Key: key}, Attaches: want}
	if err := checkHumanAgainstAudit(h, facts.Attaches, end); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(h *Human)
		say  string
	}{
		{"an attach not logged", func(h *Human) { h.Attaches[1].Account = "dave (uid 1004)" }, "human.attaches[1] (dave (uid 1004) as proctor) is not the run's audit log's"},
		{"a take-over's reason changed", func(h *Human) { h.Attaches[2].Takeover = "routine" }, "human.attaches[2]"},
		{"a watch made shorter", func(h *Human) { h.Attaches[3].End = tt(5) }, "human.attaches[3] (root (uid 0) as operator) is from"},
		{"one dropped", func(h *Human) { h.Attaches = h.Attaches[:3] }, "accounts for 3 attaches"},
		{"one counted twice", func(h *Human) { h.AttachesOmitted = 1 }, "accounts for 5 attaches"},
		{"one made up", func(h *Human) { h.Attaches = append(h.Attaches, h.Attaches[0]) }, "human.attaches[4]"},
	} {
		hh := &Human{Person: h.Person, Attaches: append([]HumanAttach(nil), want...)}
		c.edit(hh)
		if err := checkHumanAgainstAudit(hh, facts.Attaches, end); err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("%s: %v; want %q", c.name, err, c.say)
		}
	}
	// A person attaching in a loop: 256 of theirs listed, the rest counted, and the operator's
	// take-over after them listed still.
	var many []HumanAttach
	for range 300 {
		many = append(many, want[0])
	}
	many = append(many, want[2])
	listed, omitted = ListAttaches(many, end)
	if len(listed) != MaxHumanAttaches+1 || omitted != 300-MaxHumanAttaches || listed[MaxHumanAttaches].Role != RoleOperator {
		t.Errorf("a loop of attaches: %d listed, %d omitted", len(listed), omitted)
	}
}

// TestAttachUser: what sealrund writes of an attach is what parseAttach reads back.
func TestAttachUser(t *testing.T) {
	const key = "SHA256:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct{ key, role, takeover, want string }{
		{key, RolePerson, "", "bob (uid 1001, pid 42) with key " + key + ", the person"},
		{"", RoleProctor, "", "bob (uid 1001, pid 42), a proctor"},
		{"", RoleOperator, "", "bob (uid 1001, pid 42), an operator"},
		{"", RoleOperator, "x, the person", "bob (uid 1001, pid 42), an operator taking the terminal over: x, the person"},
	} {
		u := AttachUser("bob (uid 1001, pid 42)", c.key, c.role, c.takeover)
		if u != c.want {
			t.Errorf("AttachUser = %q, want %q", u, c.want)
		}
		a, ok := parseAttach(audit.Attach{Event: audit.AttachStart, User: u})
		if !ok || a.Account != "bob (uid 1001)" || a.Key != c.key || a.Role != c.role || a.Takeover != c.takeover {
			t.Errorf("%q read back as %+v", u, a)
		}
	}
}
