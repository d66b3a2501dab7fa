package main

// Syscall numbers of the x86_64 ABI (the syscall package lacks the newer ones).
const (
	sysClone3 = 435
	sysSetns  = 308
)

var gatedCalls = []gatedCall{
	{name: "pidfd_getfd", nr: 438, args: [6]uintptr{^uintptr(0), 0, 0}}, // fd -1: EBADF when allowed
	{name: "mbind", nr: 237},                                              // length 0: a no-op when allowed
	{name: "set_mempolicy", nr: 238},                                      // MPOL_DEFAULT: a no-op when allowed
	{name: "get_mempolicy", nr: 239},                                      // nothing asked: a no-op when allowed
	{name: "io_uring_setup", nr: 425},                                     // 0 entries: EINVAL when allowed
	{name: "bpf", nr: 321, args: [6]uintptr{^uintptr(0)}},                 // bad command: EINVAL when allowed
	{name: "perf_event_open", nr: 298},                                    // NULL attr: EFAULT when allowed
	{name: "userfaultfd", nr: 323, args: [6]uintptr{^uintptr(0)}},         // bad flags: EINVAL when allowed
	{name: "keyctl", nr: 250, args: [6]uintptr{^uintptr(0)}},              // bad operation: EOPNOTSUPP when allowed
	{name: "ptrace", nr: 101, args: [6]uintptr{^uintptr(0)}},              // bad request: EIO/ESRCH when allowed
	{name: "mount", nr: 165},                                              // NULLs: EFAULT when allowed
	{name: "process_vm_readv", nr: 310},                                   // pid 0: ESRCH when allowed
	{name: "open_by_handle_at", nr: 304, args: [6]uintptr{^uintptr(0)}},   // fd -1: EBADF when allowed
	{name: "kexec_load", nr: 246, args: [6]uintptr{0, 0, 0, ^uintptr(0)}}, // bad flags
	{name: "init_module", nr: 175},                                        // NULL image
	{name: "add_key", nr: 248},                                            // NULL type: EFAULT when allowed
	{name: "fsopen", nr: 430},                                             // NULL name: EFAULT when allowed
	{name: "personality", nr: 135, args: [6]uintptr{0xffffffff}},          // query only
}
