// Package policy owns tracks and budgets: the frozen rule set every sealed run is judged under.
// It parses and validates track files (TOML), computes a track's canonical id (SHA-256 of the
// RFC 8785 canonical JSON of its data), and does the deadline arithmetic of a run — deadline,
// reserve window, phase, and a compute call's limit — against an injected clock. It is pure:
// it imports no sibling package and touches no file except through Load.
package policy
