// Package api is sealrund's wire contract: the run records, run requests, events and states its
// admin API serves (daemon/API.md), the attach protocol's frames, and the layout of its state
// directory (where the content store, kits and trees are). It is types and formats only: the
// typed client is package client, the host's configuration (sealrun.toml) package hostconfig,
// a binary's build record package buildinfo. Only what runs a daemon (cmd/sealrund, the demo,
// which runs one in-process, and tests) imports package daemon, the server.
package api
