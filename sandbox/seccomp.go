package sandbox

import (
	"runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// seccompAllow is the default-deny allowlist every sealrun container runs under. It is modelled
// on the default profile of Docker/moby (profiles/seccomp/default.json): the syscalls an
// ordinary unprivileged process needs, without those that reach the kernel's privileged or
// rarely audited surfaces (mount, kexec, module loading, bpf, perf_event_open, userfaultfd,
// keyctl, ptrace, personality changes, clock setting, swapon, reboot, ...). Anything not listed
// fails with EPERM. Kept as data so that it can be read and reviewed as a list (sandbox/SECCOMP.md).
var seccompAllow = []string{
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind", "brk", "capget", "capset",
	"chdir", "chmod", "chown", "chown32", "clock_adjtime", "clock_getres", "clock_gettime", "clock_nanosleep",
	"close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old",
	"eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
	"fadvise64", "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown", "fchownat",
	"fcntl", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr",
	"fstat", "fstatfs", "fsync", "ftruncate", "futex", "futex_waitv", "futimesat", "get_robust_list",
	"get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid", "getgid",
	"getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid", "getsockname",
	"getsockopt", "gettid", "gettimeofday", "getuid", "getxattr", "inotify_add_watch", "inotify_init",
	"inotify_init1", "inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit",
	"ioctl", "ioprio_get", "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
	"lchown", "lgetxattr", "link", "linkat", "listen", "listxattr", "llistxattr", "lremovexattr",
	"lseek", "lsetxattr", "lstat", "madvise", "membarrier", "memfd_create", "mincore", "mkdir", "mkdirat",
	"mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify",
	"mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv",
	"msgsnd", "msync", "munlock", "munlockall", "munmap", "name_to_handle_at", "nanosleep", "newfstatat", "open",
	"openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "poll", "ppoll", "prctl",
	"pread64", "preadv", "preadv2", "prlimit64", "process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read",
	"readahead", "readlink", "readlinkat", "readv", "recv", "recvfrom", "recvmmsg", "recvmsg",
	"remap_file_pages", "removexattr", "rename", "renameat", "renameat2", "restart_syscall", "rmdir",
	"rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn",
	"rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler",
	"sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "send", "sendfile",
	"sendmmsg", "sendmsg", "sendto", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid",
	"setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid",
	"setresuid", "setreuid", "setrlimit", "setsid", "setsockopt", "setuid", "setxattr", "shmat", "shmctl",
	"shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "splice",
	"stat", "statfs", "statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo",
	"tee", "tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate",
	"umask", "uname", "unlink", "unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4",
	"waitid", "waitpid", "write", "writev",
}

// Namespace-creating clone flags (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET),
// the mask moby's default profile uses: clone is allowed only when none of them is set. Without
// this an unprivileged process can create a user namespace (no capability needed) and with it
// CAP_NET_ADMIN/CAP_SYS_ADMIN over fresh namespaces: the door to nf_tables and packet-socket
// kernel bugs. (CLONE_NEWTIME shares its bit with clone's exit signal; it is reachable only
// through clone3 and unshare, both refused.)
const cloneNamespaceFlags = 0x7E020000

// Socket address families a sealrun container may open. Everything else (AF_PACKET, AF_VSOCK,
// which reaches the hypervisor on VM hosts, AF_ALG, AF_KEY, AF_BLUETOOTH, AF_XDP, ...) fails
// with EPERM, and so does every netlink protocol but NETLINK_ROUTE, which libcs and language
// runtimes use to list interfaces and addresses.
const (
	afUNIX       = 1
	afINET       = 2
	afINET6      = 10
	afNETLINK    = 16
	netlinkROUTE = 0
)

// seccompENOSYS are answered with ENOSYS instead of EPERM, so that libc falls back to an
// allowed older call (clone3 -> clone), as moby does.
var seccompENOSYS = []string{"clone3"}

// nativeArch is the only syscall ABI allowed: the kernel kills a process that enters through
// another (32-bit x86 and x32 on amd64, arm on arm64), so compat entry points are closed too.
// It also keeps the filter small: the runtime compiles it at every container start.
func nativeArch() []specs.Arch {
	switch runtime.GOARCH {
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64}
	case "ppc64le":
		return []specs.Arch{specs.ArchPPC64LE}
	case "s390x":
		return []specs.Arch{specs.ArchS390X}
	}
	return []specs.Arch{specs.ArchX86_64}
}

// Seccomp returns the profile: default action EPERM; the allowlist allowed; clone allowed only
// without namespace flags; socket only for the families above and socketpair only for AF_UNIX;
// clone3 ENOSYS (so libcs fall back to the filtered clone); unshare and setns refused (not
// listed). The empty capability set does not stop user namespaces: this filter does.
func Seccomp() *specs.LinuxSeccomp {
	eperm, enosys := uint(1), uint(38)
	eq := func(index uint, v uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: index, Value: v, Op: specs.OpEqualTo}
	}
	allow := func(name string, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: args}
	}
	return &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   nativeArch(),
		Syscalls: []specs.LinuxSyscall{
			{Names: append([]string(nil), seccompAllow...), Action: specs.ActAllow},
			// Value is the mask and ValueTwo the datum: (flags & mask) == 0.
			allow("clone", specs.LinuxSeccompArg{Index: 0, Value: cloneNamespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}),
			allow("socket", eq(0, afUNIX)),
			allow("socket", eq(0, afINET)),
			allow("socket", eq(0, afINET6)),
			allow("socket", eq(0, afNETLINK), eq(2, netlinkROUTE)),
			allow("socketpair", eq(0, afUNIX)),
			{Names: append([]string(nil), seccompENOSYS...), Action: specs.ActErrno, ErrnoRet: &enosys},
		},
	}
}
