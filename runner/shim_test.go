//go:build linux

package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// ShimFor takes the C shim beside the runner binary only when it is an executable regular file.
func TestShimFor(t *testing.T) {
	dir := t.TempDir()
	runner, shim := filepath.Join(dir, "runner"), filepath.Join(dir, ExecShim)
	if got := ShimFor(runner); got != runner {
		t.Errorf("no shim: %s", got)
	}
	os.WriteFile(shim, []byte("x"), 0o644)
	if got := ShimFor(runner); got != runner {
		t.Errorf("a shim that is not executable: %s", got)
	}
	os.Chmod(shim, 0o755)
	if got := ShimFor(runner); got != shim {
		t.Errorf("an executable shim: %s", got)
	}
	os.Remove(shim)
	os.Mkdir(shim, 0o755)
	if got := ShimFor(runner); got != runner {
		t.Errorf("a directory named %s: %s", ExecShim, got)
	}
}
