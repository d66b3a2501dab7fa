//go:build sealrun_testseams

package sandbox

import "os"

// Test builds only (-tags sealrun_testseams): SEALRUN_TEST_RUNSC_UNSEALED=1 lets an untried
// gVisor release (after 2022) run containers, and the controller run under gVisor, so that
// tests and benchmarks can measure them and find what keeps them refused;
// SEALRUN_TEST_RUNSC_DEBUG=DIR gives runsc --debug --strace with its logs in DIR. Release builds
// have neither (runsc_seams_off_linux.go).
func runscUnsealedForTests() bool { return os.Getenv("SEALRUN_TEST_RUNSC_UNSEALED") == "1" }

func runscDebugDir() string { return os.Getenv("SEALRUN_TEST_RUNSC_DEBUG") }
