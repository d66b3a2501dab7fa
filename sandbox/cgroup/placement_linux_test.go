package cgroup

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/cgroups/v3"
	"github.com/sealrun/sealrun/internal/testenv"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv(placementChildEnv) != "" {
		placementChild() // TestPlacementDelegated's child: resolve its placement and say so
	}
	os.Exit(m.Run())
}

const placementChildEnv = "SEALRUN_TEST_PLACEMENT_CHILD"

func placementChild() {
	p, err := ResolvePlacement("")
	out := struct {
		Placement Placement `json:"placement"`
		Error     string    `json:"error,omitempty"`
		Cgroup    string    `json:"cgroup"`
	}{Placement: p}
	if err != nil {
		out.Error = err.Error()
	}
	out.Cgroup, _ = OwnV2()
	json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
}

// sealrund as its unit's main process, on cgroup v2: a delegated cgroup (marked as systemd marks
// it) with the process in it moves itself into <cgroup>/supervisor and places runs at
// <cgroup>/runs; a second process in the same cgroup makes that impossible, and it says so.
func TestPlacementDelegated(t *testing.T) {
	testenv.RequireRoot(t)
	if cgroups.Mode() != cgroups.Unified {
		t.Skip("cgroup v2 only: make test-cgroup2 runs it in its guest")
	}
	own, _ := OwnV2()
	base := NearestDelegated(own)
	if base == "" {
		base = "/"
	}
	unit := path.Join(base, fmt.Sprintf("sealrun-unit-test-%d", os.Getpid()))
	dir := filepath.Join(Mountpoint, unit)
	if err := mkdirCgroupV2(base, unit); err != nil {
		t.Fatal(err)
	}
	defer func() {
		Tree{Path: unit}.KillAll(0)
		Tree{Path: unit}.Remove()
	}()
	if err := unix.Setxattr(dir, DelegateXattr, []byte("1"), 0); err != nil {
		t.Fatalf("mark %s delegated: %v", dir, err)
	}
	self, _ := os.Executable()
	// start runs the test binary as the child, moved into the unit's cgroup before it runs.
	start := func() (Placement, string, string) {
		t.Helper()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), placementChildEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true}
		fd, err := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr.CgroupFD = fd
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v %s", err, out)
		}
		var res struct {
			Placement Placement `json:"placement"`
			Error     string    `json:"error"`
			Cgroup    string    `json:"cgroup"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("child said %q: %v", out, err)
		}
		return res.Placement, res.Error, res.Cgroup
	}
	p, errText, cg := start()
	if errText != "" || p.Root != path.Join(unit, "runs") || !p.Moved || cg != path.Join(unit, "supervisor") {
		t.Fatalf("the unit's only process: placement %+v, error %q, it ended in %s", p, errText, cg)
	}
	if on := SubtreeEnabled(unit); !slices.Contains(on, "memory") || !slices.Contains(on, "pids") {
		t.Errorf("the unit's cgroup enables only %v for its children", on)
	}
	// Another process in the unit's cgroup: sealrund cannot make it an inner node.
	sleeper := exec.Command("sleep", "30")
	fd, _ := syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
	sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err := sleeper.Start()
	syscall.Close(fd)
	if err != nil {
		// The unit's cgroup now hands controllers to its children: no process may join it. The
		// kernel refuses (EBUSY), which is the rule the refusal below is about.
		if !errors.Is(err, syscall.EBUSY) {
			t.Fatalf("start a second process in %s: %v", unit, err)
		}
		os.WriteFile(filepath.Join(dir, cgroupSubtreeCtl), []byte("-memory -pids -cpu -io -cpuset"), 0)
		fd, _ = syscall.Open(dir, syscall.O_DIRECTORY|syscall.O_RDONLY, 0)
		sleeper = exec.Command("sleep", "30")
		sleeper.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
		err = sleeper.Start()
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	if _, errText, _ := start(); !strings.Contains(errText, "holds other processes") || !strings.Contains(errText, strconv.Itoa(sleeper.Process.Pid)) {
		t.Errorf("a unit with another process: %q", errText)
	}
}
