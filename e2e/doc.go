// Package e2e holds end-to-end and escape tests against real containers, and the repository's
// structural tests (which package may import which).
//
// Here: the shortened demo (demo_test.go: the real sealrun demo, one seed, checked as a reader
// of its output would), the operator's walkthrough (operator_test.go: docs/OPERATOR.md's
// commands run as written, with the CPU track's choices, in a private mount namespace) and the hostile scaffold (hostile/: a static binary that attacks every
// wall from the controller, from a compute call and from submitted bundles, and reports each
// attempt as a row of attack, role, expected, observed, reason).
//
// The daemon's end-to-end tests live in daemon/, beside the test bed they share (content store,
// track pinned to the local images, fake provider, scripted agent): the attack suite that runs
// hostile/ as a whole sealed run and prints its table (attack_test.go), kill -9 of a real
// sealrund at each journal event boundary and mid-run (crash_test.go), the fault catalogue —
// provider down, runtime failing mid-run, full state disk, grader OOM (fault_test.go) — and the
// real sealrun CLI against its socket, the queue on a fake GPU, cancel in every state.
package e2e
