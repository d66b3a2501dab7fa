// Package verify is the reader's verifier: it checks a run, a ledger or a whole publication
// offline, trusting nothing but the keys it is given, and returns one Result listing each check
// and its outcome (passed; failed, with each file and reason; not applicable, and why) and the
// verdict.
//
// It owns every check a reader makes: Run (an attestation and every file it binds: the
// trajectory, exports, the timestamp, the witnessed proof, a rebuild on request), Ledger (a run
// ledger's signatures, tree, witnesses and timestamp), Publication (every file of a
// publication, strict: a file no check covers is a failure unless Options.AllowUnchecked names
// it) and Board (a set of attestations, the run ledgers that account for them, and the board
// they make). cmd/sealrun's verify, verify-publication, ledger verify and leaderboard turn flags
// into these options and print the Result, as text or as JSON (schema Schema,
// docs/VERIFY-JSON.md).
//
// It is portable (Linux, macOS, Windows) and imports nothing that runs containers: no sandbox,
// daemon, runner, grader or controller (e2e's layout test holds it to that), so a third party
// can import it. A publication or run that does not check is a Result that is not Valid and a
// nil error; an error (*Error) is for what stopped the check itself.
//
// Publication reads each file of the publication once: the files check hashes it and keeps the
// bytes of what a later check parses (up to Options.MaxMemory), and every later check
// (attestations, trajectories, exports) reads those bytes, so each judges exactly what was
// hashed. A page or an Inspect log, which a check only compares with what it makes again, is
// compared by its digest; a file read again must hash as it did.
package verify
