package sandbox

import (
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

// Debian 12's gVisor cannot start sealrun's containers: it is refused by name, with what to use
// instead; a later release is let through (and its containers' own checks decide).
func TestRunscRefusedWhereItCannotRun(t *testing.T) {
	old := &Runtime{Kind: KindRunsc, VersionLine: "runsc version 0.0~20221219.0", version: [3]int{0, 0, 20221219}}
	if err := old.UsableHere(); err == nil || !strings.Contains(err.Error(), "gVisor") || !strings.Contains(err.Error(), "20221219") || !strings.Contains(err.Error(), "runc or crun") {
		t.Errorf("runsc 20221219: %v; want a refusal naming it and the fix", err)
	}
	newer := &Runtime{Kind: KindRunsc, VersionLine: "runsc version release-20240513.0", version: [3]int{20240513, 0, 0}}
	if err := newer.UsableHere(); err != nil {
		t.Errorf("runsc 20240513: %v", err)
	}
}
