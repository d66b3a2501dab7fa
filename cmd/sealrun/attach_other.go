//go:build !unix

package main

import "os"

// notifyResize does nothing where there is no SIGWINCH (Windows): the window keeps the size it
// had when the attach began.
func notifyResize(chan<- os.Signal) {}
