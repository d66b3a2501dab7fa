package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The controller's /30 to its run's gateway. Every run has its own gateway netns and every
// controller its own netns, so the same addresses serve every run without ever meeting.
var (
	GatewayIP    = net.IPv4(10, 88, 0, 1)
	ControllerIP = net.IPv4(10, 88, 0, 2)
	linkMask     = net.CIDRMask(30, 32)
)

// Link names inside the namespaces (not in the host's).
const (
	gatewayLink    = "gw0"
	controllerLink = "eth0"
)

// inNetns runs fn on a thread switched into the network namespace ns, and switches it back.
// The thread is thrown away if it cannot be switched back.
func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("enter network namespace: %w", err)
			runtime.UnlockOSThread()
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leave network namespace: %w", err) // thread stays locked and dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// disableIPv6 turns IPv6 off in the current thread's network namespace.
func disableIPv6() error {
	for _, k := range []string{"all", "default", "lo"} {
		p := filepath.Join("/proc/sys/net/ipv6/conf", k, "disable_ipv6")
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disable IPv6: %w", err)
		}
	}
	return nil
}

// createGatewayNetns makes the run's named gateway netns (bind-mounted under /run/netns),
// with loopback up and IPv6 off. Nothing of it is in the host's namespace.
func createGatewayNetns(name string) (err error) {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := netns.NewNamed(name) // switches this thread into the new namespace
		if err != nil {
			netns.Set(orig)
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("create network namespace %s: %w", name, err)
			return
		}
		defer ns.Close()
		ferr := disableIPv6()
		if ferr == nil {
			if lo, err := netlink.LinkByName("lo"); err != nil {
				ferr = err
			} else {
				ferr = netlink.LinkSetUp(lo)
			}
		}
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("leave network namespace %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		netns.DeleteNamed(name)
		return err
	}
	return nil
}

// configureContainerNetns readies the network namespace of a created (not yet started)
// container: loopback up, IPv6 off, and for the controller a veth /30 whose other end stays in
// the run's gateway netns. Runner and grader get loopback only.
func configureContainerNetns(pid int, role Role, gatewayNetns string) error {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return fmt.Errorf("open network namespace of pid %d: %w", pid, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if lo, err := h.LinkByName("lo"); err != nil {
		return err
	} else if err := h.LinkSetUp(lo); err != nil {
		return err
	}
	if err := inNetns(ns, disableIPv6); err != nil {
		return err
	}
	if role != RoleController {
		return nil
	}
	gw, err := netns.GetFromName(gatewayNetns)
	if err != nil {
		return fmt.Errorf("open gateway network namespace %s: %w", gatewayNetns, err)
	}
	defer gw.Close()
	gh, err := netlink.NewHandleAt(gw)
	if err != nil {
		return err
	}
	defer gh.Close()
	if old, err := gh.LinkByName(gatewayLink); err == nil {
		gh.LinkDel(old) // a previous controller of this run
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: gatewayLink}, PeerName: controllerLink}
	if err := gh.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth in %s: %w", gatewayNetns, err)
	}
	peer, err := gh.LinkByName(controllerLink)
	if err != nil {
		return err
	}
	if err := gh.LinkSetNsFd(peer, int(ns)); err != nil {
		return fmt.Errorf("move %s into the controller: %w", controllerLink, err)
	}
	gwLink, err := gh.LinkByName(gatewayLink)
	if err != nil {
		return err
	}
	if err := gh.AddrAdd(gwLink, &netlink.Addr{IPNet: &net.IPNet{IP: GatewayIP, Mask: linkMask}}); err != nil {
		return err
	}
	if err := gh.LinkSetUp(gwLink); err != nil {
		return err
	}
	cLink, err := h.LinkByName(controllerLink)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(cLink, &netlink.Addr{IPNet: &net.IPNet{IP: ControllerIP, Mask: linkMask}}); err != nil {
		return err
	}
	return h.LinkSetUp(cLink)
}

// ListenGateway opens a TCP listener inside a run's gateway netns on the gateway address. The
// socket stays in that namespace: only the run's controller can reach it.
func ListenGateway(ctx context.Context, gatewayNetns string, port int) (net.Listener, error) {
	ns, err := netns.GetFromName(gatewayNetns)
	if err != nil {
		return nil, fmt.Errorf("open gateway network namespace %s: %w", gatewayNetns, err)
	}
	defer ns.Close()
	var l net.Listener
	err = inNetns(ns, func() error {
		var err error
		// IP_FREEBIND: the gateway address appears only when a controller's veth is made.
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, syscall.IP_FREEBIND, 1) })
			if err != nil {
				return err
			}
			return serr
		}}
		l, err = lc.Listen(ctx, "tcp4", net.JoinHostPort(GatewayIP.String(), strconv.Itoa(port)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", gatewayNetns, err)
	}
	return l, nil
}

// NetnsEvidence is one network namespace as netlink shows it from the host.
type NetnsEvidence struct {
	Links     []string `json:"links"`     // "name (type, up|down)"
	Addresses []string `json:"addresses"` // "ip/prefix dev"
	Routes    []string `json:"routes"`    // "dst [via gw] dev", every table
	Names     []string `json:"names"`     // link names only
}

// readNetns enumerates links, addresses and routes of the network namespace of pid.
func readNetns(pid int) (NetnsEvidence, error) {
	ns, err := netns.GetFromPid(pid)
	if err != nil {
		return NetnsEvidence{}, fmt.Errorf("open network namespace of pid %d: %w", pid, err)
	}
	defer ns.Close()
	return readNetnsHandle(ns)
}

func readNetnsHandle(ns netns.NsHandle) (NetnsEvidence, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return NetnsEvidence{}, err
	}
	defer h.Close()
	var ev NetnsEvidence
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

// checkAirGap says what, if anything, a container's namespace has that its role must not:
// runner and grader exactly lo; the controller lo and its veth with the /30; no default route,
// no IPv6 address, no route but the /30 and loopback's own.
func checkAirGap(role Role, ev NetnsEvidence) error {
	want := []string{"lo"}
	if role == RoleController {
		want = []string{controllerLink, "lo"}
	}
	if strings.Join(ev.Names, ",") != strings.Join(want, ",") {
		return fmt.Errorf("%s netns has links %v; expected %v", role, ev.Names, want)
	}
	for _, a := range ev.Addresses {
		if strings.Contains(a, ":") {
			return fmt.Errorf("%s netns has an IPv6 address %s", role, a)
		}
		if !strings.HasPrefix(a, "127.0.0.1/8 ") && !(role == RoleController && a == ControllerIP.String()+"/30 "+controllerLink) {
			return fmt.Errorf("%s netns has an unexpected address %s", role, a)
		}
	}
	for _, r := range ev.Routes {
		if strings.HasPrefix(r, "default") || strings.HasPrefix(r, "0.0.0.0/0") {
			return fmt.Errorf("%s netns has a default route: %s", role, r)
		}
		local := strings.HasSuffix(r, " table 255")
		link := role == RoleController && strings.HasPrefix(r, "10.88.0.0/30 dev "+controllerLink)
		if !local && !link {
			return fmt.Errorf("%s netns has an unexpected route: %s", role, r)
		}
	}
	return nil
}
