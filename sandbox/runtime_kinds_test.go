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

// No gVisor release tried runs sealrun's containers with their wall whole: Debian 12's and a
// later one are refused by name, with what still fails under them and what to use instead.
func TestRunscRefusedWhereItCannotRun(t *testing.T) {
	old := &Runtime{Kind: KindRunsc, VersionLine: "runsc version 0.0~20221219.0", version: [3]int{0, 0, 20221219}}
	if err := old.UsableHere(); err == nil || !strings.Contains(err.Error(), "gVisor") || !strings.Contains(err.Error(), "20221219") || !strings.Contains(err.Error(), "runc or crun") {
		t.Errorf("runsc 20221219: %v; want a refusal naming it and the fix", err)
	}
	for _, v := range []struct {
		line    string
		version [3]int
	}{{"runsc version release-20240513.0", [3]int{20240513, 0, 0}}, {"runsc version release-20260905.0", [3]int{20260905, 0, 0}}} {
		newer := &Runtime{Kind: KindRunsc, VersionLine: v.line, version: v.version}
		if runscUnsealedForTests() {
			t.Log("SEALRUN_TEST_RUNSC_UNSEALED=1: refusals of gVisor after 2023 are lifted in this test build")
			continue
		}
		if err := newer.UsableHere(); err == nil || !strings.Contains(err.Error(), v.line) || !strings.Contains(err.Error(), "runc or crun") ||
			!strings.Contains(err.Error(), "pids or memory limit") || !strings.Contains(err.Error(), "agent socket") {
			t.Errorf("%s: %v; want a refusal naming it, what the newest tried release did and the fix", v.line, err)
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
