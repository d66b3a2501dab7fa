package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	RunHookIfRequested() // the test binary is the network hook of the containers it starts
	code := m.Run()
	if runnerBin != "" {
		os.RemoveAll(filepath.Dir(runnerBin)) // buildBinaries' directory
	}
	os.Exit(code)
}
