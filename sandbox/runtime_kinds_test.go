package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// What the three runtimes print for --version (Debian bookworm's packages), and what is not a
// runtime sealrun drives.
func TestParseRuntimeVersion(t *testing.T) {
	for _, c := range []struct {
		out, kind string
		version   [3]int
	}{
		{"runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\nlibseccomp: 2.5.4\n", KindRunc, [3]int{1, 1, 5}},
		{"crun version 1.8.1\ncommit: f8a096be060b22ccd3d5f3ebe44108517fbf6c30\nrundir: /run/crun\nspec: 1.0.0\n+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +YAJL\n", KindCrun, [3]int{1, 8, 1}},
		{"crun version 1.21\n", KindCrun, [3]int{1, 21, 0}},
		{"runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", KindRunsc, [3]int{0, 0, 20221219}},
		{"runsc version release-20240513.0\nspec: 1.1.0\n", KindRunsc, [3]int{20240513, 0, 0}},
	} {
		kind, line, v, err := parseRuntimeVersion(c.out)
		if err != nil || kind != c.kind || v != c.version || strings.Contains(line, "\n") {
			t.Errorf("%q: kind %q version %v line %q err %v; want %q %v", c.out, kind, v, line, err, c.kind, c.version)
		}
	}
	for _, bad := range []string{"", "youki 0.3.0", "podman version 4.3.1", "sh: 1: --version: not found", strings.Repeat("x", 1<<16)} {
		if _, _, _, err := parseRuntimeVersion(bad); err == nil || !strings.Contains(err.Error(), "runc, crun or runsc") {
			t.Errorf("%.40q: err %v; want a refusal naming the runtimes sealrun drives", bad, err)
		}
	}
}

// crun before 1.14.2 accepts only an ociVersion containing "1.0"; runc and a newer crun get the
// spec as written.
func TestAdjustSpecForCrun(t *testing.T) {
	for _, c := range []struct {
		kind    string
		version [3]int
		want    string
	}{
		{KindCrun, [3]int{1, 8, 1}, "1.0.2"},
		{KindCrun, [3]int{1, 14, 1}, "1.0.2"},
		{KindCrun, [3]int{1, 14, 2}, specs.Version},
		{KindRunc, [3]int{1, 1, 5}, specs.Version},
		{KindRunsc, [3]int{0, 0, 20221219}, specs.Version},
	} {
		s := &specs.Spec{Version: specs.Version}
		(&Runtime{Kind: c.kind, version: c.version}).adjustSpec(s)
		if s.Version != c.want {
			t.Errorf("%s %v: ociVersion %q; want %q", c.kind, c.version, s.Version, c.want)
		}
	}
}

