package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/sandbox/posture"
)

// From inside a runner container (the role that runs agent code), every way to a nested
// namespace, every socket family and every gated syscall, one by one. Twice: under crun the
// second container loads the seccomp program crun compiled for the first (seccompcache_linux.go),
// and must refuse exactly as much.
func TestKernelSurfaces(t *testing.T) {
	r, imgs := testRun(t, "kernel")
	for i := range 2 {
		p, annotated := postureOf(t, r, imgs)
		if r.h.RuntimeFor(RoleRunner).Kind == KindCrun && i == 1 && !annotated {
			t.Errorf("the second runner container under crun was not given the compiled seccomp program (%s)", crunSeccompAnnotation)
		}
		if r.h.RuntimeFor(RoleRunner).Kind == KindRunsc {
			// clone3 is allowed under gVisor, to gVisor's kernel (Runtime.adjustSpec): an allowed
			// clone3 given size 0 fails with EINVAL and creates nothing.
			if p.Nested["clone3"] != "ALLOWED (the kernel answered EINVAL)" {
				t.Errorf("nested clone3 under gVisor: %q; want it allowed to gVisor's kernel", p.Nested["clone3"])
			}
			p.Nested["clone3"] = "refused: ENOSYS"
		}
		checkKernelSurfaces(t, p)
	}
}

// postureOf runs `runner posture` in a runner container and returns what it printed, and
// whether the container's spec carried crun's compiled seccomp program.
func postureOf(t *testing.T, r *Run, imgs testImages) (p posture.Record, annotated bool) {
	t.Helper()
	ctx := context.Background()
	var out, errb bytes.Buffer
	probe := "/tmp/.sealrun-probe"
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: workspace(t, r), Stdout: &out, Stderr: &errb,
		Extra: []specs.Mount{{Destination: probe, Type: "bind", Source: runnerBinary(t), Options: []string{"rbind", "ro", "nosuid", "nodev"}}},
		Args:  []string{probe, "posture"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy(ctx)
	var spec specs.Spec
	if b, err := os.ReadFile(filepath.Join(c.bundle, "config.json")); err != nil || json.Unmarshal(b, &spec) != nil {
		t.Fatalf("read the container's spec: %v", err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("posture: exit %d %v: %s", code, err, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p, spec.Annotations[crunSeccompAnnotation] != ""
}

func checkKernelSurfaces(t *testing.T, p posture.Record) {
	t.Helper()
	nested := map[string]string{
		"clone(CLONE_NEWUSER)":              "refused: EPERM",
		"clone(CLONE_NEWUSER|CLONE_NEWNET)": "refused: EPERM",
		"clone(CLONE_NEWUSER|CLONE_NEWNS)":  "refused: EPERM",
		"unshare(CLONE_NEWUSER)":            "refused: EPERM",
		"unshare(CLONE_NEWNET)":             "refused: EPERM",
		"unshare(CLONE_NEWNS)":              "refused: EPERM",
		"clone3":                            "refused: ENOSYS",
		"setns(net)":                        "refused: EPERM",
	}
	for k, want := range nested {
		if got := p.Nested[k]; got != want {
			t.Errorf("nested %s: %q, want %q", k, got, want)
		}
	}
	sockets := map[string]string{
		"AF_UNIX": "allowed", "AF_INET": "allowed", "AF_INET6": "allowed", "AF_NETLINK/NETLINK_ROUTE": "allowed", "socketpair(AF_UNIX)": "allowed",
		"AF_NETLINK/NETLINK_AUDIT": "refused: EPERM", "AF_NETLINK/NETLINK_KOBJECT_UEVENT": "refused: EPERM", "AF_NETLINK/NETLINK_NETFILTER": "refused: EPERM",
		"AF_PACKET": "refused: EPERM", "AF_VSOCK": "refused: EPERM", "AF_ALG": "refused: EPERM", "AF_KEY": "refused: EPERM",
		"AF_BLUETOOTH": "refused: EPERM", "AF_XDP": "refused: EPERM", "AF_TIPC": "refused: EPERM", "AF_RDS": "refused: EPERM",
	}
	for k, want := range sockets {
		if got := p.Sockets[k]; got != want {
			t.Errorf("socket %s: %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"pidfd_getfd", "mbind", "set_mempolicy", "get_mempolicy", "io_uring_setup", "bpf", "perf_event_open",
		"userfaultfd", "keyctl", "ptrace", "mount", "process_vm_readv", "open_by_handle_at", "kexec_load", "init_module", "add_key", "fsopen", "personality"} {
		if got := p.Syscalls[k]; got != "refused: EPERM" {
			t.Errorf("syscall %s: %q, want refused: EPERM (the filter's answer)", k, got)
		}
	}
}
