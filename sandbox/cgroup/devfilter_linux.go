package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The device cgroup on cgroup v2 is an eBPF program (BPF_PROG_TYPE_CGROUP_DEVICE) attached to a
// cgroup. runc generates one from the spec's rules but appends rules of its own (mknod of any
// device, /dev/net/tun) that a spec cannot remove, and its program cannot be edited from outside.
// sealrun therefore attaches a second program of its own, built from the same spec rules only, to
// each container's parent cgroup (its wrapper, which sealrun creates and runc never touches). With
// BPF_F_ALLOW_MULTI every program attached on the way from the container's cgroup to the root runs,
// and an access is allowed only when all of them allow it: the container gets exactly the
// standard nodes and its GPUs, whatever the runtime adds. On cgroup v1 the network hook removes
// runc's extra rules from devices.list instead (netnshook.TightenDevices).
//
// Why not containerd/cgroups' cgroup2.DeviceFilter and LoadAttachCgroupDeviceFilter (a
// dependency already): (1) the probe must find sealrun's program among the effective ones and
// read its rules back from the kernel (EffectiveDeviceRules), and the library's program has no
// name and is the same code's output as runc's own, wider program: it cannot be told apart or
// read back as rules; (2) the library refuses a rule whose type is unset and dereferences an
// unset major or minor (a panic), which the runtime spec defines as all and any and sealrun's
// specs use. For the same rules the two programs allow the same opens. TestDeviceFilterAgainstContainerd
// shows all of this on a real kernel, and fails when the library changes so that it could serve.

// DeviceFilterName names sealrun's program (bpftool prog shows it), so that the probe finds it.
const DeviceFilterName = "sealrun_devices"

// A DevRule is one allowed access: type 'c' or 'b' ('a' for both), major and minor (-1: any),
// access a subset of "rwm".
type DevRule struct {
	typ          byte
	major, minor int64
	access       string
}

