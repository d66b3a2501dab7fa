package main

import (
	"os"

	"github.com/sealrun/sealrun/sandbox"
)

func isRoot() bool { return os.Geteuid() == 0 }

func runHookIfRequested() { sandbox.RunHookIfRequested() }
