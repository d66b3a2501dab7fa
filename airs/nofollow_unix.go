//go:build unix

package airs

import "syscall"

// openNoFollow: a symlink is never followed and a FIFO never blocks the open.
const openNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
