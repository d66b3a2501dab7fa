// Package runner owns compute calls: one audited runner container per call, per-call limits from
// the budget, the time-left prefix on every response, refusal in the reserve window, and the audit
// entries each call appends.
package runner
