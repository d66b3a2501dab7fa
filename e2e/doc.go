// Package e2e holds end-to-end and escape tests against real containers, and the repository's
// structural tests (which package may import which).
package e2e
