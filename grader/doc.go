// Package grader owns submissions and grading: the content-addressed submissions store, validation
// feedback, hidden-exam grading (the daemon streams prefixes; answers never enter a container), and
// bits-per-byte on answer spans.
package grader
