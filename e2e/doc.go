// Package e2e holds end-to-end and escape tests against real containers, and the repository's
// structural tests (which package may import which).
//
// The daemon's end-to-end tests (a real sealrund process killed with -9 mid-run, during grading
// and while signing; the real sealrun CLI against its socket; the queue on a fake GPU; full disk;
// cancel in every state) live in daemon/, beside the test bed they share (content store, track
// pinned to the local images, fake provider, scripted agent). Here: the shortened demo
// (demo_test.go: the real sealrun demo, one seed, checked as a reader of its output would), and
// the attack and fault suite of its own issue.
package e2e
