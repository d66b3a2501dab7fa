// Package witness is the outside party a run ledger's heads are shown to: a C2SP tlog-witness
// (https://c2sp.org/tlog-witness) that cosigns a log's checkpoint only when it extends every
// checkpoint of that log it cosigned before, with C2SP tlog-cosignature v1 (Ed25519,
// "cosignature/v1") signatures.
//
// A witness follows the logs it is configured with (each an origin and its note verifier key),
// keeps the latest size and root hash it cosigned for each (append + fsync before it answers;
// the check and the update under one lock, so that a size is never rolled back), and learns
// nothing but heads. Server is the HTTP side (POST /add-checkpoint); Submit is a log's side of
// the same exchange; Verifier checks a cosignature with the witness's public key, as a note
// verifier (golang.org/x/mod/sumdb/note), so cosignatures travel as signature lines of the
// checkpoint they sign.
package witness
