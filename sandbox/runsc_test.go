package sandbox

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// runscProbe is a probe result as gVisor gives it for a runner with its wall whole: the host
// sees gVisor's sandbox process (no cgroup namespace of its own, a mapped range, seccomp on),
// inside is gVisor's view (its root user namespace, its own cgroupfs).
func runscProbe() *ProbeResult {
	return &ProbeResult{Role: RoleRunner, Runtime: KindRunsc,
		Namespaces: []string{"ipc", "mnt", "net", "pid", "user", "uts"},
		UIDMap:     "0 0 4294967295", CapEff: "0000000000000000", Seccomp: 2, NoNewPrivs: true, ReadonlyRootfs: true,
		RootfsShifted: true, MaskedPathsOK: true,
		Sentry: &SentryView{UIDMap: "0 1000000000 65536", Uid: "1000000000 1000000000 1000000000 1000000000", Seccomp: 2},
		Links:  []string{"lo"}, Addresses: []string{"127.0.0.1/8 lo"},
		Nested:       map[string]string{"unshare(CLONE_NEWUSER)": "refused: EPERM"},
		Sockets:      map[string]string{"AF_INET": "allowed", "AF_INET6": "allowed", "AF_NETLINK/NETLINK_ROUTE": "allowed", "AF_UNIX": "allowed", "socketpair(AF_UNIX)": "allowed"},
		Limits:       runscLimits(),
		LimitsInside: map[string]string{"pids": "max", "swap": "absent"},
		FDs:          []string{"0 -> host:[1]", "1 -> host:[2]", "2 -> host:[3]"},
	}
}

// runscLimits are the host's limits of a gVisor container with the default limits: the pids
// limit counts gVisor's host tasks (runscHostTasks).
func runscLimits() map[string]string {
	l := expectedLimits(Limits{})
	l["pids"] = "576"
	return l
}

// Under gVisor the probe judges the wall where it is: gVisor's sandbox process on the host
// (its mapping, ids, seccomp) and the host's limits; gVisor's own views inside (its root user
// namespace, its cgroupfs, stdio named host:[N]) are not taken for the host's.
func TestJudgeUnderGVisor(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*ProbeResult)
		wants string // a problem that must be found; "" for none
	}{
		{"whole", func(*ProbeResult) {}, ""},
		{"sandbox process without seccomp", func(r *ProbeResult) { r.Sentry.Seccomp = 0 }, "gVisor's sandbox process has seccomp mode 0"},
		{"sandbox process as host root", func(r *ProbeResult) { r.Sentry.Uid = "0 0 0 0" }, "expected no root"},
		{"sandbox process in the host's user namespace", func(r *ProbeResult) { r.Sentry.UIDMap = "0 0 4294967295" }, "maps container root to host root"},
		{"sandbox process unread", func(r *ProbeResult) { r.Sentry = nil }, "could not be read"},
		{"host limit missing", func(r *ProbeResult) { r.Limits = map[string]string{} }, "limit is \"\" on the host"},
		{"pids limit as runc's", func(r *ProbeResult) { r.Limits["pids"] = "256" }, `pids limit is "256" on the host; expected "576"`},
		{"another descriptor", func(r *ProbeResult) { r.FDs = append(r.FDs, "3 -> host:[4]") }, "unexpected file descriptor 3"},
		{"nested namespace allowed", func(r *ProbeResult) { r.Nested["unshare(CLONE_NEWUSER)"] = "ALLOWED" }, "nested namespace"},
		{"inside seccomp off", func(r *ProbeResult) { r.Seccomp = 0 }, "seccomp mode 0; expected 2"},
	} {
		r := runscProbe()
		r.Devices = nil
		tc.edit(r)
		r.judge(ProbeConfig{Role: RoleRunner})
		var rest []string
		for _, p := range r.Problems {
			if !strings.HasPrefix(p, "the device cgroup") { // the devices are judged as for runc
				rest = append(rest, p)
			}
		}
		got := strings.Join(rest, "\n")
		switch {
		case tc.wants == "" && got != "":
			t.Errorf("%s: problems %s", tc.name, got)
		case tc.wants != "" && !strings.Contains(got, tc.wants):
			t.Errorf("%s: problems %q; want one saying %q", tc.name, got, tc.wants)
		}
	}
	// The same result under runc is judged as runc's: gVisor's views are problems there.
	r := runscProbe()
	r.Runtime = KindRunc
	r.judge(ProbeConfig{Role: RoleRunner})
	got := strings.Join(r.Problems, "\n")
	for _, want := range []string{"expected its own [cgroup", "maps container root to host root", "inside; expected", "unexpected file descriptor 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("gVisor's view judged as runc's: no %q in %s", want, got)
		}
	}
}

