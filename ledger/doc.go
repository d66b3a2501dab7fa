// Package ledger is a host's run ledger: an append-only transparency log of every run the
// daemon accepts (one entry when it is queued, one when it ends), as RFC 9162 and Sigstore's
// Rekor keep theirs — a Merkle tree (github.com/transparency-dev/merkle, RFC 6962 hashing) with
// signed tree heads in the checkpoint format (C2SP tlog-checkpoint, signed as a
// golang.org/x/mod/sumdb/note). An attestation carries its run's entry, the head it was included
// under and the inclusion proof; a reader with the published ledger accounts for every run of a
// track and agent, and a rewritten ledger (an edited entry, a truncation, a fork) fails against
// the heads already seen. ledger/FORMAT.md documents the file; it imports no sibling package
// (the verify path is portable).
package ledger
