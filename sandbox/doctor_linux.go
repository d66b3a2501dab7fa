package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/containerd/cgroups/v3"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netns"
)

// Check is one line of sealrun doctor.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // ok, warn, fail
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Doctor checks that this host can run sealed runs. It changes nothing except a netns it
// creates and deletes to prove it can.
func Doctor(ctx context.Context, cfg HostConfig, stateDir string) []Check {
	var out []Check
	add := func(name, status, detail, fix string) { out = append(out, Check{name, status, detail, fix}) }
	if os.Geteuid() == 0 {
		add("root", "ok", "running as root", "")
	} else {
		add("root", "fail", fmt.Sprintf("running as uid %d", os.Geteuid()), "run sealrun doctor and the daemon as root")
	}
	rtName := cfg.Runtime
	if rtName == "" {
		rtName = "runc"
	}
	if path, err := exec.LookPath(rtName); err != nil {
		add("runtime", "fail", fmt.Sprintf("%s not found", rtName), "apt-get install runc (or make deps)")
	} else {
		out2, err := exec.CommandContext(ctx, path, "--version").Output()
		line, _, _ := strings.Cut(string(out2), "\n")
		switch {
		case err != nil:
			add("runtime", "fail", fmt.Sprintf("%s --version failed: %v", path, err), "reinstall the runtime")
		case strings.HasPrefix(line, "runc version 1.0") || strings.HasPrefix(line, "runc version 0."):
			add("runtime", "fail", fmt.Sprintf("%s: %s is too old (createRuntime hooks and umask need runc 1.1)", path, line), "install runc 1.1 or later")
		default:
			add("runtime", "ok", fmt.Sprintf("%s: %s", path, line), "")
		}
	}
	mode := CgroupMode()
	switch mode {
	case "unavailable":
		add("cgroups", "fail", "no cgroup hierarchy is mounted", "mount cgroup v2 at /sys/fs/cgroup (or v1 controllers)")
	default:
		missing := missingControllers()
		if len(missing) > 0 {
			add("cgroups", "fail", fmt.Sprintf("%s, missing controllers: %s", mode, strings.Join(missing, ", ")), "enable the cpu, memory, pids and devices controllers (kernel command line / systemd)")
		} else {
			add("cgroups", "ok", fmt.Sprintf("%s with cpu, memory, pids, devices, freezer", mode), "")
		}
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		add("user namespaces", "fail", "user namespaces are disabled", "sysctl user.max_user_namespaces=15000")
	} else {
		add("user namespaces", "ok", "max_user_namespaces "+strings.TrimSpace(string(b)), "")
	}
	name := Prefix + "doctor-" + strconv.Itoa(os.Getpid())
	if err := createGatewayNetns(name); err != nil {
		add("network namespaces", "fail", err.Error(), "the kernel needs CONFIG_NET_NS and veth support")
	} else {
		netns.DeleteNamed(name)
		add("network namespaces", "ok", "created and removed a namespace with loopback", "")
	}
	if err := checkIdmap(stateDir); err != nil {
		add("idmapped mounts", "fail", err.Error(), "Linux 5.12+ and a filesystem that supports idmapped mounts (ext4, xfs, btrfs) for the state directory; containers refuse to start without them unless the configuration allows unshifted rootfs (image files then appear owned by nobody inside)")
	} else {
		add("idmapped mounts", "ok", "image rootfs can be shifted into each container's UID range", "")
	}
	devices, errs := CDIDevices(DefaultCDIDirs)
	switch {
	case len(errs) > 0:
		add("GPUs (CDI)", "fail", fmt.Sprintf("%d invalid CDI spec(s): %v", len(errs), errs[0]), "regenerate the specs (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)")
	case len(devices) == 0:
		add("GPUs (CDI)", "warn", "no CDI devices in "+strings.Join(DefaultCDIDirs, ", "), "CPU-only tracks only; for GPUs: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
	default:
		add("GPUs (CDI)", "ok", strings.Join(devices, ", "), "")
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
	if left := leftovers(); left != "" {
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

func missingControllers() []string {
	var missing []string
	if cgroups.Mode() == cgroups.Unified {
		b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		have := strings.Fields(string(b))
		for _, c := range []string{"cpu", "memory", "pids"} {
			found := false
			for _, h := range have {
				found = found || h == c
			}
			if !found {
				missing = append(missing, c)
			}
		}
		return missing
	}
	for _, c := range []string{"cpu", "memory", "pids", "devices", "freezer"} {
		if _, err := os.Stat("/sys/fs/cgroup/" + c); err != nil {
			missing = append(missing, c)
		}
	}
	return missing
}

// leftovers describes sealrun objects found on the host, or "".
func leftovers() string {
	var parts []string
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), Prefix) {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d network namespaces", n))
		}
	}
	for _, m := range cgroupMounts() {
		if entries, err := os.ReadDir(m + CgroupRoot); err == nil && len(entries) > 0 {
			n := 0
			for _, e := range entries {
				if e.IsDir() {
					n++
				}
			}
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%d run cgroups", n))
				break
			}
		}
	}
	return strings.Join(parts, ", ")
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
