package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// fakeCDI writes a CDI spec for a fake GPU: a character device 195:0 (the NVIDIA major, with no
// driver behind it here, so opening it does nothing) and a hook that must never run.
// Only a root test that starts a container asks for the node itself (mknod in /dev).
func fakeCDI(t *testing.T, makeNode bool) (dirs []string, node string) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	// In a user namespace the runtime bind-mounts a device from the same path on the host, so the
	// fake node lives at the path the container sees (removed after the test).
	node = "/dev/sealrun-test-gpu0"
	if makeNode {
		requireRoot(t)
		os.Remove(node)
		if err := syscall.Mknod(node, syscall.S_IFCHR|0o666, int(195<<8)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(node) })
	}
	spec := `cdiVersion: "0.6.0"
kind: sealrun.test/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: ` + node + `
          hostPath: ` + node + `
          type: c
          major: 195
          minor: 0
containerEdits:
  env:
    - FAKE_GPU_VISIBLE=0
  hooks:
    - hookName: createContainer
      path: /bin/touch
      args: ["touch", "` + filepath.Join(dir, "hook-ran") + `"]
`
	if err := os.WriteFile(filepath.Join(dir, "fake.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{dir}, node
}

func TestResolveGPUs(t *testing.T) {
	dirs, _ := fakeCDI(t, false)
	names, errs := CDIDevices(dirs)
	if len(errs) > 0 || strings.Join(names, ",") != "sealrun.test/gpu=0" {
		t.Fatalf("devices %v errors %v", names, errs)
	}
	edits, err := ResolveGPUs(dirs, []string{"sealrun.test/gpu=0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(edits.Devices) != 1 || edits.Devices[0].Path != "/dev/sealrun-test-gpu0" || edits.Devices[0].Major != 195 {
		t.Errorf("devices %+v", edits.Devices)
	}
	if len(edits.DroppedHooks) != 1 || !strings.Contains(edits.DroppedHooks[0], "/bin/touch") {
		t.Errorf("hooks not dropped: %v", edits.DroppedHooks)
	}
	if _, err := ResolveGPUs(dirs, []string{"sealrun.test/gpu=7"}); err == nil || !strings.Contains(err.Error(), "sealrun.test/gpu=7") {
		t.Errorf("unknown device: %v", err)
	}
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "broken.yaml"), []byte("cdiVersion: [not a version\n"), 0o644)
	if _, errs := CDIDevices([]string{bad}); len(errs) == 0 {
		t.Error("an invalid CDI spec was not reported")
	}
}

// A runner gets the fake GPU node and its device rule, and nothing else: from inside, the run's
// GPU opens as far as the device cgroup goes (no driver behind it: ENXIO), while another GPU's
// node and /dev/net/tun (which runc's own rules allow), bind-mounted in, are refused (EPERM) — on
// cgroup v1 by the hook's tightening of devices.list, on v2 by sealrun's eBPF filter. The host
// reads the same rules back. The CDI hook never runs.
func TestGPUInRunner(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	dirs, _ := fakeCDI(t, true)
	edits, err := ResolveGPUs(dirs, []string{"sealrun.test/gpu=0"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := t.TempDir()
	os.Chmod(nodes, 0o755)
	stand := map[string][2]int{"other-gpu": {195, 1}, "tun": {10, 200}}
	var extra []specs.Mount
	for name, mm := range stand {
		p := filepath.Join(nodes, name)
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, mm[0]<<8|mm[1]); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, specs.Mount{Destination: "/dev/" + name, Type: "bind", Source: p, Options: []string{"bind", "nosuid"}})
	}
	// Bounded, and each device named before it is read: the cgroup v2 guest once hung here for 15
	// minutes (not seen since, in five guest runs); a hang is now this test's failure, with the
	// container's output up to the device it stopped at.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	r, err := h.NewRun(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	var out, errb bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Devices: edits.Devices, Env: edits.Env, Extra: extra,
		Stdout: &out, Stderr: &errb, Args: []string{"sh", "-c", "exec 2>&1; ls -l /dev/sealrun-test-gpu0; echo $FAKE_GPU_VISIBLE; for d in sealrun-test-gpu0 other-gpu tun; do echo reading /dev/$d; cat /dev/$d; done; true"}})
	if refusedUnderGVisor(t, h, err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s%s", code, err, out.String(), errb.String())
	}
	got := out.String()
	if !strings.Contains(got, "195,   0") || !strings.Contains(got, "\n0\n") {
		t.Errorf("GPU not visible as expected:\n%s", got)
	}
	if strings.Contains(got, "sealrun-test-gpu0': Operation not permitted") || !strings.Contains(got, "sealrun-test-gpu0': No such device or address") {
		t.Errorf("the run's own GPU is not open to it:\n%s", got)
	}
	for name := range stand {
		if !strings.Contains(got, "/dev/"+name+"': Operation not permitted") {
			t.Errorf("/dev/%s was not refused by the device cgroup:\n%s", name, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "hook-ran")); err == nil {
		t.Error("the CDI hook ran")
	}
	c.Destroy(ctx)
	// The host reads the rules back: exactly the standard nodes and this GPU.
	res, err := h.Probe(ctx, ProbeConfig{Role: RoleRunner, Rootfs: imgs.controller, Runner: runnerBinary(t), Devices: edits.Devices})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || !slices.Contains(res.Devices, "c 195:0 rw") || slices.Contains(res.Devices, "c 10:200 rwm") {
		t.Errorf("devices read back %v; problems %v", res.Devices, res.Problems)
	}
	// The controller never gets it.
	if _, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Devices: edits.Devices, Args: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "never gets devices") {
		t.Errorf("controller with a GPU: %v", err)
	}
}

