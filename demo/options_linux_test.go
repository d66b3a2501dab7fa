package demo

import (
	"strings"
	"testing"

	"github.com/sealrun/sealrun/images/builder"
)

// TestOptionsCheck: a demo refuses what it cannot run, naming the option and what to give.
func TestOptionsCheck(t *testing.T) {
	ok := Options{StateDir: "/var/lib/sealrun-demo", BinDir: "/usr/local/bin", Seeds: 3, Scaffold: builder.DemoScaffoldName}
	if err := ok.check(); err != nil {
		t.Fatalf("the default demo is refused: %v", err)
	}
	for _, c := range []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Seeds = 0 }, "0 seeds: give 1 to 16"},
		{func(o *Options) { o.Seeds = 17 }, "17 seeds: give 1 to 16"},
		{func(o *Options) { o.Scaffold = "aider" }, `scaffold "aider": choose scripted-demo`},
		{func(o *Options) { o.GPUs = make([]string, 17) }, "17 GPUs: give at most 16"},
		{func(o *Options) { o.StateDir = "" }, "state directory"},
		{func(o *Options) { o.BinDir = "" }, "sealrun's binaries"},
	} {
		o := ok
		c.change(&o)
		if err := o.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", o, err, c.want)
		}
	}
}
