package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/internal/testenv"
)

// The allow rules of a device cgroup, compiled and read back, are the rules. (sandbox's
// TestSpecDeviceRules checks the rules its specs give.)
func TestDeviceFilterRoundTrip(t *testing.T) {
	i := func(n int64) *int64 { return &n }
	rules, err := AllowRules([]specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i(1), Minor: i(3), Access: "rwm"},
		{Allow: true, Type: "c", Major: i(136), Access: "rwm"},
		{Allow: true, Type: "c", Major: i(195), Minor: i(0), Access: "rw"},
		{Allow: true, Type: "b", Major: i(8), Minor: i(1), Access: "r"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	if want := []string{"c 1:3 rwm", "c 136:* rwm", "c 195:0 rw", "b 8:1 r"}; !slices.Equal(got, want) {
		t.Fatalf("rules %q, want %q", got, want)
	}
	back, err := decodeDeviceFilter(deviceFilterProgram(rules))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back, rules) {
		t.Errorf("decoded %v, want %v", back, rules)
	}
	if _, err := decodeDeviceFilter(deviceFilterProgram(nil)[:3]); err == nil {
		t.Error("a truncated program decoded")
	}
	prog := deviceFilterProgram(rules)
	prog[len(prog)-2].imm = 1 // allow by default
	if _, err := decodeDeviceFilter(prog); err == nil {
		t.Error("a program that allows by default decoded as a sealrun filter")
	}
	for _, bad := range [][]specs.LinuxDeviceCgroup{
		{{Allow: true, Type: "x", Access: "r"}},
		{{Allow: true, Type: "c", Access: "rx"}},
		{{Allow: false, Access: "rwm"}, {Allow: false, Type: "c", Access: "w"}},
	} {
		if _, err := AllowRules(bad); err == nil {
			t.Errorf("rules %+v accepted", bad)
		}
	}
}

// unifiedMount is where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a v2 host,
// /sys/fs/cgroup/unified on a hybrid one (device programs attached there hold on hybrid hosts
// too: the kernel runs them before the v1 device cgroup).
func unifiedMount(t *testing.T) string {
	t.Helper()
	for _, m := range Mounts() {
		if st, err := os.Stat(filepath.Join(m, "cgroup.controllers")); err == nil && !st.IsDir() {
			return m
		}
	}
	t.Skip("no cgroup v2 hierarchy is mounted (a pure v1 host)")
	return ""
}

// The filter, attached for real, lets a process in its cgroup open exactly the allowed nodes. The
// process is root on the host: only the device program stands in its way. Stand-in nodes of
// memory devices (which open without a driver of their own) show allowed from denied.
func TestDeviceFilterEnforced(t *testing.T) {
	testenv.RequireRoot(t)
	mnt := unifiedMount(t)
	dir := filepath.Join(mnt, fmt.Sprintf("sealrun-devfilter-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) }) // the shell has exited: the cgroup is empty
	nodes := t.TempDir()
	mk := func(name string, major, minor int) string {
		p := filepath.Join(nodes, name)
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, major<<8|minor); err != nil {
			t.Fatal(err)
		}
		return p
	}
	zero, full, random := mk("zero", 1, 5), mk("full", 1, 7), mk("random", 1, 8)
	rules := []DevRule{{'c', 1, 3, "rwm"}, {'c', 1, 5, "rw"}, {'c', 1, 7, "r"}}
	if err := AttachDeviceFilter(dir, rules); err != nil {
		t.Fatal(err)
	}
	got, others, err := EffectiveDeviceRules(dir)
	if want := []string{"c 1:3 rwm", "c 1:5 rw", "c 1:7 r"}; err != nil || others != 0 || !slices.Equal(got, want) {
		t.Fatalf("read back %q (others %d): %v; want %q", got, others, err, want)
	}
	// A shell that moves itself into the cgroup before it opens anything.
	script := fmt.Sprintf(`echo $$ > %s/cgroup.procs || exit 9
try() { if [ "$2" = w ]; then (exec 3>"$1") 2>/dev/null; else (exec 3<"$1") 2>/dev/null; fi && echo "$1 $2 ok" || echo "$1 $2 denied"; }
try %s r; try %s w; try %s r; try %s w; try %s r; try /dev/null w`, dir, zero, zero, full, full, random)
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := []string{zero + " r ok", zero + " w ok", full + " r ok", full + " w denied", random + " r denied", "/dev/null w ok"}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); !slices.Equal(lines, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// A cgroup without the filter is reported as such.
	bare := dir + "-bare"
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(bare)
	if _, _, err := EffectiveDeviceRules(bare); err == nil || !strings.Contains(err.Error(), "no sealrun device filter") {
		t.Errorf("a cgroup without the filter: %v", err)
	}
	if err := AttachDeviceFilter(filepath.Join(mnt, "no-such-cgroup-sealrun"), rules); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("attach to a missing cgroup: %v", err)
	}
}

