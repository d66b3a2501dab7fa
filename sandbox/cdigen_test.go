package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// A host without nvidia-ctk: sealrun's own spec names the same devices nvidia-ctk's does (by
// index, by UUID, all), with the driver's control nodes, every library of the loaded driver's
// version (under its SONAME too) and nvidia-smi; the CDI library reads it, a run's GPU resolves
// through it exactly as through nvidia-ctk's, and doctor's facts (model, driver, freshness) come
// out the same.
func TestGenerateNVIDIACDI(t *testing.T) {
	requireRoot(t) // the stand-in device nodes
	dirs, proc := nvidiaHost(t, true)
	root := filepath.Dir(dirs[0])
	os.RemoveAll(dirs[0]) // nvidia-ctk's spec: this host has none
	lib := filepath.Join(root, "usr/lib/x86_64-linux-gnu")
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(lib, "libnvidia-ptxjitcompiler.so.550.54.15"), "stand-in\n")
	write(filepath.Join(lib, "libcuda.so.535.104.05"), "an older driver's, left behind\n")
	write(filepath.Join(root, "usr/local/nvidia/lib64/libcuda.so.550.54.15"), "a second copy: the first directory wins\n")
	os.Symlink("/etc/shadow", filepath.Join(lib, "libnvidia-evil.so.550.54.15")) // a link is never mounted
	os.Symlink("libcuda.so.550.54.15", filepath.Join(lib, "libcuda.so.1"))
	libz, err := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/libz.so.1")
	if err != nil {
		t.Fatalf("no libz to stand in for a library with a SONAME: %v", err)
	}
	copyFile(t, libz, filepath.Join(lib, "libnvidia-ml.so.550.54.15")) // its SONAME (libz.so.1) is another library's

	g, err := GenerateNVIDIACDI(root)
	if err != nil {
		t.Fatal(err)
	}
	if g.Driver != "550.54.15" || !slices.Equal(g.GPUs, []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"}) || len(g.Spec.Devices) != 5 {
		t.Fatalf("driver %s, GPUs %v, %d devices", g.Driver, g.GPUs, len(g.Spec.Devices))
	}
	wantLibs := []string{filepath.Join(lib, "libcuda.so.550.54.15"), filepath.Join(lib, "libnvidia-ml.so.550.54.15"), filepath.Join(lib, "libnvidia-ptxjitcompiler.so.550.54.15")}
	if !slices.Equal(g.Libraries, wantLibs) || !slices.Equal(g.Binaries, []string{filepath.Join(root, "usr/bin/nvidia-smi")}) {
		t.Errorf("libraries %v, binaries %v", g.Libraries, g.Binaries)
	}
	var nodes []string
	for _, n := range g.Spec.ContainerEdits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	if !slices.Equal(nodes, []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
		t.Errorf("control nodes %v", nodes)
	}
	for _, m := range g.Spec.ContainerEdits.Mounts {
		// Below root only: the test's temporary directory has random digits in its name ("535" too).
		host := strings.TrimPrefix(m.HostPath, root)
		if strings.Contains(m.ContainerPath, "libz") || strings.Contains(host, "evil") || strings.Contains(host, "535") {
			t.Errorf("mounted %s at %s", m.HostPath, m.ContainerPath)
		}
	}

	// Written where sealrun reads CDI specs: the run's GPU resolves through it.
	cdiDir := filepath.Join(root, "etc-cdi")
	os.MkdirAll(cdiDir, 0o755)
	if err := os.WriteFile(filepath.Join(cdiDir, "sealrun-nvidia.json"), g.JSON(), 0o644); err != nil {
		t.Fatal(err)
	}
	names, errs := CDIDevices([]string{cdiDir})
	if len(errs) > 0 || len(names) != 5 || CDISpecFile([]string{cdiDir}, "nvidia.com/gpu=0") != filepath.Join(cdiDir, "sealrun-nvidia.json") {
		t.Fatalf("the CDI library lists %v, %v", names, errs)
	}
	edits, err := ResolveGPUs([]string{cdiDir}, []string{"nvidia.com/gpu=1"})
	if err != nil {
		t.Fatal(err)
	}
	var devs []string
	for _, d := range edits.Devices {
		devs = append(devs, d.Path)
	}
	slices.Sort(devs)
	if !slices.Equal(devs, []string{"/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia1", "/dev/nvidiactl"}) || len(edits.DroppedHooks) != 0 {
		t.Errorf("GPU 1 gives devices %v, hooks %v", devs, edits.DroppedHooks)
	}
	facts, err := GPUFacts([]string{cdiDir}, proc, []string{"nvidia.com/gpu=GPU-b2f04d71-5e6a-4c88-a1d3-7f9e2c4b6a05"})
	if err != nil || len(facts) != 1 || facts[0].Model != "NVIDIA H100 80GB HBM3" || facts[0].SpecDriver != "550.54.15" || facts[0].Stale() {
		t.Errorf("doctor's facts through sealrun's spec: %+v, %v", facts, err)
	}

	// A sandbox that shows only the nodes: the GPUs from /dev, the driver from the libraries.
	os.RemoveAll(filepath.Join(proc, "driver"))
	os.Remove(filepath.Join(lib, "libcuda.so.535.104.05"))
	if g, err := GenerateNVIDIACDI(root); err != nil || g.Driver != "550.54.15" || len(g.GPUs) != 3 || len(g.Spec.Devices) != 3 {
		t.Errorf("without /proc/driver/nvidia: %+v, %v", g, err)
	}
	// ... and two drivers' libraries with nothing to choose between them: refused, both named.
	write(filepath.Join(lib, "libnvidia-ml.so.535.104.05"), "older\n")
	if _, err := GenerateNVIDIACDI(root); err == nil || !strings.Contains(err.Error(), "535.104.05, 550.54.15") {
		t.Errorf("two driver versions and no /proc: %v", err)
	}
}

