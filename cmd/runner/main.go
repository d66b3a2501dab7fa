// Command runner is the static client mounted into the controller as /usr/local/bin/runner. It
// talks to the sealrun daemon over a unix socket bind-mounted into the controller; all compute of
// a sealed run goes through it.
//
// The daemon side arrives with the runner issue; this build prints its usage and says so.
package main

import (
	"fmt"
	"io"
	"os"
)

const usageText = `Usage: runner COMMAND [ARGS...]

Every compute call of a sealed run goes through runner. Each response starts with the time left.

  runner CMD [ARGS...]     run CMD in a fresh GPU container, no network, /workspace mounted
  runner time_left         print the time left in the run
  runner submit DIR        pack DIR as a candidate bundle, score it on the validation set
  runner promote ID        mark candidate ID as the one to grade
  runner finalize [ID]     end the run now (grading the promoted or given candidate)
  runner posture           print what this sandbox looks like from inside (JSON; used by
                           sealrun sandbox probe)
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usageText)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "posture" {
		return runPosture(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "runner: %q: this build has no daemon connection yet (it arrives with the runner issue); nothing was run\n", args[0])
	return 1
}
