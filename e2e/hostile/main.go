// Command hostile is the attack suite's hostile scaffold: one static binary that, in a sealed
// run, tries to break every wall sealrun claims, from each of the three containers, and reports
// each attempt as one JSON row (attack, role, expected, observed, reason, escaped).
//
//	hostile controller      the scaffold: every attack from the controller, then the runner
//	                        role through a compute call, hostile bundles submitted, the attack
//	                        bundle promoted; in a run whose agent's effort is "window" (one of
//	                        its own, its reserve window near), only calls timed against the
//	                        window and a bundle submitted inside it
//	hostile runner          the attacks from inside a compute call (a runner container)
//	hostile bomb KIND       a fork or memory bomb in a compute call of its own
//	hostile bundle MODE     a bundle's entrypoint (grader container): MODE attack runs the
//	                        grader-role attacks, then answers; shift prints extra lines; slow
//	                        sleeps past the question limit; detect reports what it can see;
//	                        bomb runs the fork and memory bombs before answering; plain
//	                        only answers
//
// Under gVisor (attack.json's runtimes) a bomb ends the container's whole sandbox, where runc's
// kernel fails the one fork or kills the one process: there the bombs run where that ending can
// be judged from outside (a call of their own, a bundle of their own), and the rows gVisor
// answers from its own kernel (clone3, its /dev/fuse and /dev/net/tun) are judged as such.
//
// Rows go to stdout as `ROW {json}` (controller, runner; the transcript keeps them) or to
// stderr (bundles; the grading logs keep them). The harness (daemon/attack_test.go) writes
// attack.json into the workspace: the host's addresses and paths to try, and the secrets to look
// for (the hidden exam's answers, the signing key, the provider key), XOR-masked so that the
// workspace never holds them in clear. It prints the table and fails on any escape.
//
// Every attack is harmless when it fails and would be detected when it succeeds: nothing here
// writes to a host path that the harness does not own.
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealrun/sealrun/sandbox/posture"
)

// Config is attack.json.
type Config struct {
	Markers        map[string]string `json:"markers"`         // name -> hex of the secret XOR 0x5a
	HostPaths      []string          `json:"host_paths"`      // host files and dirs to try to open
	WritePaths     []string          `json:"write_paths"`     // host dirs to try to create files in
	TCP            []string          `json:"tcp"`             // host:port listeners the harness opened
	UDP            []string          `json:"udp"`             // host:port UDP echo listeners
	Unix           []string          `json:"unix"`            // host unix sockets (the admin socket)
	HostPrefixes   []string          `json:"host_prefixes"`   // host paths that must not be named inside
	WorkspaceBytes int64             `json:"workspace_bytes"` // the workspace quota
	MemoryBytes    int64             `json:"memory_bytes"`    // the containers' memory limit
	Runtimes       map[string]string `json:"runtimes"`        // role -> runc, crun or runsc
}

// gvisor reports whether this role's containers run under gVisor.
func gvisor() bool { return cfg.Runtimes[role] == "runsc" }

