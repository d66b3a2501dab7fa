//go:build !sealrun_testseams

package sandbox

// Release builds: a refused gVisor is refused (runsc_seams_on_linux.go has the test builds' switch).
func runscUnsealedForTests() bool { return false }

func runscDebugDir() string { return "" }
