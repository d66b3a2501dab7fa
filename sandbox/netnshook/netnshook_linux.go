//go:build linux

package netnshook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/airgap"
)

// OnThread runs fn on a locked OS thread of its own and puts the thread back into its original
// network namespace afterwards, whatever fn switched it to. The thread is thrown away (left
// locked, so it dies with its goroutine) if it cannot be switched back.
func OnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leave network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// InNetns runs fn on a thread switched into the network namespace ns.
func InNetns(ns netns.NsHandle, fn func() error) error {
	return OnThread(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter network namespace: %w", err)
		}
		return fn()
	})
}

// DisableIPv6 turns IPv6 off in the current thread's network namespace.
func DisableIPv6() error {
	for _, k := range []string{"all", "default", "lo"} {
		p := filepath.Join("/proc/sys/net/ipv6/conf", k, "disable_ipv6")
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable IPv6: %w", err)
		}
	}
	return nil
}

// Enter switches the calling goroutine's OS thread, which the caller has locked, into the
// network namespace of pid, so every later step runs inside the namespace with no switch of its
// own, and on one netlink socket. It does not switch back: the hook's process exits when done,
// and the relay's server runs it inside OnThread, which does.
func Enter(pid int) error {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return fmt.Errorf("open network namespace of pid %d: %w", pid, err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("enter network namespace of pid %d: %w", pid, err)
	}
	return nil
}

// Configure readies the network namespace the calling thread is in (Enter) for a created, not
// yet started container: loopback up, IPv6 off, and for the controller a veth /30 whose other
// end stays in the run's gateway netns (gatewayNetns: its path). Runner and grader get loopback
// only.
func Configure(h *netlink.Handle, role string, gatewayNetns string) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	if lo.Attrs().Flags&net.FlagUp == 0 { // runc and crun bring it up themselves
		if err := h.LinkSetUp(lo); err != nil {
			return err
		}
	}
	if err := DisableIPv6(); err != nil {
		return err
	}
	if role != airgap.RoleController {
		return nil
	}
	here, err := netns.Get()
	if err != nil {
		return err
	}
	defer here.Close()
	gw, err := netns.GetFromPath(gatewayNetns)
	if err != nil {
		return fmt.Errorf("open gateway network namespace %s: %w", gatewayNetns, err)
	}
	defer gw.Close()
	gh, err := netlink.NewHandleAt(gw, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer gh.Close()
	if old, err := gh.LinkByName(airgap.GatewayLink); err == nil {
		gh.LinkDel(old) // a previous controller of this run
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: airgap.GatewayLink}, PeerName: airgap.ControllerLink}
	if err := gh.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth in %s: %w", gatewayNetns, err)
	}
	peer, err := gh.LinkByName(airgap.ControllerLink)
	if err != nil {
		return err
	}
	if err := gh.LinkSetNsFd(peer, int(here)); err != nil {
		return fmt.Errorf("move %s into the controller: %w", airgap.ControllerLink, err)
	}
	gwLink, err := gh.LinkByName(airgap.GatewayLink)
	if err != nil {
		return err
	}
	if err := gh.AddrAdd(gwLink, &netlink.Addr{IPNet: &net.IPNet{IP: airgap.GatewayIP, Mask: airgap.LinkMask}}); err != nil {
		return err
	}
	if err := gh.LinkSetUp(gwLink); err != nil {
		return err
	}
	cLink, err := h.LinkByName(airgap.ControllerLink)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(cLink, &netlink.Addr{IPNet: &net.IPNet{IP: airgap.ControllerIP, Mask: airgap.LinkMask}}); err != nil {
		return err
	}
	return h.LinkSetUp(cLink)
}

// read enumerates links, addresses and routes through h.
func read(h *netlink.Handle) (airgap.Evidence, error) {
	var ev airgap.Evidence
	links, err := h.LinkList()
	if err != nil {
		return ev, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		state := "down"
		if a.Flags&net.FlagUp != 0 {
			state = "up"
		}
		ev.Links = append(ev.Links, fmt.Sprintf("%s (%s, %s)", a.Name, l.Type(), state))
		ev.Names = append(ev.Names, a.Name)
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return ev, fmt.Errorf("list addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			ev.Addresses = append(ev.Addresses, ad.IPNet.String()+" "+a.Name)
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: 0}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return ev, fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		dst := "default"
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		s := dst
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		s += " dev " + names[r.LinkIndex]
		if r.Table != 254 {
			s += " table " + strconv.Itoa(r.Table)
		}
		ev.Routes = append(ev.Routes, s)
	}
	sort.Strings(ev.Links)
	sort.Strings(ev.Addresses)
	sort.Strings(ev.Routes)
	sort.Strings(ev.Names)
	return ev, nil
}

