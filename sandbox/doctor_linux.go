package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// Check is one line of sealrun doctor.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Doctor checks that this host can run sealed runs. It changes nothing except a netns it creates
// and deletes to prove it can. It is long because it is the list of checks, in the order the doctor
// prints them.
func Doctor(ctx context.Context, cfg HostConfig, stateDir string) []Check {
	var out []Check
	add := func(name, status, detail, fix string) { out = append(out, Check{name, status, detail, fix}) }
	if os.Geteuid() == 0 {
		add("root", "ok", "running as root", "")
	} else {
		add("root", "fail", fmt.Sprintf("running as uid %d", os.Geteuid()), "run sealrun doctor and the daemon as root")
	}
	runtimeChecks(cfg, add)
	cgroupChecks(ctx, add)
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		add("user namespaces", "fail", "user namespaces are disabled", "sysctl user.max_user_namespaces=15000")
	} else {
		add("user namespaces", "ok", "max_user_namespaces "+strings.TrimSpace(string(b)), "")
	}
	netnsDir := cfg.NetnsDir
	if netnsDir == "" {
		netnsDir = DefaultNetnsDir
	}
	name := filepath.Join(netnsDir, Prefix+"doctor-"+strconv.Itoa(os.Getpid()))
	if err := createGatewayNetns(name); err != nil {
		add("network namespaces", "fail", err.Error(), "the kernel needs CONFIG_NET_NS and veth support")
	} else if err := deleteNetns(name); err != nil {
		add("network namespaces", "fail", "created a namespace with loopback, but could not remove it: "+err.Error(), "see what holds "+name+" in /proc/self/mountinfo")
	} else {
		add("network namespaces", "ok", "created and removed a namespace with loopback in "+netnsDir, "")
	}
	rel, _, _ := kernelRelease()
	fsType := filesystemOf(stateDir)
	if err := checkIdmap(stateDir); err != nil {
		add("idmapped mounts", "fail", fmt.Sprintf("Linux %s, %s on %s: %v", rel, stateDir, fsType, err), "Linux 5.12+ and a filesystem that supports idmapped mounts (ext4, xfs, btrfs; tmpfs from 6.3) for the state directory; containers refuse to start without them unless the configuration allows unshifted rootfs (image files then appear owned by nobody inside)")
	} else {
		add("idmapped mounts", "ok", fmt.Sprintf("Linux %s, %s on %s: image rootfs can be shifted into each container's UID range", rel, stateDir, fsType), "")
	}
	for _, c := range gpuChecks(DefaultCDIDirs, "/proc") {
		add(c.Name, c.Status, c.Detail, c.Fix)
	}
	var st syscall.Statfs_t
	dir := stateDir
	for dir != "/" {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = dirOf(dir)
	}
	if err := syscall.Statfs(dir, &st); err != nil {
		add("disk", "fail", err.Error(), "create "+stateDir)
	} else {
		free := st.Bavail * uint64(st.Bsize)
		gib := float64(free) / (1 << 30)
		switch {
		case gib < 2:
			add("disk", "fail", fmt.Sprintf("%.1f GiB free under %s", gib, dir), "free space: images and workspaces need tens of GiB")
		case gib < 20:
			add("disk", "warn", fmt.Sprintf("%.1f GiB free under %s", gib, dir), "a python image with torch is 1.5 GiB unpacked; keep 20 GiB free")
		default:
			add("disk", "ok", fmt.Sprintf("%.1f GiB free under %s", gib, dir), "")
		}
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		add("workspace quota", "fail", "mkfs.ext4 not found", "apt-get install e2fsprogs (or make deps)")
	} else if _, err := os.Stat("/dev/loop-control"); err != nil {
		add("workspace quota", "fail", "no /dev/loop-control: loop devices are unavailable", "modprobe loop")
	} else {
		add("workspace quota", "ok", "mkfs.ext4 and loop devices: each run's /workspace gets a filesystem of its quota's size", "")
	}
	if fi, err := os.Stat(stateDir); err == nil && fi.Mode().Perm()&0o001 == 0 {
		add("state directory", "fail", fmt.Sprintf("%s is %v: containers (unprivileged mapped users) cannot reach image rootfs under it", stateDir, fi.Mode().Perm()), "chmod 0711 "+stateDir)
	} else if err == nil {
		add("state directory", "ok", fmt.Sprintf("%s (%v)", stateDir, fi.Mode().Perm()), "")
	}
	if left := leftovers(runRoots(ctx), netnsDir); left != "" {
		add("leftovers", "warn", left, "sealrun sandbox reap (removes what a crashed run left)")
	} else {
		add("leftovers", "ok", "no sealrun containers, netns or cgroups left", "")
	}
	return out
}

