// Package grader is the judge of every run: candidates (packed from the workspace on the host
// side, content-addressed, stored atomically), the run's hash-chained submission history,
// validation feedback, hidden-exam grading (the host streams prefixes and reads back exactly the
// answer's length; answers never enter a container), the sealed pass vector, bits per byte on
// the answer spans, and report.json.
//
// The bundle format and line protocol are in PROTOCOL.md, report.json in REPORT.md.
//
// Design decisions of this package, and why (ARCHITECTURE.md, "Decisions and why"):
//   - the track pins the per-question limit ([budget] question_limit): it can move a score, so
//     it is frozen with the track like every other grading parameter;
//   - hard links are refused while packing, like symlinks: a file with two names could be the
//     same inode as one outside the bundle;
//   - refused submissions are history entries too ("refused", with the reason), so the run
//     records what the agent tried and why it did not count;
//   - one submission is scored at a time; a second one meanwhile is refused naming the first (as
//     a second compute call is);
//   - the grader's refusals reach the agent through any error with a RefusalReason method, so
//     the grader does not import the runner (the daemon only plugs Judge{Service} in).
package grader
