package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealrun/sealrun/sandbox/posture"
)

// runPosture is the posture verb: it reads what the container sees of its own confinement
// (privileges, masked paths, egress, namespaces, sockets, syscalls, limits) and prints it as JSON.
// It is long because it is one probe after another, each writing its field of the record.
func runPosture(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("runner posture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("egress", "", "comma-separated host:port targets to try to connect to")
	wait := fs.Bool("wait", false, "after printing, wait for SIGUSR1 (the host reads its side meanwhile)")
	hold := fs.Duration("hold", 30*time.Second, "longest wait with --wait")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	released := make(chan os.Signal, 1)
	if *wait {
		signal.Notify(released, syscall.SIGUSR1)
	}
	p := posture.Record{Masked: map[string]string{}}
	p.UIDMap = readTrim("/proc/self/uid_map")
	p.GIDMap = readTrim("/proc/self/gid_map")
	status := posture.StatusFields(readTrim("/proc/self/status"))
	p.CapEff = status["CapEff"]
	p.Seccomp, _ = strconv.Atoi(status["Seccomp"])
	p.NoNewPrivs = status["NoNewPrivs"] == "1"
	p.RootfsOwner = -1
	if st, err := os.Stat("/"); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			p.RootfsOwner = int(sys.Uid)
		}
	}
	p.ReadonlyRootfs = true
	for _, path := range []string{"/.sealrun-write-test", "/usr/.sealrun-write-test", "/etc/.sealrun-write-test"} {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600); err == nil {
			f.Close()
			os.Remove(path)
			p.ReadonlyRootfs = false
		}
	}
	p.MaskedPathsOK = true
	for _, path := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug"} {
		b, err := readSome(path)
		p.Masked[path] = describeRead(b, err)
		if err == nil && len(b) > 0 {
			p.MaskedPathsOK = false
		}
	}
	if entries, err := os.ReadDir("/sys/firmware"); err == nil && len(entries) > 0 {
		p.MaskedPathsOK = false
		p.Masked["/sys/firmware"] = fmt.Sprintf("%d entries", len(entries))
	} else {
		p.Masked["/sys/firmware"] = "empty"
	}
	if f, err := os.OpenFile("/proc/sysrq-trigger", os.O_WRONLY, 0); err == nil {
		f.Close()
		p.MaskedPathsOK = false
		p.Masked["/proc/sysrq-trigger"] = "writable"
	} else {
		p.Masked["/proc/sysrq-trigger"] = "not writable"
	}
	if *targets != "" {
		for _, t := range strings.Split(*targets, ",") {
			e := posture.Egress{Target: t}
			conn, err := net.DialTimeout("tcp", t, 700*time.Millisecond)
			if err == nil {
				e.Connected = true
				conn.Close()
			} else {
				e.Error = err.Error()
			}
			p.Egress = append(p.Egress, e)
		}
	}
	p.Nested = nestedNamespaces()
	p.Sockets = socketFamilies()
	p.Syscalls = gatedSyscalls()
	p.Limits = cgroupLimitsInside()
	p.Hostname, _ = os.Hostname()
	p.Cwd, _ = os.Getwd()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		p.EnvKeys = append(p.EnvKeys, k)
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, _ := d.Readdirnames(-1)
		own := strconv.Itoa(int(d.Fd())) // the listing's own descriptor is not one the posture was given
		for _, n := range names {
			if n != own {
				target, _ := os.Readlink(filepath.Join("/proc/self/fd", n))
				p.FDs = append(p.FDs, n+" -> "+target)
			}
		}
		d.Close()
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(p); err != nil {
		fmt.Fprintf(stderr, "runner posture: %v\n", err)
		return 1
	}
	if *wait {
		select {
		case <-released:
		case <-time.After(*hold):
		}
	}
	return 0
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func readSome(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, err := f.Read(buf)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return buf[:n], err
}

func describeRead(b []byte, err error) string {
	switch {
	case err != nil && errors.Is(err, syscall.EACCES), err != nil && errors.Is(err, syscall.EPERM):
		return "permission denied"
	case err != nil:
		return "unreadable: " + err.Error()
	case len(b) == 0:
		return "empty"
	}
	return fmt.Sprintf("readable (%d+ bytes)", len(b))
}

// cgroupLimitsInside reads the container's limits from its own /sys/fs/cgroup, on v2 or v1, in
// one vocabulary: memory and swap in bytes (swap: beyond memory), pids, cpu as "quota period"
// (microseconds; "max" for none), cpuset as the CPU list.
func cgroupLimitsInside() map[string]string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "absent"
		}
		return strings.TrimSpace(string(b))
	}
	out := map[string]string{}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		out["memory"] = read("/sys/fs/cgroup/memory.max")
		out["swap"] = read("/sys/fs/cgroup/memory.swap.max")
		out["pids"] = read("/sys/fs/cgroup/pids.max")
		out["cpu"] = read("/sys/fs/cgroup/cpu.max")
		out["cpuset"] = read("/sys/fs/cgroup/cpuset.cpus.effective")
		out["io"] = ioCaps(read("/sys/fs/cgroup/io.max"), "", "")
		return out
	}
	mem := read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
	out["memory"] = mem
	out["swap"] = "absent"
	if memsw := read("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); memsw != "absent" {
		a, err1 := strconv.ParseInt(memsw, 10, 64)
		b, err2 := strconv.ParseInt(mem, 10, 64)
		if err1 == nil && err2 == nil {
			out["swap"] = strconv.FormatInt(a-b, 10)
		}
	}
	out["pids"] = read("/sys/fs/cgroup/pids/pids.max")
	cpuDir := "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(cpuDir + "/cpu.cfs_quota_us"); err != nil {
		cpuDir = "/sys/fs/cgroup/cpu,cpuacct"
	}
	quota, period := read(cpuDir+"/cpu.cfs_quota_us"), read(cpuDir+"/cpu.cfs_period_us")
	switch {
	case quota == "absent" || period == "absent":
		out["cpu"] = "absent"
	case quota == "-1":
		out["cpu"] = "max " + period
	default:
		out["cpu"] = quota + " " + period
	}
	out["cpuset"] = read("/sys/fs/cgroup/cpuset/cpuset.effective_cpus")
	out["io"] = ioCaps("", read("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device"), read("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device"))
	return out
}

// ioCaps puts the byte-rate caps of io.max (v2) or of blkio.throttle.*_bps_device (v1) into one
// vocabulary: "7:3 rbps=1048576 wbps=2097152" per device, sorted, what is unlimited left out.
func ioCaps(ioMax, v1Read, v1Write string) string {
	caps := map[string][]string{}
	for _, line := range strings.Split(ioMax, "\n") {
		f := strings.Fields(line)
		for _, kv := range f[min(1, len(f)):] {
			if k, v, _ := strings.Cut(kv, "="); (k == "rbps" || k == "wbps") && v != "max" {
				caps[f[0]] = append(caps[f[0]], kv)
			}
		}
	}
	for _, f := range []struct{ text, key string }{{v1Read, "rbps"}, {v1Write, "wbps"}} {
		for _, line := range strings.Split(f.text, "\n") {
			if dev, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
				caps[dev] = append(caps[dev], f.key+"="+v)
			}
		}
	}
	var parts []string
	for dev, c := range caps {
		parts = append(parts, dev+" "+strings.Join(c, " "))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
