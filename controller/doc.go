// Package controller owns the agent's container and its only window to the world: the
// controller container (the scaffold, as the unprivileged agent user in /workspace, no GPU, no
// Python in the image, the runner client and the agent socket mounted, the agent identity and
// gateway URL in its environment, its transcript kept) and the model gateway, a host-side reverse
// proxy served inside the run's gateway netns that forwards an allowlist of provider API paths,
// injects the provider key, pins the run's model and effort, caps sizes, retries provider
// failures and audits every request. SCAFFOLD.md is the contract with the scaffold, GATEWAY.md the
// gateway's.
package controller
