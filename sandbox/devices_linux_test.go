package sandbox

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// The device rules of a run's spec: the standard nodes and the run's GPUs, each with the access
// it needs, in order (cgroup's TestDeviceFilterRoundTrip compiles such rules).
func TestSpecDeviceRules(t *testing.T) {
	gpu := specs.LinuxDevice{Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}
	rules, err := cgroup.AllowRules(resources(DefaultLimits(), []specs.LinuxDevice{gpu}).Devices)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	want := []string{"c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm", "c 5:0 rwm", "c 5:2 rwm", "c 136:* rwm", "c 195:0 rw"}
	if !slices.Equal(got, want) {
		t.Fatalf("rules %q, want %q", got, want)
	}
	for _, bad := range [][]specs.LinuxDeviceCgroup{
		{{Allow: true, Type: "x", Access: "r"}},
		{{Allow: true, Type: "c", Access: "rx"}},
		{{Allow: false, Access: "rwm"}, {Allow: false, Type: "c", Access: "w"}},
	} {
		if _, err := cgroup.AllowRules(bad); err == nil {
			t.Errorf("rules %+v accepted", bad)
		}
	}
}