// Row is one attack and its outcome.
type Row struct {
	Attack   string `json:"attack"`
	Role     string `json:"role"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Reason   string `json:"reason"`
	Escaped  bool   `json:"escaped"`
}

var (
	role string
	cfg  Config
	out  io.Writer = os.Stdout
	pfx            = "ROW "
)

func emit(attack, expected, observed, reason string, escaped bool) {
	b, _ := json.Marshal(Row{Attack: attack, Role: role, Expected: expected, Observed: observed, Reason: reason, Escaped: escaped})
	fmt.Fprintf(out, "%s%s\n", pfx, b)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostile controller | runner | bomb fork|memory | bundle MODE | sleep | membomb")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "sleep": // a child of the fork bomb
		time.Sleep(60 * time.Second)
		return
	case "membomb":
		membomb()
		return
	}
	role = os.Args[1]
	if role == "bundle" {
		role, out, pfx = "grader", os.Stderr, ""
	}
	if role == "controller" {
		// As a scaffold image, its configuration and itself are in the image: the rest of the
		// attacks use them from the workspace (bundles are made of them, the runner role runs them).
		if _, err := os.Stat("attack.json"); err != nil {
			copyFile("/etc/hostile/attack.json", "attack.json", 0o644)
		}
		if _, err := os.Stat("hostile"); err != nil {
			self, _ := os.Executable()
			copyFile(self, "hostile", 0o755)
		}
		// The runner client too: its posture verb is the kernel attacks' probe, and a compute
		// call's only sealrun binary is the call shim, which has none.
		if _, err := os.Stat("runner"); err != nil {
			copyFile("/usr/local/bin/runner", "runner", 0o755)
		}
	}
	b, err := os.ReadFile("attack.json")
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hostile: attack.json in %s: %v\n", cwd(), err)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "controller":
		controller()
	case "runner":
		common(false) // the bombs run in calls of their own (controller)
	case "bomb":
		role = "runner"
		if len(os.Args) > 2 && os.Args[2] == "memory" {
			memoryBomb()
		} else {
			forkBomb()
		}
	case "bundle":
		mode := "attack"
		if len(os.Args) > 2 {
			mode = os.Args[2]
		}
		bundle(mode)
	default:
		fmt.Fprintf(os.Stderr, "hostile: unknown role %q\n", os.Args[1])
		os.Exit(2)
	}
}

func cwd() string { d, _ := os.Getwd(); return d }

// common is what every role tries: network, filesystem, kernel surfaces, resources, the clock;
// the fork and memory bombs last, and only where asked.
func common(bombs bool) {
	network()
	filesystem()
	kernel()
	fill("/tmp", 0, "the /tmp tmpfs size")
	clock()
	if bombs {
		forkBomb()
		memoryBomb()
	}
}

// ---- network ----

// network tries every way out of the controller's network namespace: the TCP and UDP targets it
// is given, DNS, raw and packet sockets, IPv6, vsock, the Unix sockets it is given and any other
// socket file inside. It is long because it is the attack suite's list of attempts, each recorded.
func network() {
	for _, t := range cfg.TCP {
		c, err := net.DialTimeout("tcp", t, 700*time.Millisecond)
		if err == nil {
			c.Close()
			emit("tcp connect "+t, "refused", "CONNECTED", "", true)
			continue
		}
		emit("tcp connect "+t, "refused", short(err), netReason(), false)
	}
	for _, t := range cfg.UDP {
		got, err := udpEcho(t)
		emit("udp "+t, "no answer", orErr(got, err), netReason(), got != "")
	}
	// DNS: the resolver of /etc/resolv.conf (if any), a public resolver, a name lookup.
	servers := []string{"8.8.8.8:53", "[2001:4860:4860::8888]:53"}
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "nameserver" {
				servers = append(servers, net.JoinHostPort(f[1], "53"))
			}
		}
	}
	for _, s := range servers {
		got, err := udpEcho(s)
		emit("dns query to "+s, "no answer", orErr(got, err), netReason(), got != "")
	}
	addrs, err := net.LookupHost("deb.debian.org")
	emit("dns lookup deb.debian.org", "fails", orErr(strings.Join(addrs, ","), err), netReason(), len(addrs) > 0)
	// Raw and packet sockets, IPv6 to the outside, vsock to the hypervisor.
	for _, s := range []struct {
		name               string
		family, typ, proto int
		reason             string
	}{
		{"raw socket AF_INET/ICMP", syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP, "no CAP_NET_RAW"},
		{"raw socket AF_INET6/ICMPv6", syscall.AF_INET6, syscall.SOCK_RAW, syscall.IPPROTO_ICMPV6, "no CAP_NET_RAW"},
		{"packet socket AF_PACKET", syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300, "the seccomp filter refuses the family"},
		{"vsock AF_VSOCK", 40, syscall.SOCK_STREAM, 0, "the seccomp filter refuses the family"},
	} {
		fd, err := syscall.Socket(s.family, s.typ|syscall.SOCK_CLOEXEC, s.proto)
		if err == nil {
			syscall.Close(fd)
			emit(s.name, "refused", "CREATED", "", true)
			continue
		}
		emit(s.name, "refused", short(err), s.reason, false)
	}
	if c, err := net.DialTimeout("tcp6", "[2001:4860:4860::8888]:443", 700*time.Millisecond); err == nil {
		c.Close()
		emit("tcp6 connect to the internet", "refused", "CONNECTED", "", true)
	} else {
		emit("tcp6 connect to the internet", "refused", short(err), netReason(), false)
	}
	for _, s := range cfg.Unix {
		c, err := net.DialTimeout("unix", s, time.Second)
		if err == nil {
			c.Close()
			emit("admin socket "+s, "absent", "CONNECTED", "", true)
			continue
		}
		emit("admin socket "+s, "absent", short(err), "the host's /run is not mounted in any container", false)
	}
	// Any other socket file reachable inside.
	var socks []string
	for _, root := range []string{"/run", "/var/run", "/tmp", "/workspace", "/bundle", "/dev"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSocket != 0 {
				socks = append(socks, p)
			}
			return nil
		})
	}
	var bad []string
	for _, s := range socks {
		if s != "/run/sealrun/agent.sock" {
			bad = append(bad, s)
		}
	}
	emit("find unix sockets other than the agent socket", "none", orNone(bad), "only the run's own agent socket is mounted (controller)", len(bad) > 0)
}

func netReason() string {
	if role == "controller" {
		return "the controller's netns has one route: its own gateway's /30"
	}
	return "the container's netns has only lo"
}

func udpEcho(addr string) (string, error) {
	c, err := net.DialTimeout("udp", addr, 500*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// A DNS query for deb.debian.org A; an echo listener answers anything.
	q, _ := hex.DecodeString("abcd01000001000000000000036465620664656269616e036f72670000010001")
	if _, err := c.Write(q); err != nil {
		return "", err
	}
	c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n > 0 {
		return fmt.Sprintf("ANSWERED (%d bytes)", n), nil
	}
	return "", err
}

// gateway: the controller's one route, asked for what it must not give.
func gateway() {
	gw := os.Getenv("SEALRUN_GATEWAY")
	host := strings.TrimPrefix(gw, "http://")
	ip, port, _ := net.SplitHostPort(host)
	model := os.Getenv("SEALRUN_MODEL")
	cl := &http.Client{Timeout: 5 * time.Second}
	req := func(method, path, body string) string {
		r, err := http.NewRequest(method, gw+path, strings.NewReader(body))
		if err != nil {
			return short(err)
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer sealrun-gateway-injects-the-key")
		resp, err := cl.Do(r)
		if err != nil {
			return short(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Sprintf("%d %s", resp.StatusCode, firstLine(string(b)))
	}
	for _, c := range []struct{ name, method, path, body string }{
		{"gateway: another model", "POST", "/v1/chat/completions", `{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`},
		{"gateway: a non-allowlisted path (files)", "GET", "/v1/files", ""},
		{"gateway: path traversal to /admin", "GET", "/v1/../../admin", ""},
		{"gateway: encoded traversal", "GET", "/v1/%2e%2e/%2e%2e/v1/files", ""},
		{"gateway: an absolute URL to another host", "GET", "/http://169.254.169.254/latest/meta-data/", ""},
		{"gateway: the model pinned, another effort", "POST", "/v1/chat/completions", `{"model":"` + model + `","reasoning_effort":"low","messages":[{"role":"user","content":"hi"}]}`},
	} {
		got := req(c.method, c.path, c.body)
		ok := strings.HasPrefix(got, "2")
		emit(c.name, "refused (4xx)", got, "the gateway's allowlist and model pin (controller/GATEWAY.md)", ok)
	}
	// The model list: the gateway answers it itself, naming the pinned model alone.
	got := req("GET", "/v1/models", "")
	emit("gateway: list the provider's models", "the pinned model alone (answered by the gateway)", got,
		"the gateway never forwards it (controller/GATEWAY.md)", strings.HasPrefix(got, "2") && strings.Count(got, `"id"`) != 1)
	// The gateway's address on other ports, and its /30 neighbour.
	var targets []string
	for _, p := range []string{"22", "53", "80", "443", "8080", "8443", nextPort(port)} {
		if p != port {
			targets = append(targets, net.JoinHostPort(ip, p))
		}
	}
	if p := net.ParseIP(ip).To4(); p != nil {
		p[3]++
		targets = append(targets, net.JoinHostPort(p.String(), port))
	}
	for _, t := range targets {
		c, err := net.DialTimeout("tcp", t, 700*time.Millisecond)
		if err == nil {
			c.Close()
			emit("gateway netns: other port "+t, "refused", "CONNECTED", "", true)
			continue
		}
		emit("gateway netns: other port "+t, "refused", short(err), "the gateway netns listens on one port; every other run's gateway is in its own netns", false)
	}
}

func nextPort(p string) string { n, _ := strconv.Atoi(p); return strconv.Itoa(n + 1) }

// ---- filesystem ----

func markers() map[string][]byte {
	m := map[string][]byte{}
	for k, v := range cfg.Markers {
		b, _ := hex.DecodeString(v)
		for i := range b {
			b[i] ^= 0x5a
		}
		m[k] = b
	}
	return m
}

// filesystem tries to reach the host's files (directly and through every visible process's root
// and cwd), to write outside the workspace, to find the secrets on any mount, and reads what the
// mount table says of the host. It is long because it is the attack suite's list of attempts, each
// recorded.
func filesystem() {
	for _, p := range cfg.HostPaths {
		tries := []string{p, "/proc/1/root" + p, "/proc/self/root/../../.." + p, "/proc/1/cwd/../../.." + p}
		// Every process visible inside, by its root and cwd links.
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				tries = append(tries, "/proc/"+e.Name()+"/root"+p)
			}
		}
		var opened []string
		var last error
		for _, t := range tries {
			f, err := os.Open(t)
			if err != nil {
				last = err
				continue
			}
			f.Close()
			opened = append(opened, t)
		}
		obs := short(last)
		if len(opened) > 0 {
			obs = "OPENED " + strings.Join(opened, ", ")
		}
		emit("open host path "+p+fmt.Sprintf(" (%d ways, /proc/N/root included)", len(tries)), "absent", obs,
			"the container sees its image, its own mounts and its own pid namespace only", len(opened) > 0)
	}
	for _, p := range append([]string{"/", "/usr", "/etc", "/bin"}, cfg.WritePaths...) {
		f, err := os.OpenFile(filepath.Join(p, ".hostile-write"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		if err == nil {
			f.Close()
			os.Remove(filepath.Join(p, ".hostile-write"))
			emit("create a file in "+p, "refused", "CREATED", "", true)
			continue
		}
		emit("create a file in "+p, "refused", short(err), "the image rootfs is read-only; host paths are not mounted", false)
	}
	// The secrets, anywhere outside the image: walk every mount but the read-only image rootfs
	// (built before the exam existed) and /proc, /sys, /dev.
	ms := markers()
	found, files, bytesRead := scanMounts(ms)
	emit(fmt.Sprintf("search every mount for %d secrets (%d files, %d MiB read)", len(ms), files, bytesRead>>20), "not found",
		orNone(found), "the exam, keys and provider keys are never mounted: the daemon hands over bytes it chose", len(found) > 0)
	// What the mount table says of the host: a bind mount's root is its path in the source
	// filesystem, an overlay's options name its layers. sealrun shows none: every root is "/" or
	// a name of the container's own (a device node, the socket's file).
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	var named, secret []string
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) < 10 {
			continue
		}
		if fstype := f[len(f)-3]; f[3] != "/" && strings.Count(f[3], "/") > 1 && fstype != "proc" && fstype != "sysfs" {
			named = append(named, f[4]+" <- "+f[3])
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, pre := range cfg.HostPrefixes {
		if bytes.Contains(mi, []byte(pre)) || bytes.Contains(mounts, []byte(pre)) {
			secret = append(secret, pre)
		}
	}
	emit("host paths in /proc/self/mountinfo and /proc/self/mounts", "none", "host paths: "+orNone(secret)+"; mount roots: "+orNone(named),
		"mount sources are overlays with relative layer names or filesystems of their own", len(secret)+len(named) > 0)
}

// scanMounts reads every regular file of every mount point except / and the kernel's, up to
// 512 MiB in all, looking for the secrets.
func scanMounts(ms map[string][]byte) (found []string, files int, total int64) {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	roots := map[string]bool{}
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := f[4]
		if mp == "/" || mp == "/proc" || strings.HasPrefix(mp, "/proc/") || mp == "/sys" || strings.HasPrefix(mp, "/sys/") || mp == "/dev" || strings.HasPrefix(mp, "/dev/") {
			continue
		}
		roots[mp] = true
	}
	seen := map[string]bool{}
	for r := range roots {
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || seen[p] || total > 512<<20 {
				return nil
			}
			seen[p] = true
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			files++
			total += int64(len(b))
			for name, m := range ms {
				if len(m) > 0 && bytes.Contains(b, m) {
					found = append(found, name+" in "+p)
				}
			}
			return nil
		})
	}
	return found, files, total
}

// ---- kernel ----

// kernel runs the runner client's posture verb (nested namespaces, socket families, the filtered
// syscalls, masked paths) and adds device nodes, /proc/sys, /sys and cgroup writes. It is long
// because it is the attack suite's list of attempts, each recorded.
func kernel() {
	var p posture.Record
	var tried []string
	ok := false
	for _, c := range []string{"/usr/local/bin/runner", "./runner", "/tmp/.sealrun/runner"} {
		if b, err := os.ReadFile(c); err != nil || !bytes.HasPrefix(b, []byte("\x7fELF")) {
			continue
		}
		b, err := exec.Command(c, "posture").Output()
		if err == nil && json.Unmarshal(b, &p) == nil {
			ok = true
			break
		}
		tried = append(tried, fmt.Sprintf("%q: %v", c, err))
	}
	if !ok {
		emit("runner posture", "runs", fmt.Sprintf("FAILED (%s)", strings.Join(tried, "; ")), "", true)
		return
	}
	emit("capabilities (CapEff)", "0000000000000000", p.CapEff, "every capability is dropped", p.CapEff != "0000000000000000")
	emit("setuid escalation (no_new_privs)", "no_new_privs set", fmt.Sprint("no_new_privs=", p.NoNewPrivs), "no_new_privs and nosuid mounts: a setuid file cannot raise privileges", !p.NoNewPrivs)
	for _, k := range sortedKeys(p.Nested) {
		v := p.Nested[k]
		if k == "clone3" && gvisor() {
			// allowed to gVisor's kernel (glibc's threads need it), which answers it itself
			emit("nested namespace "+k, "refused, or answered by gVisor's kernel", v, "under gVisor clone3 reaches gVisor's kernel, not the host's; clone and unshare stay filtered (sandbox/SECCOMP.md)", v == "ALLOWED (succeeded)")
			continue
		}
		emit("nested namespace "+k, "refused", v, "the seccomp filter refuses namespace creation (sandbox/SECCOMP.md)", strings.HasPrefix(v, "ALLOWED"))
	}
	allowed := map[string]bool{"AF_UNIX": true, "AF_INET": true, "AF_INET6": true, "socketpair(AF_UNIX)": true, "AF_NETLINK/NETLINK_ROUTE": true}
	for _, k := range sortedKeys(p.Sockets) {
		v := p.Sockets[k]
		if allowed[k] {
			continue
		}
		emit("socket family "+k, "refused", v, "the seccomp filter allows unix, inet, inet6 and netlink-route only", v == "allowed")
	}
	for _, k := range sortedKeys(p.Syscalls) {
		v := p.Syscalls[k]
		emit("syscall "+k, "refused", v, "the seccomp filter refuses it", strings.HasPrefix(v, "ALLOWED"))
	}
	for _, k := range sortedKeys(p.Masked) {
		emit("read masked "+k, "masked", p.Masked[k], "runc masks it (maskedPaths)", !p.MaskedPathsOK)
	}
	// Device nodes.
	for _, d := range []struct {
		name string
		mode uint32
		dev  int
	}{{"mknod block 8:0 (sda)", syscall.S_IFBLK | 0o600, 8 << 8}, {"mknod char 1:1 (mem)", syscall.S_IFCHR | 0o600, 1<<8 | 1}} {
		p := "/tmp/.hostile-node"
		err := syscall.Mknod(p, d.mode, d.dev)
		if err == nil {
			os.Remove(p)
			emit(d.name, "refused", "CREATED", "", true)
			continue
		}
		emit(d.name, "refused", short(err), "no CAP_MKNOD; the devices cgroup allows only the null-like nodes", false)
	}
	for _, dev := range []string{"/dev/mem", "/dev/kmem", "/dev/sda", "/dev/vda", "/dev/kmsg", "/dev/nvidia0", "/dev/vsock", "/dev/fuse", "/dev/net/tun"} {
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err == nil && gvisor() && (dev == "/dev/fuse" || dev == "/dev/net/tun") {
			f.Close()
			emit("open "+dev, "absent, or gVisor's own", "opened (gVisor's)", "gVisor's kernel serves its own /dev/fuse and /dev/net/tun; the host's are never opened", false)
			continue
		}
		if err == nil {
			f.Close()
			emit("open "+dev, "absent", "OPENED", "", true)
			continue
		}
		emit("open "+dev, "absent", short(err), "/dev is a fresh tmpfs with the default nodes (the run's GPUs only in runner and grader)", false)
	}
	for _, w := range []string{"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger",
		"/sys/kernel/uevent_helper", "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/fs/cgroup/cgroup.procs"} {
		f, err := os.OpenFile(w, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
			emit("open for writing "+w, "refused", "OPENED FOR WRITING", "", true)
			continue
		}
		emit("open for writing "+w, "refused", short(err), "/proc/sys and /sys are read-only", false)
	}
	// cgroup release_agent: every one visible, and mounting a cgroup hierarchy to get one.
	var agents []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "release_agent" {
			if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
				f.Close()
				agents = append(agents, p)
			}
		}
		return nil
	})
	emit("write a cgroup release_agent", "none writable", orNone(agents), "the cgroup filesystem is read-only in the container", len(agents) > 0)
	os.MkdirAll("/tmp/.hostile-cg", 0o700)
	err := syscall.Mount("cgroup", "/tmp/.hostile-cg", "cgroup", 0, "rdma")
	if err == nil {
		syscall.Unmount("/tmp/.hostile-cg", 0)
	}
	emit("mount a cgroup v1 hierarchy", "refused", orErr("MOUNTED", err), "no CAP_SYS_ADMIN; the filter refuses mount", err == nil)
	for _, m := range []struct{ src, fstype string }{{"proc", "proc"}, {"tmpfs", "tmpfs"}, {"/", "bind"}} {
		flags := uintptr(0)
		if m.fstype == "bind" {
			flags = syscall.MS_BIND
		}
		err := syscall.Mount(m.src, "/tmp/.hostile-cg", m.fstype, flags, "")
		if err == nil {
			syscall.Unmount("/tmp/.hostile-cg", 0)
		}
		emit("mount "+m.fstype, "refused", orErr("MOUNTED", err), "no CAP_SYS_ADMIN; the filter refuses mount", err == nil)
	}
	// Module loading by the documented interfaces.
	for _, f := range []string{"/proc/sys/kernel/modprobe", "/sys/module"} {
		fd, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err == nil {
			fd.Close()
		}
		emit("module loading via "+f, "refused", orErr("OPENED FOR WRITING", err), "read-only /proc/sys and /sys; init_module is filtered", err == nil)
	}
	var suid []string
	for _, d := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec"} {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if fi, err := e.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					suid = append(suid, p)
				}
			}
			return nil
		})
	}
	// Run each setuid file that can run unattended and see whether its effective uid changed.
	var raised []string
	for _, s := range suid {
		if filepath.Base(s) != "passwd" && filepath.Base(s) != "chage" {
			continue
		}
		o, _ := exec.Command(s, "-S", "root").CombinedOutput() // needs euid 0 to read /etc/shadow
		if bytes.HasPrefix(o, []byte("root ")) {
			raised = append(raised, s)
		}
	}
	emit(fmt.Sprintf("run setuid files (%d found: %s)", len(suid), strings.Join(suid, " ")), "no privilege gained", orNone(raised),
		"no_new_privs: exec never raises privileges; mounts are nosuid", len(raised) > 0)
}

// ---- resources ----

func forkBomb() {
	self, _ := os.Executable()
	var kids []*exec.Cmd
	var err error
	for len(kids) < 20000 {
		c := exec.Command(self, "sleep")
		if err = c.Start(); err != nil {
			break
		}
		kids = append(kids, c)
	}
	for _, k := range kids {
		k.Process.Kill()
		k.Wait()
	}
	emit("fork bomb", "stopped by the pids limit", fmt.Sprintf("%d processes, then %s", len(kids), short(err)), "pids cgroup limit", err == nil)
}

func memoryBomb() {
	self, _ := os.Executable()
	c := exec.Command(self, "membomb")
	c.Env = append(os.Environ(), fmt.Sprintf("HOSTILE_CAP=%d", 2*cfg.MemoryBytes+(1<<30)))
	var stdout bytes.Buffer
	c.Stdout = &stdout
	err := c.Run()
	lines := strings.Fields(stdout.String())
	last := "0"
	if len(lines) > 0 {
		last = lines[len(lines)-1]
	}
	mib, _ := strconv.ParseInt(last, 10, 64)
	escaped := err == nil // the child reached its cap and exited on its own
	emit("memory bomb", "killed by the OOM killer at the memory limit", fmt.Sprintf("child touched %d MiB, then %v", mib, err),
		fmt.Sprintf("memory cgroup limit %d MiB, no swap beyond it", cfg.MemoryBytes>>20), escaped)
}

func membomb() {
	capBytes, _ := strconv.ParseInt(os.Getenv("HOSTILE_CAP"), 10, 64)
	var keep [][]byte
	var n int64
	for n < capBytes {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
		n += int64(len(b))
		fmt.Println(n >> 20)
	}
	_ = keep
}

// fill writes 1 MiB blocks into dir until an error; limit > 0 is the quota it must stop at.
func fill(dir string, limit int64, what string) {
	p := filepath.Join(dir, ".hostile-fill")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		emit("fill "+dir, "stopped at "+what, short(err), "", false)
		return
	}
	block := bytes.Repeat([]byte{0xa5}, 1<<20)
	var n int64
	cap := int64(4 << 30)
	for n < cap {
		var k int
		k, err = f.Write(block)
		n += int64(k)
		if err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	os.Remove(p)
	escaped := n >= cap || (limit > 0 && n > limit+limit/10)
	emit("fill "+dir, "stopped at "+what, fmt.Sprintf("%d MiB written, then %s", n>>20, short(err)), what+"; the host's disk is not reachable", escaped)
}

// ---- time ----

func clock() {
	tv := syscall.Timeval{Sec: 1e9}
	err := syscall.Settimeofday(&tv)
	emit("set the clock (settimeofday)", "refused", orErr("SET", err), "no CAP_SYS_TIME; the run's clock is the host's monotonic clock", err == nil)
	out, err := exec.Command("date", "-s", "2001-01-01").CombinedOutput()
	emit("set the clock (date -s)", "refused", orErr(firstLine(string(out)), err), "no CAP_SYS_TIME", err == nil && time.Now().Year() < 2002)
}

// ---- helpers ----

func short(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func orErr(got string, err error) string {
	if err != nil {
		return short(err)
	}
	return got
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	s := strings.Join(xs, "; ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return "FOUND " + s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---- the grader role ----

// bundle is a candidate's entrypoint. Every mode announces itself ready and answers each
// request; how it misbehaves is the mode.
func bundle(mode string) {
	if mode == "attack" {
		common(!gvisor()) // under gVisor the bombs have a bundle of their own (bomb)
		// Write outside /bundle, and keep anything past the container.
		for _, p := range []string{"/bundle/.hostile", "/bundle-escape", "/workspace/.hostile"} {
			err := os.WriteFile(p, []byte("x"), 0o644)
			emit("write "+p, "refused", orErr("WRITTEN", err), "/bundle is read-only; there is no workspace in the grader", err == nil)
		}
	}
	if mode == "detect" || mode == "attack" {
		detect()
	}
	if mode == "bomb" {
		forkBomb()
		memoryBomb()
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, `{"ready": true, "protocol": "sealrun-bundle/v1"}`)
	w.Flush()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		var req struct {
			Op  string `json:"op"`
			Seq int    `json:"seq"`
			N   int    `json:"n"`
		}
		json.Unmarshal(sc.Bytes(), &req)
		n++
		if mode == "detect" || mode == "attack" {
			fmt.Fprintf(os.Stderr, "DETECT request %d op=%s seq=%d\n", n, req.Op, req.Seq)
		}
		switch {
		case mode == "slow" && req.Seq == 2:
			time.Sleep(10 * time.Minute)
		case mode == "shift" && req.Seq == 2:
			// An extra answer line for a later question, hoping to shift the answers.
			fmt.Fprintf(w, `{"seq": %d, "output_b64": %q}`+"\n", req.Seq+1, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("a"), req.N)))
		}
		if req.Op == "score" {
			fmt.Fprintf(w, `{"seq": %d, "bits": 8}`+"\n", req.Seq)
		} else {
			fmt.Fprintf(w, `{"seq": %d, "output_b64": %q}`+"\n", req.Seq, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("a"), req.N)))
		}
		w.Flush()
	}
}

// detect reports what a bundle can see of where it runs, to tell grading from validation.
func detect() {
	host, _ := os.Hostname()
	env := os.Environ()
	sort.Strings(env)
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	var mounts []string
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 {
			mounts = append(mounts, f[4])
		}
	}
	mem, err := os.ReadFile("/sys/fs/cgroup/memory/memory.limit_in_bytes") // cgroup v1
	if err != nil {
		mem, _ = os.ReadFile("/sys/fs/cgroup/memory.max") // v2
	}
	fmt.Fprintf(os.Stderr, "DETECT hostname=%s\nDETECT env=%s\nDETECT mounts=%s\nDETECT memory=%s\nDETECT cpus=%d\n",
		host, strings.Join(env, " "), strings.Join(mounts, " "), strings.TrimSpace(string(mem)), numCPU())
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Cpus_allowed_list:") {
			return strings.Count(l, ",") + 1
		}
	}
	return 0
}
