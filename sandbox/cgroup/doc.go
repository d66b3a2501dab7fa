// Package cgroup is the cgroup side of sandbox: where a host puts its runs' cgroups (Placement:
// /sealrun on v1 and hybrid hosts, below the cgroup systemd delegated on v2), the cgroup
// subtree of a run or container (Tree: create, limit, freeze, kill, read what it used, remove,
// on v1/hybrid through containerd/cgroups or on v2 directly) and the device filter sealrun
// adds to each container's cgroup (an eBPF program on v2, devices.allow on v1).
//
// It knows nothing of containers, runtimes or runs: sandbox composes it. Everything here is
// root-only and Linux-only but this file.
package cgroup

import "errors"

// DefaultRoot is the parent of runs' cgroups where nothing is delegated (see Placement).
const DefaultRoot = "/sealrun"

// ErrBadConfig marks a cgroup setup that can never work (a cgroup parent that is not a clean
// absolute path, a delegated cgroup shared with other processes or lacking a controller runs
// need). It is sandbox.ErrBadConfig: callers of sandbox branch on that.
var ErrBadConfig = errors.New("bad sandbox configuration")
