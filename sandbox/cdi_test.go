package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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

// A runner gets the fake GPU node and its device-cgroup rule; the CDI hook never runs.
func TestGPUInRunner(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	dirs, _ := fakeCDI(t, true)
	edits, err := ResolveGPUs(dirs, []string{"sealrun.test/gpu=0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "gpu")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	var out bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: workspace(t, r), Devices: edits.Devices, Env: edits.Env,
		Stdout: &out, Stderr: &out, Args: []string{"sh", "-c", "ls -l /dev/sealrun-test-gpu0; echo $FAKE_GPU_VISIBLE; cat /sys/fs/cgroup/devices/devices.list | grep 195"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s", code, err, out.String())
	}
	if !strings.Contains(out.String(), "195,   0") || !strings.Contains(out.String(), "\n0\n") || !strings.Contains(out.String(), "c 195:0 rw") {
		t.Errorf("GPU not visible as expected:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "hook-ran")); err == nil {
		t.Error("the CDI hook ran")
	}
	c.Destroy(ctx)
	// The controller never gets it.
	if _, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Devices: edits.Devices, Args: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "never gets devices") {
		t.Errorf("controller with a GPU: %v", err)
	}
}
