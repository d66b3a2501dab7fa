// Package client is the typed client of sealrund's admin API (package api is the contract it
// speaks): runs, a run, cancel, pause, submit, its files and events, attaching to a human run's
// terminal, and gathering a run's results into a directory under a lock (each file checked
// against the attestation, its transcript rebuilt and compared). It links neither the sandbox
// nor the controller: cmd/sealrun's verbs, view and the demo speak to a daemon through it.
package client
