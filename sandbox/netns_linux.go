package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
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
// A name that exists already (another run's) is an error wrapping fs.ErrExist, and is left
// alone.
func createGatewayNetns(name string) error {
	created := false
	err := netnshook.OnThread(func() error {
		ns, err := netns.NewNamed(name) // switches this thread into the new namespace
		if err != nil {
			created = !errors.Is(err, fs.ErrExist)
			return fmt.Errorf("create network namespace %s: %w", name, err)
		}
		created = true
		defer ns.Close()
		if err := netnshook.DisableIPv6(); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil && created {
		netns.DeleteNamed(name)
	}
	return err
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
