// Package posture is the record `runner posture` prints from inside a container: what a process
// there sees of its confinement. The runner client writes it, the host's probe (sealrun sandbox
// probe) reads it and judges it, and the attack suite's scaffold reads it too. Portable types
// only: the static runner client imports it and nothing else of sealrun.
package posture

import "strings"

// Record is what a process sees of its sandbox from inside. The host side of the probe adds
// what only the host can see and decides whether it is right.
type Record struct {
	UIDMap         string            `json:"uid_map"`
	GIDMap         string            `json:"gid_map"`
	CapEff         string            `json:"cap_eff"`
	Seccomp        int               `json:"seccomp"`
	NoNewPrivs     bool              `json:"no_new_privs"`
	ReadonlyRootfs bool              `json:"readonly_rootfs"`
	RootfsOwner    int               `json:"rootfs_owner"` // uid owning / as seen inside
	MaskedPathsOK  bool              `json:"masked_paths_ok"`
	Masked         map[string]string `json:"masked"`
	Egress         []Egress          `json:"egress"`
	Hostname       string            `json:"hostname"`
	Cwd            string            `json:"cwd"`
	EnvKeys        []string          `json:"env_keys"`
	FDs            []string          `json:"fds"`
	// Nested: creating user, network and mount namespaces (clone, unshare, clone3, setns).
	Nested map[string]string `json:"nested"`
	// Sockets: one socket per address family and netlink protocol.
	Sockets map[string]string `json:"sockets"`
	// Syscalls: kernel surfaces the filter refuses (pidfd_getfd, mbind, bpf, io_uring, ...).
	Syscalls map[string]string `json:"syscalls"`
	// Limits: the container's cgroup limits as read inside (its cgroup namespace makes its own
	// cgroup the root of /sys/fs/cgroup): memory, swap, pids, cpu, cpuset; "absent" when the file is.
	Limits map[string]string `json:"limits"`
}

// Egress is one connection tried from inside.
type Egress struct {
	Target    string `json:"target"`
	Connected bool   `json:"connected"`
	Error     string `json:"error,omitempty"`
}

// StatusFields reads the "Key:\tvalue" lines of /proc/PID/status, each value with its runs of
// blanks made one space ("Uid:\t0\t0\t0\t0" is "0 0 0 0").
func StatusFields(status string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}