func dirOf(p string) string {
	i := strings.LastIndexByte(strings.TrimRight(p, "/"), '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// missingControllers lists the v1 controllers sealrun needs that are not mounted.
func missingControllers() []string {
	var missing []string
	for _, c := range []string{"cpu", "cpuacct", "memory", "pids", "devices", "freezer"} {
		if _, err := os.Stat("/sys/fs/cgroup/" + c); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

// leftovers describes sealrun objects found on the host, or "": network namespaces (in netnsDir
// and where earlier sealrun kept them; those a later mount hides, by name), and run cgroups under
// any of roots.
func leftovers(roots []string, netnsDir string) string {
	var parts []string
	n := 0
	for _, dir := range []string{netnsDir, LegacyNetnsDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), Prefix) {
				n++
			}
		}
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("%d network namespaces", n))
	}
	if stranded := StrandedNetns(netnsDir); len(stranded) > 0 {
		parts = append(parts, fmt.Sprintf("%d network namespaces hidden under a later mount of their directory (%s)", len(stranded), strings.Join(stranded, ", ")))
	}
	seen := map[string]bool{}
	for _, m := range cgroup.Mounts() {
		for _, root := range roots {
			entries, _ := os.ReadDir(filepath.Join(m, root))
			for _, e := range entries {
				if e.IsDir() {
					seen[root+"/"+e.Name()] = true
				}
			}
		}
	}
	if len(seen) > 0 {
		parts = append(parts, fmt.Sprintf("%d run cgroups", len(seen)))
	}
	return strings.Join(parts, ", ")
}

// filesystemOf names the filesystem type of the mount holding dir (or its nearest existing parent).
func filesystemOf(dir string) string {
	for dir != "/" {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		dir = dirOf(dir)
	}
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return "an unknown filesystem"
	}
	names := map[int64]string{0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x01021994: "tmpfs", 0x794c7630: "overlayfs", 0x65735546: "fuse", 0x6969: "nfs", 0x2fc12fc1: "zfs"}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("filesystem type 0x%x", st.Type)
}

// checkIdmap makes an idmapped mount of a scratch directory on the state directory's filesystem.
func checkIdmap(stateDir string) error {
	if err := os.MkdirAll(stateDir, 0o711); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(stateDir, ".idmap-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := dir + "/src"
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: RangeBase, Size: RangeSize}}
	target := dir + "/mnt"
	if err := shiftedRootfs(src, target, m, m); err != nil {
		return err
	}
	return unmountRootfs(target)
}

