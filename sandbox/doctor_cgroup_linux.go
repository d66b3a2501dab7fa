package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
	"github.com/sealrun/sealrun/sandbox/cgroup"
	"golang.org/x/sys/unix"
)

// DaemonUnit is the systemd unit sealrund runs as (deploy/sealrund.service).
const DaemonUnit = "sealrund.service"

// unitFacts is what systemd says of the daemon's unit (systemctl show).
type unitFacts struct {
	LoadState, ActiveState, ControlGroup, Delegate, DelegateControllers string
}

// systemdRunning reports whether systemd is the init system (its runtime directory exists).
func systemdRunning() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// showUnit asks systemctl about unit.
func showUnit(ctx context.Context, unit string) (unitFacts, error) {
	out, err := exec.CommandContext(ctx, "systemctl", "show", unit, "-p", "LoadState,ActiveState,ControlGroup,Delegate,DelegateControllers").Output()
	if err != nil {
		return unitFacts{}, fmt.Errorf("systemctl show %s: %w", unit, err)
	}
	var f unitFacts
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "LoadState":
			f.LoadState = v
		case "ActiveState":
			f.ActiveState = v
		case "ControlGroup":
			f.ControlGroup = v
		case "Delegate":
			f.Delegate = v
		case "DelegateControllers":
			f.DelegateControllers = v
		}
	}
	return f, nil
}

// kernelRelease is uname -r, and its major and minor numbers.
func kernelRelease() (string, int, int) {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "unknown", 0, 0
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	fmt.Sscanf(rel, "%d.%d", &major, &minor)
	return rel, major, minor
}

// cgroupChecks are the doctor's lines about cgroups: the hierarchy and its controllers, the kernel
// features sealrun uses on it (freeze, kill, memory peak, the eBPF device filter), and on a cgroup
// v2 host under systemd whether the daemon's unit delegates its cgroup. It is long because it is
// the list of those checks, in the order printed.
func cgroupChecks(ctx context.Context, add func(name, status, detail, fix string)) {
	mode := cgroup.Mode()
	rel, major, minor := kernelRelease()
	atLeast := func(ma, mi int) bool { return major > ma || major == ma && minor >= mi }
	switch mode {
	case "unavailable":
		add("cgroups", "fail", "no cgroup hierarchy is mounted", "mount cgroup v2 at /sys/fs/cgroup (systemd does at boot)")
		return
	case "v1", "hybrid":
		missing := missingControllers()
		switch {
		case len(missing) > 0:
			add("cgroups", "fail", fmt.Sprintf("%s, missing controllers: %s", mode, strings.Join(missing, ", ")), "enable the cpu, cpuacct, memory, pids, devices and freezer controllers (kernel command line / systemd)")
		default:
			add("cgroups", "warn", fmt.Sprintf("%s (v1 controllers: cpu, cpuacct, memory, pids, devices, freezer): sealed runs hold here, but GPU servers boot cgroup v2 unified, where systemd owns the tree", mode), "boot with systemd.unified_cgroup_hierarchy=1 (the default of Debian 12, Ubuntu 22.04 and RHEL 9)")
		}
		return
	}
	have, _ := cgroup.Controllers("/")
	var missing []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		add("cgroups", "fail", fmt.Sprintf("v2, the root lacks the %s controller(s)", strings.Join(missing, ", ")), "enable them in the kernel (CONFIG_MEMCG, CONFIG_CGROUP_PIDS, CONFIG_CGROUP_SCHED) and do not disable them on the command line (cgroup_disable=)")
	} else {
		optional := ""
		for _, c := range []string{"cpuset", "io"} {
			if !slices.Contains(have, c) {
				optional += "; no " + c + " controller (its limits are not applied)"
			}
		}
		add("cgroups", "ok", fmt.Sprintf("v2 unified with %s%s", strings.Join(have, " "), optional), "")
	}
	var lacking []string
	if !atLeast(5, 14) {
		lacking = append(lacking, "cgroup.kill (5.14)")
	}
	if !atLeast(5, 19) {
		lacking = append(lacking, "memory.peak (5.19; the memory peak is then the last reading)")
	}
	if !atLeast(5, 2) {
		lacking = append(lacking, "cgroup.freeze (5.2)")
	}
	if len(lacking) > 0 {
		add("cgroup features", "warn", fmt.Sprintf("Linux %s lacks %s", rel, strings.Join(lacking, ", ")), "use Linux 5.19 or later (Debian 12's 6.1)")
	} else {
		add("cgroup features", "ok", fmt.Sprintf("Linux %s: cgroup.freeze, cgroup.kill, memory.peak", rel), "")
	}
	if localEvents() {
		add("cgroup features", "fail", "cgroup2 is mounted with memory_localevents: a container's OOM kills are not counted in its parent, and sealrun would miss them", "remount without memory_localevents (systemd does not set it)")
	}
	if err := checkDeviceFilter(); err != nil {
		add("device cgroup", "fail", err.Error(), "a kernel with CONFIG_CGROUP_BPF and CONFIG_BPF_SYSCALL (every distribution kernel has them); sealrun attaches its own eBPF device filter to each container")
	} else {
		add("device cgroup", "ok", "eBPF device filter loaded, attached and read back on a scratch cgroup", "")
	}
	placementChecks(ctx, add)
}

