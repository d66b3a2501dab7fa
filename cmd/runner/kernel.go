package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// The kernel surfaces a sealed container must not reach, tried from inside with harmless
// arguments. Each result is "refused: <errno>" or "ALLOWED ..." (the host side judges).

// nestedNamespaces tries to create user, network and mount namespaces every way a process can:
// clone with namespace flags (as os/exec does), unshare in a single-threaded child, clone3 and
// setns. Children that do start exec this binary's help and exit at once.
func nestedNamespaces() map[string]string {
	out := map[string]string{}
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	try := func(name string, attr *syscall.SysProcAttr) {
		cmd := exec.Command(self, "help")
		cmd.SysProcAttr = attr
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				out[name] = "ALLOWED (the child ran)"
				return
			}
			out[name] = "refused: " + errnoName(err)
			return
		}
		out[name] = "ALLOWED (the child ran)"
	}
	try("clone(CLONE_NEWUSER)", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER})
	try("clone(CLONE_NEWUSER|CLONE_NEWNET)", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET})
	try("clone(CLONE_NEWUSER|CLONE_NEWNS)", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS})
	try("unshare(CLONE_NEWUSER)", &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWUSER})
	try("unshare(CLONE_NEWNET)", &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNET})
	try("unshare(CLONE_NEWNS)", &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS})
	if sysClone3 != 0 {
		// size 0 is invalid: an allowed clone3 fails with EINVAL and creates nothing; the
		// filter answers ENOSYS first.
		_, _, e := syscall.RawSyscall(sysClone3, 0, 0, 0)
		out["clone3"] = resultOf(e)
	}
	if sysSetns != 0 {
		out["setns(net)"] = onThread(func() string {
			f, err := os.Open("/proc/self/ns/net")
			if err != nil {
				return "unreadable: " + err.Error()
			}
			defer f.Close()
			_, _, e := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0)
			return resultOf(e)
		})
	}
	return out
}

// onThread runs fn on a thread that is thrown away afterwards, in case fn changed it.
func onThread(fn func() string) string {
	c := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		c <- fn()
	}()
	return <-c
}

// socketFamilies opens one socket per address family (and netlink protocol) and closes it.
func socketFamilies() map[string]string {
	out := map[string]string{}
	for _, f := range []struct {
		name        string
		family, typ int
		proto       int
	}{
		{"AF_UNIX", syscall.AF_UNIX, syscall.SOCK_STREAM, 0},
		{"AF_INET", syscall.AF_INET, syscall.SOCK_STREAM, 0},
		{"AF_INET6", syscall.AF_INET6, syscall.SOCK_STREAM, 0},
		{"AF_NETLINK/NETLINK_ROUTE", syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_ROUTE},
		{"AF_NETLINK/NETLINK_AUDIT", syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_AUDIT},
		{"AF_NETLINK/NETLINK_KOBJECT_UEVENT", syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_KOBJECT_UEVENT},
		{"AF_NETLINK/NETLINK_NETFILTER", syscall.AF_NETLINK, syscall.SOCK_RAW, syscall.NETLINK_NETFILTER},
		{"AF_PACKET", syscall.AF_PACKET, syscall.SOCK_RAW, 0},
		{"AF_VSOCK", 40, syscall.SOCK_STREAM, 0},
		{"AF_ALG", 38, syscall.SOCK_SEQPACKET, 0},
		{"AF_KEY", syscall.AF_KEY, syscall.SOCK_RAW, 2},
		{"AF_BLUETOOTH", syscall.AF_BLUETOOTH, syscall.SOCK_RAW, 0},
		{"AF_XDP", 44, syscall.SOCK_RAW, 0},
		{"AF_TIPC", syscall.AF_TIPC, syscall.SOCK_RDM, 0},
		{"AF_RDS", 21, syscall.SOCK_SEQPACKET, 0},
	} {
		fd, err := syscall.Socket(f.family, f.typ|syscall.SOCK_CLOEXEC, f.proto)
		if err == nil {
			syscall.Close(fd)
			out[f.name] = "allowed"
			continue
		}
		out[f.name] = "refused: " + errnoName(err)
	}
	if fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0); err == nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		out["socketpair(AF_UNIX)"] = "allowed"
	} else {
		out["socketpair(AF_UNIX)"] = "refused: " + errnoName(err)
	}
	return out
}

// gatedSyscalls calls each with arguments that do nothing (or fail harmlessly) when allowed, and
// reports the errno. Under the sealrun filter each answers EPERM (the filter's default).
func gatedSyscalls() map[string]string {
	out := map[string]string{}
	for _, c := range gatedCalls {
		if c.nr == 0 {
			continue
		}
		a := c.args
		_, _, e := syscall.RawSyscall6(c.nr, a[0], a[1], a[2], a[3], a[4], a[5])
		out[c.name] = resultOf(e)
	}
	return out
}

// resultOf says "refused: EPERM" for a filter's answer; any other outcome means the call reached
// the kernel ("ALLOWED (errno)").
func resultOf(e syscall.Errno) string {
	switch e {
	case syscall.EPERM, syscall.ENOSYS:
		return "refused: " + errnoName(e)
	case 0:
		return "ALLOWED (succeeded)"
	}
	return "ALLOWED (the kernel answered " + errnoName(e) + ")"
}

func errnoName(err error) string {
	var e syscall.Errno
	if !errors.As(err, &e) {
		return err.Error()
	}
	switch e {
	case syscall.EPERM:
		return "EPERM"
	case syscall.ENOSYS:
		return "ENOSYS"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EACCES:
		return "EACCES"
	case syscall.EAFNOSUPPORT:
		return "EAFNOSUPPORT"
	case syscall.EPROTONOSUPPORT:
		return "EPROTONOSUPPORT"
	case syscall.EBADF:
		return "EBADF"
	case syscall.EFAULT:
		return "EFAULT"
	}
	return e.Error()
}

type gatedCall struct {
	name string
	nr   uintptr
	args [6]uintptr
}
