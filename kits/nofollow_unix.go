//go:build unix

package kits

import "syscall"

const syscallNoFollow = syscall.O_NOFOLLOW
