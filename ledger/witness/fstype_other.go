//go:build !linux

package witness

// sharedFS: only Linux's statfs is read; elsewhere the state's file system is the operator's to
// choose (docs/OPERATOR.md: a local one).
func sharedFS(string) (string, error) { return "", nil }
