// Package hostconfig is the host's configuration file, sealrun.toml (docs/OPERATING.md): keys,
// resources, runtimes per role, model providers and their prices, the ledger, witnesses, the
// timestamp authority and metrics, parsed and checked with every problem named at once. sealrund
// reads it, and sealrun doctor and sandbox check it; a client of the daemon never needs it.
package hostconfig
