// Package buildinfo is the build record of a sealrun binary (attest.Build): its version, commit,
// Go and C toolchains, whether it is a test build (TestSeams) and the hashes of the helpers
// sealrund runs, as `sealrun version` prints and every attestation carries.
package buildinfo
