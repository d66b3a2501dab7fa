// Package exams owns the hidden exam: its input formats, the build step (validation, truncation
// to the context window, masking of earlier answers), the canonical built file whose SHA-256 is the
// exam hash, streaming load-and-verify, and the synthetic generator used for demos and tests. It is
// pure: it imports no sibling package.
package exams
