package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	RunHookIfRequested() // the test binary is the network hook of the containers it starts
	if os.Getenv(placementChildEnv) != "" {
		placementChild() // TestPlacementDelegated's child: resolve its placement and say so
	}
	code := m.Run()
	if runnerBin != "" {
		os.RemoveAll(filepath.Dir(runnerBin)) // buildBinaries' directory
	}
	os.Exit(code)
}

const placementChildEnv = "SEALRUN_TEST_PLACEMENT_CHILD"

func placementChild() {
	p, err := ResolvePlacement("")
	out := struct {
		Placement Placement `json:"placement"`
		Error     string    `json:"error,omitempty"`
		Cgroup    string    `json:"cgroup"`
	}{Placement: p}
	if err != nil {
		out.Error = err.Error()
	}
	out.Cgroup, _ = ownCgroupV2()
	json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
}