// nvidiaHost lays out testdata/nvidia (the CDI spec nvidia-ctk writes for two GPUs, and the
// driver's /proc files) under a directory of its own: the spec's host paths point at stand-in
// device nodes (with makeNodes: root) and driver files there. It returns the CDI dirs and the
// /proc root.
func nvidiaHost(t *testing.T, makeNodes bool) (dirs []string, proc string) {
	t.Helper()
	root := t.TempDir()
	os.Chmod(root, 0o755)
	spec, err := os.ReadFile("testdata/nvidia/cdi/nvidia.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cdiDir := filepath.Join(root, "cdi")
	os.MkdirAll(cdiDir, 0o755)
	if err := os.WriteFile(filepath.Join(cdiDir, "nvidia.yaml"), bytes.ReplaceAll(spec, []byte("@ROOT@"), []byte(root)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", "usr/bin/nvidia-smi"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte("stand-in\n"), 0o755)
	}
	os.MkdirAll(filepath.Join(root, "dev"), 0o755)
	for name, mm := range map[string][2]int{"nvidia0": {195, 0}, "nvidia1": {195, 1}, "nvidiactl": {195, 255}, "nvidia-modeset": {195, 254}, "nvidia-uvm": {236, 0}, "nvidia-uvm-tools": {236, 1}} {
		if !makeNodes {
			os.WriteFile(filepath.Join(root, "dev", name), nil, 0o644) // the CDI library only needs them to exist to list them
			continue
		}
		if err := syscall.Mknod(filepath.Join(root, "dev", name), syscall.S_IFCHR|0o666, mm[0]<<8|mm[1]); err != nil {
			t.Fatal(err)
		}
	}
	proc = filepath.Join(root, "proc")
	if err := os.CopyFS(proc, os.DirFS("testdata/nvidia/proc")); err != nil {
		t.Fatal(err)
	}
	return []string{cdiDir}, proc
}

// The driver's facts of each CDI GPU: its model by the minor of its /dev/nvidiaN node, the
// loaded driver, and the driver the spec was generated for; a driver upgrade makes the spec stale.
func TestGPUFactsFromNvidiaSpecs(t *testing.T) {
	dirs, proc := nvidiaHost(t, false)
	facts, err := GPUFacts(dirs, proc, []string{"nvidia.com/gpu=1", "nvidia.com/gpu=0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 2 || facts[0].Name != "nvidia.com/gpu=0" || facts[0].Model != "NVIDIA H100 80GB HBM3" || facts[0].BusID != "0000:17:00.0" ||
		facts[1].BusID != "0000:65:00.0" || facts[0].Driver != "550.54.15" || facts[0].SpecDriver != "550.54.15" || facts[0].Stale() {
		t.Fatalf("facts %+v", facts)
	}
	if model, driver := GPUModelAndDriver(facts); model != "NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3" || driver != "550.54.15" {
		t.Errorf("attested as %q, %q", model, driver)
	}
	// The same GPU under its UUID name.
	if f, err := GPUFacts(dirs, proc, []string{"nvidia.com/gpu=GPU-b2f04d71-5e6a-4c88-a1d3-7f9e2c4b6a05"}); err != nil || f[0].BusID != "0000:65:00.0" {
		t.Errorf("by UUID: %+v %v", f, err)
	}
	os.WriteFile(filepath.Join(proc, "driver/nvidia/version"), []byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.42.06  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"), 0o644)
	if f, _ := GPUFacts(dirs, proc, []string{"nvidia.com/gpu=0"}); len(f) != 1 || f[0].Driver != "555.42.06" || !f[0].Stale() {
		t.Errorf("after a driver upgrade: %+v", f)
	}
	if _, err := GPUFacts(dirs, proc, []string{"nvidia.com/gpu=7"}); err == nil || !strings.Contains(err.Error(), "nvidia.com/gpu=7") {
		t.Errorf("an unknown GPU: %v", err)
	}
	if NVIDIADriverVersion(t.TempDir()) != "" {
		t.Error("a driver version without a driver")
	}
	// A stand-in GPU of another vendor: no model from the NVIDIA driver, its CDI name instead.
	fake, _ := fakeCDI(t, false)
	f, err := GPUFacts(fake, proc, []string{"sealrun.test/gpu=0"})
	if model, _ := GPUModelAndDriver(f); err != nil || model != "sealrun.test/gpu=0" {
		t.Errorf("a non-NVIDIA device: %q %v", model, err)
	}
}

// On a host where nvidia-ctk wrote the CDI spec for two GPUs, a run given GPU 1 sees exactly
// GPU 1 and the driver's control nodes: GPU 0's node is absent, and bind-mounted in anyway it is
// refused by the device cgroup; the spec's hooks never run.
func TestNvidiaCDIRunnerSeesOnlyItsGPU(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	dirs, _ := nvidiaHost(t, true)
	edits, err := ResolveGPUs(dirs, []string{"nvidia.com/gpu=1"})
	if err != nil {
		t.Fatal(err)
	}
	// The spec's hooks are dropped (their links made in the container's own layer instead); its
	// device nodes live under another host root (as with nvidia-ctk --dev-root), so each is a bind
	// mount from there; the driver's files land in an image that lacks them through that layer.
	if len(edits.DroppedHooks) != 2 || len(edits.Mounts) != 8 || !slices.Contains(edits.Env, "NVIDIA_VISIBLE_DEVICES=void") ||
		edits.Symlinks["/usr/lib/x86_64-linux-gnu/libcuda.so"] != "libcuda.so.1" {
		t.Errorf("edits: hooks %v mounts %v env %v links %v", edits.DroppedHooks, edits.Mounts, edits.Env, edits.Symlinks)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "nvcdi")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	other := filepath.Join(filepath.Dir(dirs[0]), "dev", "nvidia0")
	var out, errb bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Devices: edits.Devices, Env: edits.Env, Symlinks: edits.Symlinks,
		Extra:  append(edits.Mounts, specs.Mount{Destination: "/dev/stolen-gpu0", Type: "bind", Source: other, Options: []string{"bind", "nosuid"}}),
		Stdout: &out, Stderr: &errb, Args: []string{"sh", "-c", "exec 2>&1; ls /dev | grep nvidia | tr '\\n' ' '; echo; cat /dev/nvidia1; cat /dev/nvidiactl; cat /dev/stolen-gpu0; " +
			"cat /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15 /usr/bin/nvidia-smi; readlink /usr/lib/x86_64-linux-gnu/libcuda.so; true"}})
	if refusedUnderGVisor(t, h, err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s%s", code, err, out.String(), errb.String())
	}
	got := out.String()
	if first, _, _ := strings.Cut(got, "\n"); first != "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia1 nvidiactl " {
		t.Errorf("the runner sees %q; want GPU 1 and the control nodes only", first)
	}
	for _, n := range []string{"nvidia1", "nvidiactl"} {
		if !strings.Contains(got, "/dev/"+n+"': No such device or address") {
			t.Errorf("/dev/%s is not open to the run (the device cgroup, not the missing driver, stopped it):\n%s", n, got)
		}
	}
	if !strings.Contains(got, "/dev/stolen-gpu0': Operation not permitted") {
		t.Errorf("GPU 0's node, bind-mounted in, was not refused by the device cgroup:\n%s", got)
	}
	if !strings.Contains(got, "stand-in\nstand-in\nlibcuda.so.1\n") {
		t.Errorf("the driver's library and binary, and the hook's link, are not there:\n%s", got)
	}
	c.Destroy(ctx)
}

// The doctor's GPU lines on the nvidia-ctk host: each GPU with its model, the driver, and a spec
// left behind by a driver upgrade (or a driver that is not loaded) as a failure with the fix.
func TestDoctorGPUChecks(t *testing.T) {
	dirs, proc := nvidiaHost(t, false)
	cs := gpuChecks(dirs, proc)
	if len(cs) != 2 || cs[0].Status != "ok" || !strings.Contains(cs[0].Detail, "nvidia.com/gpu=1 (NVIDIA H100 80GB HBM3, 0000:65:00.0)") || cs[1].Status != "ok" || !strings.Contains(cs[1].Detail, "550.54.15") {
		t.Fatalf("checks %+v", cs)
	}
	os.WriteFile(filepath.Join(proc, "driver/nvidia/version"), []byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  560.28.03  Thu Jul 18 20:27:27 UTC 2024\n"), 0o644)
	if cs := gpuChecks(dirs, proc); len(cs) != 2 || cs[1].Status != "fail" || !strings.Contains(cs[1].Detail, "generated for driver 550.54.15") || !strings.Contains(cs[1].Fix, "nvidia-ctk cdi generate") {
		t.Errorf("after a driver upgrade: %+v", cs)
	}
	os.RemoveAll(filepath.Join(proc, "driver"))
	if cs := gpuChecks(dirs, proc); len(cs) != 2 || cs[1].Status != "fail" || !strings.Contains(cs[1].Detail, "no NVIDIA driver is loaded") {
		t.Errorf("without a driver: %+v", cs)
	}
	if cs := gpuChecks([]string{t.TempDir()}, proc); len(cs) != 1 || cs[0].Status != "warn" {
		t.Errorf("no specs: %+v", cs)
	}
}

// update-ldcache leaves each versioned library's SONAME link; sealrun reads the SONAME from the
// library on the host (here the host's libc stands in for a driver library).
func TestHookSymlinksSONAME(t *testing.T) {
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no /lib/x86_64-linux-gnu/libc.so.6 to stand in for a driver library")
	}
	links := hookSymlinks([]string{"/usr/bin/nvidia-cdi-hook nvidia-cdi-hook update-ldcache --folder /usr/lib/x86_64-linux-gnu", "/usr/bin/nvidia-cdi-hook nvidia-cdi-hook create-symlinks --link ../x::relative-is-refused"},
		[]specs.Mount{{Destination: "/usr/lib/x86_64-linux-gnu/libfoo.so.550.54.15", Source: libc}, {Destination: "/usr/bin/nvidia-smi", Source: libc}})
	if len(links) != 1 || links["/usr/lib/x86_64-linux-gnu/libc.so.6"] != "libfoo.so.550.54.15" {
		t.Errorf("links %v", links)
	}
}

// refusedUnderGVisor: a runner given devices under gVisor must be refused, naming gVisor and the
// fix, before anything starts; it reports whether the runtime is gVisor.
func refusedUnderGVisor(t *testing.T, h *Host, err error) bool {
	t.Helper()
	if h.RuntimeFor(RoleRunner).Kind != KindRunsc {
		return false
	}
	if err == nil || !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "gVisor") || !strings.Contains(err.Error(), "runc or crun") {
		t.Errorf("a runner with devices under gVisor: %v; want a refusal naming gVisor and the fix", err)
	}
	return true
}
