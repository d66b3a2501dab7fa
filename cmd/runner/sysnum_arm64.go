package main

// Syscall numbers of the arm64 (asm-generic) ABI.
const (
	sysClone3 = 435
	sysSetns  = 268
)

var gatedCalls = []gatedCall{
	{name: "pidfd_getfd", nr: 438, args: [6]uintptr{^uintptr(0), 0, 0}},
	{name: "mbind", nr: 235},
	{name: "set_mempolicy", nr: 237},
	{name: "get_mempolicy", nr: 236},
	{name: "io_uring_setup", nr: 425},
	{name: "bpf", nr: 280, args: [6]uintptr{^uintptr(0)}},
	{name: "perf_event_open", nr: 241},
	{name: "userfaultfd", nr: 282, args: [6]uintptr{^uintptr(0)}},
	{name: "keyctl", nr: 219, args: [6]uintptr{^uintptr(0)}},
	{name: "ptrace", nr: 117, args: [6]uintptr{^uintptr(0)}},
	{name: "mount", nr: 40},
	{name: "process_vm_readv", nr: 270},
	{name: "open_by_handle_at", nr: 265, args: [6]uintptr{^uintptr(0)}},
	{name: "kexec_load", nr: 104, args: [6]uintptr{0, 0, 0, ^uintptr(0)}},
	{name: "init_module", nr: 105},
	{name: "add_key", nr: 217},
	{name: "fsopen", nr: 430},
	{name: "personality", nr: 92, args: [6]uintptr{0xffffffff}},
}