func (d DevRule) String() string {
	num := func(n int64) string {
		if n < 0 {
			return "*"
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%c %s:%s %s", d.typ, num(d.major), num(d.minor), d.access)
}

// LimitDevicesV1 makes a cgroup v1 device cgroup allow exactly rules: deny all, then allow each.
// Cgroups created below it afterwards inherit the list and cannot widen it.
func LimitDevicesV1(cgroupPath string, rules []DevRule) error {
	dir := filepath.Join("/sys/fs/cgroup/devices", cgroupPath)
	if err := os.WriteFile(filepath.Join(dir, "devices.deny"), []byte("a"), 0); err != nil {
		return fmt.Errorf("device cgroup %s: deny all: %w", cgroupPath, err)
	}
	for _, r := range rules {
		if err := os.WriteFile(filepath.Join(dir, "devices.allow"), []byte(r.String()), 0); err != nil {
			return fmt.Errorf("device cgroup %s: allow %q: %w", cgroupPath, r.String(), err)
		}
	}
	return nil
}

// AllowRules keeps the allow rules of a spec's device cgroup (which starts with deny-all), in order.
func AllowRules(devs []specs.LinuxDeviceCgroup) ([]DevRule, error) {
	var out []DevRule
	for i, d := range devs {
		if !d.Allow {
			if i == 0 && d.Type == "" || d.Type == "a" {
				continue // the leading deny-all: the program denies whatever no rule allows
			}
			return nil, fmt.Errorf("device rule %d denies %s %v:%v; only a leading deny-all is supported", i, d.Type, d.Major, d.Minor)
		}
		r := DevRule{typ: 'a', major: -1, minor: -1, access: d.Access}
		if d.Type != "" {
			r.typ = d.Type[0]
		}
		if r.typ != 'a' && r.typ != 'c' && r.typ != 'b' {
			return nil, fmt.Errorf("device rule %d: type %q; use a, c or b", i, d.Type)
		}
		if d.Major != nil {
			r.major = *d.Major
		}
		if d.Minor != nil {
			r.minor = *d.Minor
		}
		if r.access == "" || strings.Trim(r.access, "rwm") != "" {
			return nil, fmt.Errorf("device rule %d: access %q; use letters of rwm", i, d.Access)
		}
		out = append(out, r)
	}
	return out, nil
}

// bpfInsn is one eBPF instruction (struct bpf_insn).
type bpfInsn struct {
	code uint8
	regs uint8 // dst in the low nibble, src in the high one
	off  int16
	imm  int32
}

const (
	bpfLdxMemW  = unix.BPF_LDX | unix.BPF_MEM | unix.BPF_W
	bpfMovK     = unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_K
	bpfMovX     = unix.BPF_ALU64 | unix.BPF_MOV | unix.BPF_X
	bpfAndK     = unix.BPF_ALU64 | unix.BPF_AND | unix.BPF_K
	bpfRshK     = unix.BPF_ALU64 | unix.BPF_RSH | unix.BPF_K
	bpfJneK     = unix.BPF_JMP | unix.BPF_JNE | unix.BPF_K
	bpfExit     = unix.BPF_JMP | unix.BPF_EXIT
	devcgBlock  = 1 // BPF_DEVCG_DEV_BLOCK
	devcgChar   = 2 // BPF_DEVCG_DEV_CHAR
	devcgMknod  = 1 // BPF_DEVCG_ACC_MKNOD
	devcgRead   = 2
	devcgWrite  = 4
	accessShift = 16
)

func ins(code uint8, dst, src uint8, off int16, imm int32) bpfInsn {
	return bpfInsn{code: code, regs: dst | src<<4, off: off, imm: imm}
}

// deviceFilterProgram compiles allow rules into a BPF_PROG_TYPE_CGROUP_DEVICE program: it returns
// 1 (allow) when a rule matches the type, major, minor and every requested access, else 0.
//
//	r2 = ctx->access_type; r3 = r2 & 0xffff (type); r4 = r2 >> 16 (access)
//	r5 = ctx->major; r6 = ctx->minor
//	per rule: if r3 != type goto next; if r5 != major goto next; if r6 != minor goto next;
//	          r7 = r4 & ^access; if r7 != 0 goto next; r0 = 1; exit
//	r0 = 0; exit
func deviceFilterProgram(rules []DevRule) []bpfInsn {
	p := []bpfInsn{
		ins(bpfLdxMemW, 2, 1, 0, 0),
		ins(bpfMovX, 3, 2, 0, 0),
		ins(bpfAndK, 3, 0, 0, 0xffff),
		ins(bpfMovX, 4, 2, 0, 0),
		ins(bpfRshK, 4, 0, 0, accessShift),
		ins(bpfLdxMemW, 5, 1, 4, 0),
		ins(bpfLdxMemW, 6, 1, 8, 0),
	}
	for _, r := range rules {
		var block []bpfInsn
		switch r.typ {
		case 'c':
			block = append(block, ins(bpfJneK, 3, 0, 0, devcgChar))
		case 'b':
			block = append(block, ins(bpfJneK, 3, 0, 0, devcgBlock))
		}
		if r.major >= 0 {
			block = append(block, ins(bpfJneK, 5, 0, 0, int32(r.major)))
		}
		if r.minor >= 0 {
			block = append(block, ins(bpfJneK, 6, 0, 0, int32(r.minor)))
		}
		var acc int32
		for _, c := range r.access {
			switch c {
			case 'm':
				acc |= devcgMknod
			case 'r':
				acc |= devcgRead
			case 'w':
				acc |= devcgWrite
			}
		}
		block = append(block,
			ins(bpfMovX, 7, 4, 0, 0),
			ins(bpfAndK, 7, 0, 0, ^acc&0xffff),
			ins(bpfJneK, 7, 0, 0, 0),
			ins(bpfMovK, 0, 0, 0, 1),
			ins(bpfExit, 0, 0, 0, 0),
		)
		// Every conditional jump skips to the end of the block.
		for i := range block {
			if block[i].code == bpfJneK {
				block[i].off = int16(len(block) - i - 1)
			}
		}
		p = append(p, block...)
	}
	return append(p, ins(bpfMovK, 0, 0, 0, 0), ins(bpfExit, 0, 0, 0, 0))
}

// decodeDeviceFilter reads back the rules of a program deviceFilterProgram made (the probe uses it
// on the program the kernel holds), refusing anything of another shape.
func decodeDeviceFilter(p []bpfInsn) ([]DevRule, error) {
	head := deviceFilterProgram(nil)
	if len(p) < len(head) {
		return nil, errors.New("not a sealrun device filter: too short")
	}
	for i := 0; i < len(head)-2; i++ {
		if p[i] != head[i] {
			return nil, fmt.Errorf("not a sealrun device filter: instruction %d", i)
		}
	}
	var rules []DevRule
	i := len(head) - 2
	for i < len(p)-2 {
		r := DevRule{typ: 'a', major: -1, minor: -1}
		for i < len(p) && p[i].code == bpfJneK {
			switch p[i].regs & 0xf {
			case 3:
				r.typ = map[int32]byte{devcgChar: 'c', devcgBlock: 'b'}[p[i].imm]
			case 5:
				r.major = int64(p[i].imm)
			case 6:
				r.minor = int64(p[i].imm)
			}
			i++
		}
		if i+5 > len(p) || p[i].code != bpfMovX || p[i+1].code != bpfAndK || p[i+2].code != bpfJneK || p[i+3].code != bpfMovK || p[i+3].imm != 1 || p[i+4].code != bpfExit || r.typ == 0 {
			return nil, fmt.Errorf("not a sealrun device filter: rule at instruction %d", i)
		}
		acc := ^p[i+1].imm & 0xffff
		for _, c := range []struct {
			bit int32
			ch  byte
		}{{devcgRead, 'r'}, {devcgWrite, 'w'}, {devcgMknod, 'm'}} {
			if acc&c.bit != 0 {
				r.access += string(c.ch)
			}
		}
		rules = append(rules, r)
		i += 5
	}
	tail := head[len(head)-2:]
	if p[len(p)-2] != tail[0] || p[len(p)-1] != tail[1] {
		return nil, errors.New("not a sealrun device filter: it does not end in deny")
	}
	return rules, nil
}

func bpf(cmd int, attr unsafe.Pointer, size uintptr) (uintptr, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if errno != 0 {
		return 0, errno
	}
	return r, nil
}

// The attribute structs below are parts of union bpf_attr. Their pointer fields are
// unsafe.Pointer (8 bytes, like the kernel's __aligned_u64 on 64-bit Linux) so that the Go runtime
// knows them: what they point to stays alive and is moved with its stack.

// progLoadAttr is the BPF_PROG_LOAD part of union bpf_attr.
type progLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       unsafe.Pointer
	license     unsafe.Pointer
	logLevel    uint32
	logSize     uint32
	logBuf      unsafe.Pointer
	kernVersion uint32
	progFlags   uint32
	progName    [16]byte
	ifindex     uint32
	attachType  uint32
}

type progAttachAttr struct {
	targetFd     uint32
	attachBpfFd  uint32
	attachType   uint32
	attachFlags  uint32
	replaceBpfFd uint32
}

type progQueryAttr struct {
	targetFd    uint32
	attachType  uint32
	queryFlags  uint32
	attachFlags uint32
	progIDs     unsafe.Pointer
	progCnt     uint32
}

// AttachDeviceFilter loads the program of rules and attaches it to the cgroup directory dir
// (BPF_F_ALLOW_MULTI, so that the runtime's own program below it runs too and both must allow).
// The attachment keeps the program alive until the cgroup is removed.
func AttachDeviceFilter(dir string, rules []DevRule) error {
	fd, err := loadDeviceFilter(deviceFilterProgram(rules))
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	cg, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer cg.Close()
	at := progAttachAttr{targetFd: uint32(cg.Fd()), attachBpfFd: uint32(fd), attachType: unix.BPF_CGROUP_DEVICE, attachFlags: unix.BPF_F_ALLOW_MULTI}
	if _, err := bpf(unix.BPF_PROG_ATTACH, unsafe.Pointer(&at), unsafe.Sizeof(at)); err != nil {
		return fmt.Errorf("attach the device filter to %s: %w", dir, err)
	}
	return nil
}

// loadDeviceFilter loads a device program and returns its fd. The verifier's log is asked for
// only when a first load fails (a long log of a good program would fail the load itself).
func loadDeviceFilter(prog []bpfInsn) (int, error) {
	license := []byte("GPL\x00")
	load := func(logBuf []byte) (uintptr, error) {
		attr := progLoadAttr{
			progType: unix.BPF_PROG_TYPE_CGROUP_DEVICE, insnCnt: uint32(len(prog)),
			insns: unsafe.Pointer(&prog[0]), license: unsafe.Pointer(&license[0]),
		}
		if logBuf != nil {
			attr.logLevel, attr.logSize, attr.logBuf = 1, uint32(len(logBuf)), unsafe.Pointer(&logBuf[0])
		}
		copy(attr.progName[:], DeviceFilterName)
		fd, err := bpf(unix.BPF_PROG_LOAD, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		runtime.KeepAlive(prog)
		runtime.KeepAlive(license)
		runtime.KeepAlive(logBuf)
		return fd, err
	}
	fd, err := load(nil)
	if err == nil {
		return int(fd), nil
	}
	logBuf := make([]byte, 1<<16)
	if fd, err2 := load(logBuf); err2 == nil {
		return int(fd), nil
	}
	return -1, fmt.Errorf("load the device filter (BPF_PROG_TYPE_CGROUP_DEVICE; the kernel needs CONFIG_CGROUP_BPF): %w: %s", err, strings.TrimSpace(strings.TrimRight(string(logBuf), "\x00")))
}

// deviceFilterIDs lists the ids of the device programs attached to the cgroup directory dir;
// with effective, every program that runs for it (its own and its ancestors').
func deviceFilterIDs(dir string, effective bool) ([]uint32, error) {
	cg, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer cg.Close()
	ids := make([]uint32, 64)
	q := progQueryAttr{targetFd: uint32(cg.Fd()), attachType: unix.BPF_CGROUP_DEVICE, progIDs: unsafe.Pointer(&ids[0]), progCnt: uint32(len(ids))}
	if effective {
		q.queryFlags = unix.BPF_F_QUERY_EFFECTIVE
	}
	_, err = bpf(unix.BPF_PROG_QUERY, unsafe.Pointer(&q), unsafe.Sizeof(q))
	runtime.KeepAlive(ids)
	if err != nil {
		return nil, fmt.Errorf("query the device programs of %s: %w", dir, err)
	}
	return ids[:q.progCnt], nil
}

// progInfo is the head of struct bpf_prog_info, up to the name.
type progInfo struct {
	typ             uint32
	id              uint32
	tag             [8]byte
	jitedProgLen    uint32
	xlatedProgLen   uint32
	jitedProgInsns  unsafe.Pointer
	xlatedProgInsns unsafe.Pointer
	loadTime        uint64
	createdByUID    uint32
	nrMapIDs        uint32
	mapIDs          unsafe.Pointer
	name            [16]byte
}

type objInfoAttr struct {
	bpfFd   uint32
	infoLen uint32
	info    unsafe.Pointer
}

type getIDAttr struct {
	id        uint32
	nextID    uint32
	openFlags uint32
}

// readDeviceFilter returns the name and the instructions (as the kernel holds them) of program id.
func readDeviceFilter(id uint32) (string, []bpfInsn, error) {
	ga := getIDAttr{id: id}
	fd, err := bpf(unix.BPF_PROG_GET_FD_BY_ID, unsafe.Pointer(&ga), unsafe.Sizeof(ga))
	if err != nil {
		return "", nil, fmt.Errorf("open BPF program %d: %w", id, err)
	}
	defer unix.Close(int(fd))
	var info progInfo
	oa := objInfoAttr{bpfFd: uint32(fd), infoLen: uint32(unsafe.Sizeof(info)), info: unsafe.Pointer(&info)}
	if _, err := bpf(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&oa), unsafe.Sizeof(oa)); err != nil {
		return "", nil, fmt.Errorf("read BPF program %d: %w", id, err)
	}
	name := strings.TrimRight(string(info.name[:]), "\x00")
	n := info.xlatedProgLen / 8
	if n == 0 {
		return name, nil, nil
	}
	insns := make([]bpfInsn, n)
	info2 := progInfo{xlatedProgLen: n * 8, xlatedProgInsns: unsafe.Pointer(&insns[0])}
	oa = objInfoAttr{bpfFd: uint32(fd), infoLen: uint32(unsafe.Sizeof(info2)), info: unsafe.Pointer(&info2)}
	_, err = bpf(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&oa), unsafe.Sizeof(oa))
	runtime.KeepAlive(insns)
	if err != nil {
		return "", nil, fmt.Errorf("read BPF program %d's instructions: %w", id, err)
	}
	return name, insns, nil
}

// EffectiveDeviceRules reads the device rules that hold for the cgroup directory dir on cgroup v2:
// those of sealrun's program among the effective ones, and how many other programs (the runtime's)
// also run. Without sealrun's program it is an error: the runtime's rules alone are too wide.
func EffectiveDeviceRules(dir string) (rules []string, others int, err error) {
	ids, err := deviceFilterIDs(dir, true)
	if err != nil {
		return nil, 0, err
	}
	found := false
	for _, id := range ids {
		name, insns, err := readDeviceFilter(id)
		if err != nil {
			return nil, 0, err
		}
		if name != DeviceFilterName {
			others++
			continue
		}
		rs, err := decodeDeviceFilter(insns)
		if err != nil {
			return nil, 0, fmt.Errorf("BPF program %d named %s: %w", id, name, err)
		}
		found = true
		for _, r := range rs {
			rules = append(rules, r.String())
		}
	}
	if !found {
		return nil, others, fmt.Errorf("no sealrun device filter is attached above %s (%d other device programs): the runtime's own rules allow mknod of any device and /dev/net/tun", dir, others)
	}
	return rules, others, nil
}
