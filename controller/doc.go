// Package controller owns the agent's container: the scaffold's shell in /workspace (no GPU, no
// Python), the model gateway that is its only egress, and the agent-facing API socket the runner
// client talks to.
package controller