// On a hybrid host whose cgroup v2 hierarchy holds a controller, crun is refused with the
// reason and the fix; with none there, it is not.
func TestCrunHybridCheck(t *testing.T) {
	dir := t.TempDir()
	if err := crunHybridCheck(dir); err != nil {
		t.Errorf("no cgroup.controllers: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("\n"), 0o644)
	if err := crunHybridCheck(dir); err != nil {
		t.Errorf("no controllers on v2: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("hugetlb\n"), 0o644)
	err := crunHybridCheck(dir)
	for _, want := range []string{"crun cannot run", "hugetlb", "mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb", "systemd.unified_cgroup_hierarchy=1", "use runc"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hugetlb on v2: %v; want it to say %q", err, want)
		}
	}
}

// gVisor runs sealrun's containers from the release its suites pass under: Debian 12's is
// refused for what its gofer does, a release between them as untried, each naming the fix; that
// release and later ones are taken.
func TestRunscRefusedWhereItCannotRun(t *testing.T) {
	old := &Runtime{Kind: KindRunsc, VersionLine: "runsc version 0.0~20221219.0", version: [3]int{0, 0, 20221219}}
	if err := old.UsableHere(); err == nil || !strings.Contains(err.Error(), "gVisor") || !strings.Contains(err.Error(), "20221219") || !strings.Contains(err.Error(), "runc or crun") || !strings.Contains(err.Error(), "20260905 or newer") {
		t.Errorf("runsc 20221219: %v; want a refusal naming it and the fix", err)
	}
	between := &Runtime{Kind: KindRunsc, VersionLine: "runsc version release-20240513.0", version: [3]int{20240513, 0, 0}}
	err := between.UsableHere()
	switch {
	case runscUnsealedForTests():
		t.Log("SEALRUN_TEST_RUNSC_UNSEALED=1: untried gVisor releases are taken in this test build")
	case err == nil || !strings.Contains(err.Error(), between.VersionLine) || !strings.Contains(err.Error(), "oldest release sealrun's suites pass under (20260905)") || !strings.Contains(err.Error(), "runc or crun"):
		t.Errorf("runsc 20240513: %v; want a refusal naming it, the oldest release taken and the fix", err)
	}
	for _, v := range [][3]int{{20260905, 0, 0}, {20261012, 0, 0}} {
		if err := (&Runtime{Kind: KindRunsc, version: v}).UsableHere(); err != nil {
			t.Errorf("runsc %d: %v; want it taken", v[0], err)
		}
	}
}

// A host whose controller would run under gVisor is refused, naming why and the fix (by
// default and as the controller's own runtime); gVisor for the runner and grader is taken.
func TestControllerRefusedGVisor(t *testing.T) {
	if runscUnsealedForTests() {
		t.Skip("SEALRUN_TEST_RUNSC_UNSEALED=1 lets the controller run under gVisor in this test build")
	}
	dir := t.TempDir()
	runsc := filepath.Join(dir, "runsc")
	os.WriteFile(runsc, []byte("#!/bin/sh\necho 'runsc version release-20260905.0'\necho 'spec: 1.1.0-rc.1'\n"), 0o755)
	for _, cfg := range []HostConfig{
		{Runtime: runsc},
		{Runtime: "runc", RoleRuntimes: map[Role]string{RoleController: runsc}},
	} {
		cfg.RunDir = t.TempDir()
		_, _, err := openRuntimes(cfg)
		if err == nil || !strings.Contains(err.Error(), "the controller's runtime is gVisor") || !strings.Contains(err.Error(), "memory or pids limit") || !strings.Contains(err.Error(), "runtimes.controller") {
			t.Errorf("%+v: %v; want the controller refused gVisor, with why and the fix", cfg, err)
		}
	}
	_, byRole, err := openRuntimes(HostConfig{RunDir: t.TempDir(), Runtime: runsc, RoleRuntimes: map[Role]string{RoleController: "runc"}})
	if err != nil || byRole[RoleRunner].Kind != KindRunsc || byRole[RoleGrader].Kind != KindRunsc || byRole[RoleController].Kind != KindRunc {
		t.Errorf("gVisor for the runner and grader, runc for the controller: %v %v", byRole, err)
	}
	// doctor says the same, per runtime and the roles it runs.
	for _, tc := range []struct {
		cfg  HostConfig
		want string // the status of gVisor's line
	}{
		{HostConfig{Runtime: runsc}, "fail"},
		{HostConfig{Runtime: runsc, RoleRuntimes: map[Role]string{RoleController: "runc"}}, "ok"},
	} {
		var lines []string
		runtimeChecks(tc.cfg, func(name, status, detail, fix string) {
			if strings.Contains(detail, "runsc version") {
				lines = append(lines, status+": "+name+": "+detail+" / "+fix)
				if status != tc.want || status == "fail" && (!strings.Contains(detail, "runs the controller") || !strings.Contains(fix, "controller = \"runc\"")) {
					t.Errorf("doctor, %+v: %s %s: %s (fix %q); want %s", tc.cfg.RoleRuntimes, name, status, detail, fix, tc.want)
				}
			}
		})
		if len(lines) != 1 {
			t.Errorf("doctor, %+v: gVisor's lines %q; want one", tc.cfg.RoleRuntimes, lines)
		}
	}
}

// The seccomp program crun compiled is kept only when it is whole instructions within the
// kernel's limit, only for crun and a spec with a profile, and given back only to a spec with
// the same profile under the same crun.
func TestCrunSeccompProgramCache(t *testing.T) {
	root := t.TempDir()
	profile := func(syscall string) *specs.Spec {
		return &specs.Spec{Linux: &specs.Linux{Seccomp: &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Syscalls: []specs.LinuxSyscall{{Names: []string{syscall}, Action: specs.ActAllow}}}}}
	}
	crun := &Runtime{Kind: KindCrun, Path: "/usr/bin/crun", VersionLine: "crun version 1.8.1 (test " + t.Name() + ")", root: root}
	for i, prog := range [][]byte{nil, {}, {1, 2, 3}, make([]byte, 4097*8)} {
		id := fmt.Sprintf("bad-%d", i)
		os.MkdirAll(filepath.Join(root, id), 0o700)
		if prog != nil {
			os.WriteFile(filepath.Join(root, id, "seccomp.bpf"), prog, 0o600)
		}
		s := profile(id)
		key := crun.useCompiledSeccomp(s)
		crun.keepCompiledSeccomp(id, key)
		if crun.useCompiledSeccomp(s); s.Annotations[crunSeccompAnnotation] != "" {
			t.Errorf("a program of %d bytes (nil: none written) was kept", len(prog))
		}
	}
	os.MkdirAll(filepath.Join(root, "good"), 0o700)
	os.WriteFile(filepath.Join(root, "good", "seccomp.bpf"), []byte{6, 0, 0, 0, 0, 0, 0, 0}, 0o600)
	crun.keepCompiledSeccomp("good", crun.useCompiledSeccomp(profile("read")))
	if s := profile("read"); crun.useCompiledSeccomp(s) == "" || s.Annotations[crunSeccompAnnotation] != "BgAAAAAAAAA=" {
		t.Errorf("the same profile under the same crun: annotations %v", s.Annotations)
	}
	if s := profile("write"); crun.useCompiledSeccomp(s) == "" || s.Annotations != nil {
		t.Errorf("another profile got a program: %v", s.Annotations)
	}
	other := *crun
	other.VersionLine += " (another)"
	if s := profile("read"); other.useCompiledSeccomp(s) == "" || s.Annotations != nil {
		t.Errorf("another crun got the program: %v", s.Annotations)
	}
	runc := &Runtime{Kind: KindRunc, Path: "/usr/sbin/runc", root: root}
	if s := profile("read"); runc.useCompiledSeccomp(s) != "" || s.Annotations != nil {
		t.Errorf("runc got a program: %v", s.Annotations)
	}
	if key := crun.useCompiledSeccomp(&specs.Spec{Linux: &specs.Linux{}}); key != "" {
		t.Errorf("a spec without a profile has a key %q", key)
	}
}
