// Package api is sealrund's contract with everything that is not sealrund: the run records,
// run requests, events and states its admin API serves (daemon/API.md), the layout of its state
// directory (where the content store, kits and trees are), its configuration file (sealrun.toml,
// which sealrun doctor checks too), the build record of a sealrun binary, and a typed client of
// the admin API (runs, a run, cancel, submit, its files and events, gathering a run's results).
// cmd/sealrun, view, trackpin and the demo use this package; only what runs a daemon (cmd/sealrund,
// the demo, which runs one in-process, and tests) imports package daemon, the server.
package api
