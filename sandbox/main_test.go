package sandbox

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	RunHookIfRequested() // the test binary is the network hook of the containers it starts
	os.Exit(m.Run())
}