// gpuChecks: the CDI devices of the host and, for NVIDIA's, the driver's word on them: each GPU's
// model and bus, the loaded driver, and whether the CDI spec was generated for that driver.
func gpuChecks(dirs []string, procRoot string) []Check {
	const name = "GPUs (CDI)"
	regen := "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (without NVIDIA's Container Toolkit: sealrun sandbox cdi)"
	devices, errs := CDIDevices(dirs)
	switch {
	case len(errs) > 0:
		return []Check{{name, "fail", fmt.Sprintf("%d invalid CDI spec(s): %v", len(errs), errs[0]), "regenerate the specs (" + regen + ")"}}
	case len(devices) == 0:
		return []Check{{name, "warn", "no CDI devices in " + strings.Join(dirs, ", "), "CPU-only tracks only; for GPUs: " + regen}}
	}
	facts, err := GPUFacts(dirs, procRoot, devices)
	if err != nil {
		return []Check{{name, "fail", err.Error(), regen}}
	}
	var parts, stale []string
	nvidia, driver := false, ""
	for _, f := range facts {
		desc := f.Name
		if f.Model != "" {
			desc += fmt.Sprintf(" (%s, %s)", f.Model, f.BusID)
		}
		parts = append(parts, desc)
		if strings.HasPrefix(f.Name, "nvidia.com/") {
			nvidia = true
		}
		if f.Driver != "" {
			driver = f.Driver
		}
		if f.Stale() {
			stale = append(stale, fmt.Sprintf("%s was generated for driver %s", f.SpecFile, f.SpecDriver))
		}
	}
	out := []Check{{name, "ok", strings.Join(parts, ", "), ""}}
	switch {
	case nvidia && driver == "":
		out = append(out, Check{"GPU driver", "fail", "CDI specs name NVIDIA GPUs but no NVIDIA driver is loaded (" + filepath.Join(procRoot, "driver/nvidia/version") + " is missing)", "install and load the NVIDIA driver (modprobe nvidia), then " + regen})
	case len(stale) > 0:
		out = append(out, Check{"GPU driver", "fail", fmt.Sprintf("the loaded driver is %s but %s: its library mounts are out of date", driver, strings.Join(slices.Compact(stale), "; ")), "regenerate the spec after every driver upgrade: " + regen})
	case driver != "":
		out = append(out, Check{"GPU driver", "ok", "NVIDIA " + driver + "; the CDI specs match it", ""})
	}
	return out
}

// runtimeChecks checks the default runtime and each role's: found, a kind sealrun drives, new
// enough, and able to run containers on this host's cgroups.
func runtimeChecks(cfg HostConfig, add func(name, status, detail, fix string)) {
	def := cfg.Runtime
	if def == "" {
		def = "runc"
	}
	roles := map[string][]string{} // binary -> roles it runs
	var order []string
	for _, role := range Roles {
		b := def
		if r := cfg.RoleRuntimes[role]; r != "" {
			b = r
		}
		if _, ok := roles[b]; !ok {
			order = append(order, b)
		}
		roles[b] = append(roles[b], string(role))
	}
	for _, b := range order {
		name := "runtime"
		if len(order) > 1 {
			name = "runtime (" + strings.Join(roles[b], ", ") + ")"
		}
		rt, err := NewRuntime(b, filepath.Join(os.TempDir(), "sealrun-doctor-runtime"))
		os.RemoveAll(filepath.Join(os.TempDir(), "sealrun-doctor-runtime"))
		switch {
		case err != nil:
			add(name, "fail", err.Error(), "apt-get install runc (or crun; make deps installs both, and gVisor's runsc), or set runtime in sealrun.toml to one that is installed")
		case rt.Kind == KindRunc && !rt.atLeast(1, 1, 0):
			add(name, "fail", fmt.Sprintf("%s: %s is too old (createRuntime hooks and umask need runc 1.1)", rt.Path, rt.VersionLine), "install runc 1.1 or later")
		case rt.UsableHere() != nil:
			add(name, "fail", fmt.Sprintf("%s: %s", rt.Path, rt.UsableHere()), "as it says; or choose runc: runtime = \"runc\" in sealrun.toml ([runtimes] sets it per role)")
		case rt.Kind == KindRunsc && slices.Contains(roles[b], string(RoleController)) && !runscUnsealedForTests():
			add(name, "fail", fmt.Sprintf("%s: %s runs the controller: %s", rt.Path, rt.VersionLine, controllerUnderGVisor), "[runtimes] controller = \"runc\" (or \"crun\") in sealrun.toml")
		default:
			add(name, "ok", fmt.Sprintf("%s: %s", rt.Path, rt.VersionLine), "")
		}
	}
}
