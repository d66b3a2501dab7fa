package attest

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/policy"
)

// EntryTokens reads a gateway audit entry's tokens; ok is false for any other entry.
func EntryTokens(line []byte) (t policy.Tokens, ok bool) {
	var e struct {
		Kind  string      `json:"kind"`
		Usage audit.Usage `json:"usage"`
	}
	if json.Unmarshal(line, &e) != nil || e.Kind != audit.KindGateway {
		return policy.Tokens{}, false
	}
	return e.Usage.Tokens(), true
}

// UsageFromAudit sums a run's model use from its audit log: every gateway entry is a request, and
// its tokens are added; the cost is the sum's at price, when there is one. It also returns the
// log's head and entry count, as audit.Head does.
func UsageFromAudit(r io.Reader, price *policy.Price) (u *Usage, head string, entries int, err error) {
	u = &Usage{}
	head, entries, err = audit.Scan(r, func(line []byte) {
		if t, ok := EntryTokens(line); ok {
			u.Requests++
			u.Tokens.Add(t)
		}
	})
	if err != nil {
		return nil, "", 0, err
	}
	if price != nil {
		u.Cost = &Cost{Amount: price.Cost(u.Tokens), Price: *price}
	}
	return u, head, entries, nil
}

// checkUsageAgainstAudit checks that the attested usage is the audit log's.
func checkUsageAgainstAudit(att, got *Usage) error {
	if att == nil {
		return nil
	}
	if att.Requests != got.Requests || att.Tokens != got.Tokens {
		return failf(ReasonAudit, "the attestation says the run made %d model requests using %s; its audit log's gateway entries add up to %d using %s",
			att.Requests, tokensText(att.Tokens), got.Requests, tokensText(got.Tokens))
	}
	return nil
}

func tokensText(t policy.Tokens) string {
	return fmt.Sprintf("%d input (%d cached, %d cache writes), %d output (%d reasoning) tokens", t.Input, t.CachedInput, t.CacheWrite, t.Output, t.Reasoning)
}
