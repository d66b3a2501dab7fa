package sandbox

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// The controller's /30 to its run's gateway (see netnshook).
var (
	GatewayIP    = netnshook.GatewayIP
	ControllerIP = netnshook.ControllerIP
)

// NetnsEvidence is one network namespace as netlink shows it from the host: the air-gap evidence.
type NetnsEvidence = netnshook.Evidence

func checkAirGap(role Role, ev NetnsEvidence) error { return netnshook.CheckAirGap(string(role), ev) }

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
		ferr := netnshook.DisableIPv6()
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

// ListenGateway opens a TCP listener inside a run's gateway netns on the gateway address. The
// socket stays in that namespace: only the run's controller can reach it.
func ListenGateway(ctx context.Context, gatewayNetns string, port int) (net.Listener, error) {
	ns, err := netns.GetFromName(gatewayNetns)
	if err != nil {
		return nil, fmt.Errorf("open gateway network namespace %s: %w", gatewayNetns, err)
	}
	defer ns.Close()
	var l net.Listener
	err = netnshook.InNetns(ns, func() error {
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
