//go:build !unix

package airs

// openNoFollow: no such flags here; the walk has already refused symlinks, and the open file is
// checked to be regular.
const openNoFollow = 0
