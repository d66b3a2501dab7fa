// Package daemon owns the run lifecycle: the queue, the state machine, the journal, crash
// recovery and the API server. It is the only package that composes its siblings.
package daemon