// localEvents reports whether the unified hierarchy is mounted with memory_localevents.
func localEvents() bool {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, " "+cgroup.Mountpoint+" ") && strings.Contains(line, " - cgroup2 ") {
			return strings.Contains(line, "memory_localevents")
		}
	}
	return false
}

// checkDeviceFilter attaches the device filter of the standard nodes to a scratch cgroup, reads it
// back, and removes the cgroup.
func checkDeviceFilter() error {
	dir := filepath.Join(cgroup.Mountpoint, fmt.Sprintf("%sdoctor-%d", Prefix, os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("create a scratch cgroup: %w", err)
	}
	defer os.Remove(dir)
	rules, err := cgroup.AllowRules(resources(DefaultLimits(), nil).Devices)
	if err != nil {
		return err
	}
	if err := cgroup.AttachDeviceFilter(dir, rules); err != nil {
		return err
	}
	got, _, err := cgroup.EffectiveDeviceRules(dir)
	if err != nil {
		return err
	}
	if len(got) != len(rules) {
		return fmt.Errorf("the device filter read back %d rules of %d", len(got), len(rules))
	}
	return nil
}

// placementChecks: where sealrund puts runs on a cgroup v2 host, and whether systemd lets it.
func placementChecks(ctx context.Context, add func(name, status, detail, fix string)) {
	if !systemdRunning() {
		add("cgroup placement", "ok", "no systemd: runs go to "+DefaultCgroupRoot+" at the top of the hierarchy, which sealrun owns", "")
		return
	}
	f, err := showUnit(ctx, DaemonUnit)
	if err != nil {
		add("cgroup placement", "warn", err.Error(), "systemctl must answer for sealrun doctor to check the daemon's unit")
		return
	}
	for _, c := range judgePlacement(f) {
		add(c.Name, c.Status, c.Detail, c.Fix)
	}
}

// judgePlacement turns what systemd says of the daemon's unit into doctor lines. The cgroup's
// delegation mark and controllers are read from /sys/fs/cgroup.
func judgePlacement(f unitFacts) []Check {
	const name = "cgroup placement"
	installFix := "make install (the shipped unit has Delegate=yes), then systemctl daemon-reload"
	switch {
	case f.LoadState != "loaded":
		return []Check{{name, "warn", fmt.Sprintf("%s is not installed (LoadState=%s): a sealrund started by hand outside a delegated unit puts runs at %s, outside systemd's tree, where systemd may move or kill them", DaemonUnit, f.LoadState, DefaultCgroupRoot), installFix}}
	case f.Delegate != "yes":
		return []Check{{name, "fail", fmt.Sprintf("%s has Delegate=%s: systemd owns its cgroup and every cgroup below it, so the runs' cgroups are not sealrun's to make", DaemonUnit, f.Delegate), "add Delegate=yes to [Service] of " + DaemonUnit + " (" + installFix + ")"}}
	case f.ActiveState != "active" || f.ControlGroup == "":
		return []Check{{name, "ok", fmt.Sprintf("%s delegates its cgroup (Delegate=yes); once started its runs go to <its cgroup>/%s", DaemonUnit, cgroup.RunsLeaf), ""}}
	}
	var out []Check
	d := f.ControlGroup
	if !cgroup.Delegated(d) {
		out = append(out, Check{name, "fail", fmt.Sprintf("%s runs in %s, which systemd has not marked delegated (no %s attribute)", DaemonUnit, d, cgroup.DelegateXattr), "systemd 251 or later marks delegated cgroups; restart the unit after adding Delegate=yes"})
	}
	have, err := cgroup.Controllers(d)
	if err != nil {
		return append(out, Check{name, "fail", fmt.Sprintf("read %s: %v", path.Join(d, cgroup.ControllersFile), err), "restart " + DaemonUnit})
	}
	var missing []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return append(out, Check{name, "fail", fmt.Sprintf("%s's cgroup %s was not delegated the %s controller(s) (it has: %s)", DaemonUnit, d, strings.Join(missing, ", "), strings.Join(have, " ")), "set DelegateControllers=cpu cpuset io memory pids (or Delegate=yes) in the unit and make sure its slice has them"})
	}
	procs, _ := os.ReadFile(filepath.Join(cgroup.Mountpoint, d, "cgroup.procs"))
	if n := len(strings.Fields(string(procs))); n > 0 {
		out = append(out, Check{name, "warn", fmt.Sprintf("%d process(es) live in %s itself: sealrund moves into %s/%s when it starts, and no other process may stay", n, d, d, cgroup.SupervisorLeaf), "restart " + DaemonUnit})
	}
	runs := 0
	if entries, err := os.ReadDir(filepath.Join(cgroup.Mountpoint, d, cgroup.RunsLeaf)); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				runs++
			}
		}
	}
	return append(out, Check{name, "ok", fmt.Sprintf("delegated by systemd: runs go to %s/%s (%s live; controllers %s)", d, cgroup.RunsLeaf, strconv.Itoa(runs), strings.Join(have, " ")), ""})
}

// runRoots are the cgroups where runs of this machine's sealruns may be: /sealrun, and below the
// daemon's delegated cgroup.
func runRoots(ctx context.Context) []string {
	roots := []string{DefaultCgroupRoot}
	if cgroups.Mode() == cgroups.Unified && systemdRunning() {
		if f, err := showUnit(ctx, DaemonUnit); err == nil && f.ControlGroup != "" {
			roots = append(roots, path.Join(f.ControlGroup, cgroup.RunsLeaf))
		}
	}
	return roots
}
