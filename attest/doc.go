// Package attest owns attestations: building the in-toto statement of a graded run, signing it
// in a DSSE envelope, and verifying a published one offline.
package attest