// gVisor's lines for a command it could not execute (as release 20260905 prints them) become the
// command's error, without the runtime's call chain; other failures are not taken for one.
func TestRunscExecFailure(t *testing.T) {
	chain := "running container: starting container: starting root container: starting sandbox: "
	for in, want := range map[string]string{
		chain + `error finding executable "nosuchcmd" in PATH [/usr/local/bin /usr/bin /bin]: no such file or directory` + "\n": `error finding executable "nosuchcmd" in PATH [/usr/local/bin /usr/bin /bin]: no such file or directory`,
		chain + "creating process: failed to load /etc/passwd: permission denied\n":                                             "failed to load /etc/passwd: permission denied",
		chain + "creating process: failed to load /no/such/binary: no such file or directory":                                   "failed to load /no/such/binary: no such file or directory",
		"creating container: cannot create sandbox: cannot read client sync file: waiting for sandbox to start: EOF\n":          "",
		"": "",
	} {
		if got := runscExecFailure(in); got != want {
			t.Errorf("runscExecFailure(%q) = %q; want %q", in, got, want)
		}
	}
}

// What sealrun gives gVisor: its flags by release; clone3 allowed (gVisor cannot answer ENOSYS)
// and every other rule kept; group 0 on the run's shared group, every id mapped once.
func TestRunscSpecAndFlags(t *testing.T) {
	old := &Runtime{Kind: KindRunsc, version: [3]int{0, 0, 20221219}}
	if got := strings.Join(old.runscArgs(), " "); got != "--platform=ptrace" {
		t.Errorf("runsc 20221219 flags %q; want only the ptrace platform (it has no systrap)", got)
	}
	newer := &Runtime{Kind: KindRunsc, version: [3]int{20260905, 0, 0}}
	if got := strings.Join(newer.runscArgs(), " "); !strings.Contains(got, "--platform=systrap") || !strings.Contains(got, "--oci-seccomp") || !strings.Contains(got, "--gofer-network-namespace=new") || !strings.Contains(got, "--host-uds=open") {
		t.Errorf("runsc 20260905 flags %q", got)
	}
	for _, kind := range []string{KindRunc, KindCrun, KindRunsc} {
		s := &specs.Spec{Linux: &specs.Linux{Seccomp: Seccomp()}}
		(&Runtime{Kind: kind, version: [3]int{20260905, 0, 0}}).adjustSpec(s)
		var clone3 specs.LinuxSeccompAction
		rules := 0
		for _, sc := range s.Linux.Seccomp.Syscalls {
			rules++
			if slices.Contains(sc.Names, "clone3") {
				clone3 = sc.Action
			}
		}
		want := specs.ActErrno
		if kind == KindRunsc {
			want = specs.ActAllow
		}
		if clone3 != want || rules != len(Seccomp().Syscalls) {
			t.Errorf("%s: clone3 %s (want %s), %d rules (want %d)", kind, clone3, want, rules, len(Seccomp().Syscalls))
		}
	}
	uids := IDRange{Base: 2000000, Size: 65536}
	g := runscGIDMappings(uids, 1500000)
	if g[0] != (specs.LinuxIDMapping{ContainerID: 0, HostID: 1500000, Size: 1}) {
		t.Errorf("group 0 maps %+v; want the shared group", g[0])
	}
	inside, host := map[uint32]bool{}, map[uint32]bool{}
	var n uint32
	for _, m := range g {
		for i := uint32(0); i < m.Size; i++ {
			if inside[m.ContainerID+i] || host[m.HostID+i] {
				t.Fatalf("id mapped twice: %+v", m)
			}
			inside[m.ContainerID+i], host[m.HostID+i] = true, true
		}
		n += m.Size
	}
	if n != uids.Size || !inside[AgentGID] || host[uids.Base+uids.Size] {
		t.Errorf("mappings %+v cover %d ids; want the range's %d, group %d among them, nothing beyond the range", g, n, uids.Size, AgentGID)
	}
}