// On cgroup v1 (what runsc gets its device rules through): the container's cgroup allows exactly
// the rules, and a cgroup made below it afterwards (the runtime's leaf) inherits them and cannot
// widen them.
func TestLimitDevicesV1(t *testing.T) {
	testenv.RequireRoot(t)
	base := "/sys/fs/cgroup/devices"
	if _, err := os.Stat(filepath.Join(base, "devices.list")); err != nil {
		t.Logf("no cgroup v1 device hierarchy here (%s): the eBPF filter is the device cgroup (TestDeviceFilterEnforced)", Mode())
		return
	}
	rel := fmt.Sprintf("sealrun-devlimit-test-%d", os.Getpid())
	dir := filepath.Join(base, rel)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(dir, "leaf")); os.Remove(dir) })
	if err := LimitDevicesV1(rel, []DevRule{{'c', 1, 3, "rwm"}, {'c', 136, -1, "rwm"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "leaf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "leaf")} {
		b, _ := os.ReadFile(filepath.Join(d, "devices.list"))
		if got := strings.Fields(strings.ReplaceAll(string(b), "\n", ",")); strings.Join(got, " ") != "c 1:3 rwm,c 136:* rwm," {
			t.Errorf("%s: devices.list %q; want the two rules", d, b)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "leaf", "devices.allow"), []byte("a"), 0); err == nil {
		t.Error("the leaf widened its device rules to all")
	}
	if err := LimitDevicesV1("sealrun-no-such-cgroup", nil); err == nil || !strings.Contains(err.Error(), "sealrun-no-such-cgroup") {
		t.Errorf("a missing cgroup: %v; want an error naming it", err)
	}
}

// containerd/cgroups/v3 (already a dependency) has a device filter of its own: cgroup2's
// DeviceFilter (the code runc generates its program with) and LoadAttachCgroupDeviceFilter.
// sealrun keeps its own for what that one cannot do, shown here on a real kernel: the library's
// program, attached the library's way, carries no name, so among a container's effective
// programs it cannot be told from the runtime's (which is made by the same code, wider); and its
// instructions are not a shape a probe can read back into rules. Both are what the probe
// (EffectiveDeviceRules) needs. It also refuses a rule whose type is unset and panics on one
// whose major or minor is, which the runtime spec defines as all and any. Where they meet, they
// agree: for the same spec rules, the
// library's program and sealrun's allow and deny the same opens.
func TestDeviceFilterAgainstContainerd(t *testing.T) {
	testenv.RequireRoot(t)
	mnt := unifiedMount(t)
	i := func(n int64) *int64 { return &n }
	spec := []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: i(1), Minor: i(3), Access: "rwm"},
		{Allow: true, Type: "c", Major: i(1), Minor: i(5), Access: "rw"},
		{Allow: true, Type: "c", Major: i(1), Minor: i(7), Access: "r"}}
	rules, err := AllowRules(spec)
	if err != nil {
		t.Fatal(err)
	}
	nodes := t.TempDir()
	for _, n := range []struct {
		name         string
		major, minor int
	}{{"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}} {
		if err := syscall.Mknod(filepath.Join(nodes, n.name), syscall.S_IFCHR|0o666, n.major<<8|n.minor); err != nil {
			t.Fatal(err)
		}
	}
	opens := func(dir string) string {
		script := fmt.Sprintf(`echo $$ > %s/cgroup.procs || exit 9
try() { if [ "$2" = w ]; then (exec 3>"$1") 2>/dev/null; else (exec 3<"$1") 2>/dev/null; fi && echo "$1 $2 ok" || echo "$1 $2 denied"; }
for f in zero full random; do try %s/$f r; try %s/$f w; done; try /dev/null w`, dir, nodes, nodes)
		out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return string(out)
	}
	cgroupDir := func(which string) string {
		dir := filepath.Join(mnt, fmt.Sprintf("sealrun-devfilter-%s-%d", which, os.Getpid()))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
		return dir
	}

	ours := cgroupDir("ours")
	if err := AttachDeviceFilter(ours, rules); err != nil {
		t.Fatal(err)
	}
	theirs := cgroupDir("containerd")
	// The runtime spec leaves a rule's type unset to mean all (a), and its major or minor unset
	// to mean any, as sealrun's specs do (the leading deny-all; the ptys' c 136:*). The library
	// refuses the first and dereferences the second (a panic); it is given "a" and -1.
	if _, _, err := cgroup2.DeviceFilter(spec); err == nil {
		t.Error("containerd's DeviceFilter now takes a rule with its type unset: see whether sealrun can use it")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("containerd's DeviceFilter now takes a rule with its minor unset: see whether sealrun can use it")
			}
		}()
		cgroup2.DeviceFilter([]specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: i(136), Access: "rwm"}})
	}()
	lib := slices.Clone(spec)
	for k := range lib {
		if lib[k].Type == "" {
			lib[k].Type = "a"
		}
		if lib[k].Major == nil {
			lib[k].Major = i(-1)
		}
		if lib[k].Minor == nil {
			lib[k].Minor = i(-1)
		}
	}
	insts, license, err := cgroup2.DeviceFilter(lib)
	if err != nil {
		t.Fatalf("containerd's DeviceFilter: %v", err)
	}
	fd, err := os.Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	detach, err := cgroup2.LoadAttachCgroupDeviceFilter(insts, license, int(fd.Fd()))
	if err != nil {
		t.Fatalf("containerd's LoadAttachCgroupDeviceFilter: %v", err)
	}
	defer detach()

	if a, b := opens(ours), opens(theirs); a != b {
		t.Errorf("for the same rules, sealrun's filter and containerd's differ:\nsealrun's\n%s\ncontainerd's\n%s", a, b)
	} else if !strings.Contains(a, nodes+"/full w denied") || !strings.Contains(a, nodes+"/random r denied") || !strings.Contains(a, nodes+"/zero w ok") {
		t.Errorf("the opens are not the rules':\n%s", a)
	}

	ids, err := deviceFilterIDs(theirs, false)
	if err != nil || len(ids) != 1 {
		t.Fatalf("containerd's program on %s: %v %v", theirs, ids, err)
	}
	name, prog, err := readDeviceFilter(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if name == DeviceFilterName {
		t.Errorf("containerd's program is named %q: the probe could tell it apart, and sealrun could use it", name)
	}
	if _, err := decodeDeviceFilter(prog); err == nil {
		t.Error("containerd's program reads back as rules: the probe could check it, and sealrun could use it")
	}
	if _, _, err := EffectiveDeviceRules(theirs); err == nil {
		t.Error("the probe found a sealrun filter above a cgroup that has only containerd's")
	}
	t.Logf("containerd's program: %d instructions, named %q, not readable as rules; sealrun's: %d instructions, named %q", len(prog), name, len(deviceFilterProgram(rules)), DeviceFilterName)
}