// Deadline bounds a hook's process, the Go hook's and the relay's alike: past it, the hook says
// so and exits 1, and the runtime does not start the container. The hook bounds itself because
// sealrun gives crun no hook time-out (sandbox's hookSpec says why). The relay's server gives up
// on a request before it (20 s). DeadlineEnv, a whole number of seconds from 1 to 60, shortens it
// for a test.
const Deadline = 25 * time.Second

// DeadlineEnv names the environment variable that overrides Deadline (tests only; sealrun never
// sets it in a hook's environment).
const DeadlineEnv = "SEALRUN_HOOK_DEADLINE"

// deadline is Deadline or DeadlineEnv's value.
func deadline() time.Duration {
	if n, err := strconv.Atoi(os.Getenv(DeadlineEnv)); err == nil && n >= 1 && n <= 60 {
		return time.Duration(n) * time.Second
	}
	return Deadline
}

// Main reads the container state (runtime-spec State JSON) from stdin and handles it (Handle):
// the hook binary's main, or sealrun re-executed as the hook. It ends the process (exit 1) if the
// work is not done within Deadline.
func Main(args []string, stdin io.Reader) error {
	began := time.Now()
	d := deadline()
	time.AfterFunc(d, func() {
		fmt.Fprintf(os.Stderr, "sealrun network hook: not done after %s (reading the container state or configuring its network namespace hung); the container is not started\n", d)
		os.Exit(1)
	})
	runtime.LockOSThread() // never unlocked: Handle's thread stays in the container's netns
	var st specs.State
	if err := json.NewDecoder(io.LimitReader(stdin, MaxState)).Decode(&st); err != nil {
		return fmt.Errorf("read container state: %w", err)
	}
	return Handle(args, st, began)
}

// MaxState bounds the container state a hook reads.
const MaxState = 1 << 20

// Handle configures a created container's netns for its role, reads it back with netlink,
// refuses to let the container start if it is not as the role requires, and records the
// evidence. args are the hook's (ROLE GATEWAY-NETNS EVIDENCE-FILE CGROUP-PATH); st is the state
// the runtime gave the hook; began is when the hook began. It does all of it from inside the
// namespace, on its thread entered once (Enter) and one netlink socket, not a switch and a
// socket per step: the hook runs at every container start, and its work went from 1.0 to 0.7 ms
// so (make bench's hook-ms, this machine). The caller must have locked its goroutine's thread,
// which Handle leaves in the container's netns: the hook's process exits after it; the relay's
// server (package sandbox) runs it inside OnThread, which switches the thread back.
func Handle(args []string, st specs.State, began time.Time) error {
	if len(args) != 4 {
		return errors.New("usage: sealrun-netns-hook ROLE GATEWAY-NETNS EVIDENCE-FILE CGROUP-PATH")
	}
	if err := TightenDevices(args[3]); err != nil {
		return err
	}
	role := args[0]
	if role != airgap.RoleController && role != airgap.RoleRunner && role != airgap.RoleGrader {
		return fmt.Errorf("unknown role %q", role)
	}
	if st.Pid <= 0 {
		return fmt.Errorf("container state has no pid")
	}
	if err := Enter(st.Pid); err != nil {
		return err
	}
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := Configure(h, role, args[1]); err != nil {
		return err
	}
	ev, err := read(h)
	if err != nil {
		return err
	}
	if err := airgap.Check(role, ev); err != nil {
		return err
	}
	// Written last and atomically: the sandbox takes a complete record as "configured, checked".
	b, _ := json.Marshal(airgap.Record{Pid: st.Pid, Evidence: ev, Began: began, Ended: time.Now()})
	tmp := args[2] + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, args[2])
}

// runtimeDefaultDevices are device rules the runtimes add to every container's device cgroup
// beside the spec's own: mknod of any device (runc 1.1 and crun), /dev/net/tun (runc) and
// /dev/console (crun). sealrun containers have no capabilities, so these grant nothing
// usable, but the device cgroup is meant to be exactly the standard nodes plus GPUs: the hook
// removes them (cgroup v1; on v2 the runtime's eBPF program cannot be edited from outside, and
// sealrun's own program on the wrapper cgroup is the one that decides).
var runtimeDefaultDevices = []string{"c *:* m", "b *:* m", "c 10:200 rwm", "c 5:1 rwm"}

func TightenDevices(cgroupPath string) error {
	deny := filepath.Join("/sys/fs/cgroup/devices", cgroupPath, "devices.deny")
	if _, err := os.Stat(deny); err != nil {
		return nil // cgroup v2
	}
	for _, rule := range runtimeDefaultDevices {
		if err := os.WriteFile(deny, []byte(rule), 0); err != nil {
			return fmt.Errorf("device cgroup %s: deny %q: %w", cgroupPath, rule, err)
		}
	}
	return nil
}
