//go:build !amd64 && !arm64

package main

// On other architectures posture does not try raw syscalls (their numbers are not listed here).
const (
	sysClone3 = 0
	sysSetns  = 0
)

var gatedCalls []gatedCall
