// Package runner owns compute calls and the agent socket that serves them: one audited runner
// container per call, per-call limits from the budget, the time-left line on every response,
// refusal in the reserve window, output streamed live and kept under calls/<n>.log, and one
// audit entry per call. The agent-facing protocol (HTTP+JSON requests, framed streamed
// responses) is in PROTOCOL.md; cmd/runner is its client. The submit, promote, finalize and
// history verbs are answered by a Judge the daemon plugs in (the grader's).
package runner
