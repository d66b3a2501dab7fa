// Command sealrun-netns-hook is the createRuntime hook of sealrun containers: the runtime runs it
// (as root, on the host) after creating a container's namespaces and before starting its
// process. It configures and checks the container's network namespace (package netnshook). It is
// a separate small binary so that it starts in a few milliseconds at every container start;
// without it, sealrun re-executes itself.
package main

import (
	"fmt"
	"os"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

func main() {
	if err := netnshook.Main(os.Args[1:], os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "sealrun network hook: %v\n", err)
		os.Exit(1)
	}
}
