package daemon

import (
	"fmt"
	"strings"

	"github.com/sealrun/sealrun/buildinfo"
)

// seamsUsed lists the test seams an executor has set.
func (x *Executor) seamsUsed() []string {
	var s []string
	if len(x.Entrypoint) > 0 {
		s = append(s, "entrypoint")
	}
	if x.TestOverlay != "" {
		s = append(s, "overlay")
	}
	if x.Hold != "" {
		s = append(s, "hold")
	}
	if x.KillAfter != "" {
		s = append(s, "kill_after")
	}
	return s
}

// checkSeams refuses seams in a release build.
func (x *Executor) checkSeams() error {
	if s := x.seamsUsed(); len(s) > 0 && !buildinfo.TestSeams {
		return fmt.Errorf("test seams %s are set but this is a release build: they exist only in builds made with -tags sealrun_testseams (make test sets it)", strings.Join(s, ", "))
	}
	return nil
}
