package images

import (
	"os"
	"testing"
)

// requireRoot skips a test that needs root, saying why; `make test` runs as root in CI.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Getenv("SEALRUN_NO_ROOT_TESTS") != "" {
		t.Skip("SEALRUN_NO_ROOT_TESTS is set (make test-unit)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown into a user-namespace range); make test runs it as root in CI")
	}
}
