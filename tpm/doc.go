// Package tpm is the host's hardware root (issue 77, docs/TPM.md): keys made inside a TPM 2.0
// that never leave it, their enrollment (what an operator publishes: the EK certificates, the
// attestation key, and the attestation key's certification of the signing key), quotes of the
// PCRs with qualifying data a run binds, and the offline checks of each a reader runs.
//
// Talking to a TPM (Open, Keys) is Linux only; reading and verifying what one produced is
// portable. Tests run against Debian's swtpm (internal/testenv.Swtpm), whose EK certificates a
// certificate authority of the test's own issued.
package tpm
