// Command sealrund is the sealrun daemon: config -> daemon.New -> Run(ctx).
//
// The run lifecycle arrives with the daemon issue; this build validates its flags and says so.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sealrund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "/etc/sealrun/sealrund.toml", "daemon configuration file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sealrund [--config FILE]\n\nThe sealrun daemon: runs sealed benchmark runs and serves the API on /run/sealrun/sealrun.sock.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sealrund: unexpected argument %q; sealrund takes only flags\n", fs.Arg(0))
		return 2
	}
	fmt.Fprintf(stderr, "sealrund: the run lifecycle is not implemented in this version (config %s not read); use the sealrun CLI's track verbs meanwhile\n", *config)
	return 1
}
