//go:build !sealrun_testseams

package buildinfo

// TestSeams says whether this build has the test seams (Executor.Entrypoint, TestOverlay, Hold,
// KillAfter; sealrund's SEALRUND_TEST_* variables). Release builds (make build, make install)
// do not: only builds with -tags sealrun_testseams, which make test sets, have them.
const TestSeams = false
