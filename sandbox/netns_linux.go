package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/internal/mountinfo"
	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// The controller's /30 to its run's gateway (see netnshook).
var (
	GatewayIP    = airgap.GatewayIP
	ControllerIP = airgap.ControllerIP
)

// NetnsEvidence is one network namespace as netlink shows it from the host: the air-gap evidence.
type NetnsEvidence = airgap.Evidence

func checkAirGap(role Role, ev NetnsEvidence) error { return airgap.Check(string(role), ev) }

// DefaultNetnsDir is where sealrun keeps its runs' named network namespaces: a directory of its
// own, machine-wide (a name there is the claim on a run id across every sealrun of the machine).
// Not /run/netns: iproute2 bind-mounts that directory onto itself the first time anything adds a
// namespace with `ip netns add` on a host, and every namespace mounted there before is then
// hidden under the new mount, where neither umount nor unlink reaches it by its path. No other
// program mounts this directory; where something does all the same, deleteNetns and Reap still
// find and remove what is hidden (removeHidden).
const DefaultNetnsDir = "/run/sealrun/netns"

// createGatewayNetns makes a run's gateway netns, bind-mounted on path (a new file, made
// O_EXCL), with loopback up and IPv6 off. Nothing of it is in the host's namespace. A path that
// exists already (another run's) is an error wrapping fs.ErrExist, and is left alone.
func createGatewayNetns(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return fmt.Errorf("network namespace directory %s: %w", filepath.Dir(path), err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("create network namespace %s: %w", path, err)
	}
	f.Close()
	err = netnshook.OnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil { // this thread only; OnThread switches back
			return fmt.Errorf("create network namespace %s: %w", path, err)
		}
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount network namespace on %s: %w", path, err)
		}
		if err := netnshook.DisableIPv6(); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		deleteNetns(path)
	}
	return err
}

// deleteNetns removes a namespace sealrun mounted on path: unmounts it and removes the file.
// Where a mount made over its directory since (by another program, or anything that does what
// iproute2 does to /run/netns) hides the namespace's mount from the path, umount answers "not
// mounted" and unlink "busy": then removeHidden takes it away all the same. Gone already is not
// an error.
func deleteNetns(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount network namespace %s: %w", path, err)
	}
	switch err := unix.Unlink(path); err {
	case nil:
		return nil // no mount of this namespace is left: unlink detaches any in other mount namespaces
	case unix.ENOENT:
		if len(nsfsMountsAt(path)) == 0 {
			return nil
		}
		return removeHidden(path) // the path leads elsewhere: a mount over one of its directories
	case unix.EBUSY:
		return removeHidden(path)
	default:
		return fmt.Errorf("remove network namespace %s: %w", path, err)
	}
}

// removeHidden removes the namespace mounted on path where a later mount over its directory hides
// it. From a private copy of this process's mount namespace (on a thread of its own, thrown away
// after) it lifts the copies of the mounts over it, one at a time, until the namespace's own is
// the one the path shows, unmounts that copy and unlinks the file: unlink, once no mount sits on
// the file in the namespace it is called from, detaches every mount on it in the others, the
// hidden one of the host's included. Nothing of the host's own mount table changes but that.
func removeHidden(path string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, its mount namespace with it
		errc <- func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
				return fmt.Errorf("remove hidden network namespace %s: a private mount namespace: %w", path, err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("remove hidden network namespace %s: make the private mount namespace private: %w", path, err)
			}
			for i := 0; i < 64; i++ {
				if len(nsfsMountsAt(path)) == 0 {
					if err := unix.Unlink(path); err != nil && err != unix.ENOENT {
						return fmt.Errorf("remove hidden network namespace %s: %w", path, err)
					}
					return nil
				}
				if unix.Unmount(path, unix.MNT_DETACH) == nil {
					continue // the mount the path showed; what is under it, if any, next
				}
				// The path shows no mount: one over a directory above it hides the namespace's.
				over, err := visibleMount(filepath.Dir(path))
				if err != nil {
					return fmt.Errorf("remove hidden network namespace %s: %w", path, err)
				}
				if over == "/" {
					return fmt.Errorf("remove hidden network namespace %s: it is under the root mount", path)
				}
				if err := unix.Unmount(over, unix.MNT_DETACH); err != nil {
					return fmt.Errorf("remove hidden network namespace %s: lift %s in a private mount namespace: %w", path, over, err)
				}
			}
			return fmt.Errorf("remove hidden network namespace %s: still mounted under 64 mounts", path)
		}()
	}()
	return <-errc
}

// nsfsMountsAt lists the namespace mounts on path in the calling thread's mount namespace,
// whether the path shows them or not.
func nsfsMountsAt(path string) []mountinfo.Entry {
	var out []mountinfo.Entry
	for _, m := range mountinfo.Table() {
		if m.Type == "nsfs" && m.Point == path {
			out = append(out, m)
		}
	}
	return out
}

// mountID is the id of the mount path is on (the mount itself where path is a mount point).
func mountID(path string) (int, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_MNT_ID, &st); err != nil {
		return 0, fmt.Errorf("statx %s: %w", path, err)
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: the kernel gives no mount id (Linux 5.8 or later does)", path)
	}
	return int(st.Mnt_id), nil
}

// visibleMount is the mount point of the mount path is on, as this thread sees it.
func visibleMount(path string) (string, error) {
	id, err := mountID(path)
	if err != nil {
		return "", err
	}
	for _, m := range mountinfo.Table() {
		if m.ID == id {
			return m.Point, nil
		}
	}
	return "", fmt.Errorf("mount %d of %s is not in mountinfo", id, path)
}

// StrandedNetns lists sealrun's network namespaces that something mounted over: nsfs mounts on a
// path under dir (and under /run/netns, where sealrun kept them before) named with Prefix whose
// path no longer shows them. Only removeHidden removes them (deleteNetns, Reap).
func StrandedNetns(dir string) []string {
	var out []string
	for _, m := range mountinfo.Table() {
		if m.Type != "nsfs" || !strings.HasPrefix(filepath.Base(m.Point), Prefix) {
			continue
		}
		if d := filepath.Dir(m.Point); d != dir && d != LegacyNetnsDir {
			continue
		}
		if id, err := mountID(m.Point); err != nil || id != m.ID {
			out = append(out, m.Point)
		}
	}
	return out
}

// LegacyNetnsDir is where earlier sealrun kept its namespaces (iproute2's directory): a run
// record naming a namespace without a directory means one there, and Reap still removes it.
const LegacyNetnsDir = "/run/netns"

// ListenGateway opens a TCP listener inside a run's gateway netns (its path, Run.GatewayNetns) on
// the gateway address. The socket stays in that namespace: only the run's controller can reach it.
func ListenGateway(ctx context.Context, gatewayNetns string, port int) (net.Listener, error) {
	ns, err := netns.GetFromPath(gatewayNetns)
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