// What a host without a usable driver, or a hostile one, gets: an error naming what is missing
// and the fix, and nothing of what it must not mount.
func TestGenerateNVIDIACDIRefusals(t *testing.T) {
	requireRoot(t)
	if _, err := GenerateNVIDIACDI(filepath.Join(t.TempDir(), "absent")); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a missing root: %v", err)
	}
	if _, err := GenerateNVIDIACDI(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no NVIDIA GPU") || !strings.Contains(err.Error(), "nvidia-smi") {
		t.Errorf("no GPU: %v", err)
	}
	_, proc := nvidiaHost(t, true)
	root := filepath.Dir(proc)
	// Hostile driver files: a UUID that is a path, a minor out of range; neither becomes a name.
	info := filepath.Join(proc, "driver/nvidia/gpus/0000:17:00.0/information")
	os.WriteFile(info, []byte("GPU UUID: GPU-../../../etc/passwd\nDevice Minor: 0\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "driver/nvidia/gpus/0000:65:00.0/information"), []byte("Device Minor: 99999\n"), 0o644)
	g, err := GenerateNVIDIACDI(root)
	if err != nil || len(g.Spec.Devices) != 2 || g.Spec.Devices[0].Name != "0" || g.Spec.Devices[1].Name != "all" {
		t.Fatalf("hostile information files: %+v, %v", g, err)
	}
	os.Remove(filepath.Join(root, "dev/nvidia0"))
	if _, err := GenerateNVIDIACDI(root); err == nil || !strings.Contains(err.Error(), "dev/nvidia0 is not a device node") {
		t.Errorf("a GPU without its node: %v", err)
	}
	syscall.Mknod(filepath.Join(root, "dev/nvidia0"), syscall.S_IFCHR|0o666, 195<<8)
	os.Remove(filepath.Join(root, "dev/nvidiactl"))
	if _, err := GenerateNVIDIACDI(root); err == nil || !strings.Contains(err.Error(), "nvidiactl is not a device node") {
		t.Errorf("no control node: %v", err)
	}
	syscall.Mknod(filepath.Join(root, "dev/nvidiactl"), syscall.S_IFCHR|0o666, 195<<8|255)
	os.Remove(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"))
	if _, err := GenerateNVIDIACDI(root); err == nil || !strings.Contains(err.Error(), "libcuda.so.550.54.15") {
		t.Errorf("no CUDA driver library: %v", err)
	}
}

// A library's SONAME is a second name of it only when it is that library's own.
func TestSONAMEAlias(t *testing.T) {
	libz, err := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/libz.so.1")
	if err != nil {
		t.Fatalf("no libz: %v", err)
	}
	if so := sonameAlias(libz, filepath.Base(libz)); so != "libz.so.1" {
		t.Errorf("libz's own SONAME: %q", so)
	}
	if so := sonameAlias(libz, "libcuda.so.550.54.15"); so != "" {
		t.Errorf("another library's SONAME taken as libcuda's: %q", so)
	}
	if so := sonameAlias("testdata/nvidia/README.md", "libcuda.so.550.54.15"); so != "" {
		t.Errorf("a file that is not ELF: %q", so)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
}
