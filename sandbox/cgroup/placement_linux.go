package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Where runs' cgroups go.
//
// On cgroup v1 and hybrid hosts every run is /sealrun/<run> in each hierarchy, as before.
//
// On cgroup v2 with systemd as the cgroup owner, a process may create cgroups only below a cgroup
// systemd delegated to it (a unit with Delegate=yes; systemd marks such a cgroup with the
// extended attribute trusted.delegate, or user.delegate for a user manager), and no process may
// live in a cgroup whose controllers are enabled for its children. So a host under a delegated
// cgroup D puts its runs in D/runs/<run>, and when it lives in D itself (sealrund as its unit's
// main process) it first moves itself into the leaf D/supervisor. A host with no delegated cgroup
// above it (a v2 host without systemd, or root in a login session) uses /sealrun at the top of the
// hierarchy; sealrun doctor says when that is outside systemd's tree. HostConfig.CgroupParent
// overrides all of this.

// Leaf names sealrun creates inside a delegated cgroup.
const (
	RunsLeaf           = "runs"
	SupervisorLeaf     = "supervisor"
	Mountpoint         = "/sys/fs/cgroup"
	ControllersFile    = "cgroup.controllers"
	cgroupSubtreeCtl   = "cgroup.subtree_control"
	DelegateXattr      = "trusted.delegate"
	delegateXattrUser  = "user.delegate"
	wantedControllerV2 = "cpu cpuset io memory pids"
)

// Placement says where a host creates its runs' cgroups and why.
type Placement struct {
	Root      string `json:"root"`                // parent of every run's cgroup ("/sealrun", or D/runs)
	Delegated string `json:"delegated,omitempty"` // the delegated cgroup D it lives under, if any
	// Base is the highest cgroup sealrun changes (creates children in, enables controllers of):
	// the delegated one, or / where nothing is delegated (v2).
	Base   string `json:"base"`
	Moved  bool   `json:"moved,omitempty"` // this process moved itself into D/supervisor
	Reason string `json:"reason"`
}

// OwnV2 is this process's cgroup in the unified hierarchy ("/system.slice/x.service").
func OwnV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("/proc/self/cgroup has no cgroup v2 entry (0::)")
}

// Delegated reports whether systemd delegated the cgroup at path (relative to the mountpoint).
func Delegated(cgPath string) bool {
	dir := filepath.Join(Mountpoint, cgPath)
	for _, attr := range []string{DelegateXattr, delegateXattrUser} {
		buf := make([]byte, 8)
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return true
		}
	}
	return false
}

// NearestDelegated walks up from cgPath to the first delegated cgroup ("" if none).
func NearestDelegated(cgPath string) string {
	for p := path.Clean(cgPath); p != "/" && p != "."; p = path.Dir(p) {
		if Delegated(p) {
			return p
		}
	}
	return ""
}

// ResolvePlacement decides where this process puts runs' cgroups (see above); configured, when
// set, is taken as is. Where this process lives in its delegated cgroup itself it moves into
// D/supervisor first (its threads too: cgroup v2 moves a whole process), and refuses when other
// processes share D: their controllers could not be enabled below it.
func ResolvePlacement(configured string) (Placement, error) {
	if configured != "" {
		if !path.IsAbs(configured) || path.Clean(configured) != configured || configured == "/" {
			return Placement{}, fmt.Errorf("%w: cgroup parent %q: give an absolute, clean cgroup path below the root, like /sealrun or /system.slice/sealrund.service/runs", ErrBadConfig, configured)
		}
		return Placement{Root: configured, Base: "/", Reason: "configured (cgroup_parent)"}, nil
	}
	if cgroups.Mode() != cgroups.Unified {
		return Placement{Root: DefaultRoot, Base: "/", Reason: "cgroup v1/hybrid: every hierarchy's /sealrun"}, nil
	}
	own, err := OwnV2()
	if err != nil {
		return Placement{}, fmt.Errorf("find this process's cgroup: %w", err)
	}
	d := NearestDelegated(own)
	if d == "" {
		return Placement{Root: DefaultRoot, Base: "/", Reason: fmt.Sprintf("no delegated cgroup above this process's %s: runs go to /sealrun at the top of the hierarchy", own)}, nil
	}
	p := Placement{Root: path.Join(d, RunsLeaf), Delegated: d, Base: d, Reason: fmt.Sprintf("delegated by systemd: %s", d)}
	if own == d {
		if err := moveSelfToLeaf(d); err != nil {
			return Placement{}, err
		}
		p.Moved = true
		p.Reason += "; this process moved into " + path.Join(d, SupervisorLeaf)
	}
	return p, enableControllers(d)
}

// moveSelfToLeaf moves this process from the delegated cgroup d into d/supervisor, and checks that
// no other process is left in d.
func moveSelfToLeaf(d string) error {
	leaf := filepath.Join(Mountpoint, d, SupervisorLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("move sealrun (pid %d) into %s: %w", os.Getpid(), leaf, err)
	}
	b, err := os.ReadFile(filepath.Join(Mountpoint, d, "cgroup.procs"))
	if err != nil {
		return err
	}
	if others := strings.Fields(string(b)); len(others) > 0 {
		return fmt.Errorf("%w: the delegated cgroup %s holds other processes (pids %s) besides sealrun: no process may stay in a cgroup whose controllers are enabled for its children; run sealrund as the only process of its unit (the shipped sealrund.service), or set cgroup_parent", ErrBadConfig, d, strings.Join(others, " "))
	}
	return nil
}

// Controllers reads a cgroup's cgroup.controllers (what it may hand on to its children).
func Controllers(cgPath string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(Mountpoint, cgPath, ControllersFile))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

// enableControllers turns on, in cgPath's cgroup.subtree_control, every controller sealrun uses
// that cgPath has (writing only those not yet on). A missing one is an error naming it: a unit
// that delegates fewer controllers than runs need.
func enableControllers(cgPath string) error {
	have, err := Controllers(cgPath)
	if err != nil {
		return fmt.Errorf("read the controllers of cgroup %s: %w", cgPath, err)
	}
	ctl := filepath.Join(Mountpoint, cgPath, cgroupSubtreeCtl)
	on, err := os.ReadFile(ctl)
	if err != nil {
		return fmt.Errorf("read %s: %w", ctl, err)
	}
	enabled := strings.Fields(string(on))
	var missing []string
	for _, c := range strings.Fields(wantedControllerV2) {
		switch {
		case !slices.Contains(have, c):
			if c != "io" && c != "cpuset" { // limits sealrun applies only where the host has them
				missing = append(missing, c)
			}
		case !slices.Contains(enabled, c):
			if err := os.WriteFile(ctl, []byte("+"+c), 0); err != nil {
				return fmt.Errorf("enable the %s controller for the children of cgroup %s: %w", c, cgPath, err)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: cgroup %s lacks the %s controller(s), which every run's limits need: delegate them (Delegate=yes in the unit, or DelegateControllers=cpu memory pids), or enable them in the parent's cgroup.subtree_control", ErrBadConfig, cgPath, strings.Join(missing, ", "))
	}
	return nil
}

// mkdirCgroupV2 creates cgPath and its missing parents below base in the unified hierarchy,
// enabling the controllers in base and every cgroup on the way so that cgPath has them. base is
// the highest cgroup sealrun may change: the delegated one, or / where nothing is delegated.
func mkdirCgroupV2(base, cgPath string) error {
	rel, err := filepath.Rel(base, cgPath)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("cgroup %s is not below %s", cgPath, base)
	}
	cur := base
	for _, part := range strings.Split(rel, "/") {
		if err := enableControllers(cur); err != nil {
			return err
		}
		cur = path.Join(cur, part)
		if err := os.Mkdir(filepath.Join(Mountpoint, cur), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", cur, err)
		}
	}
	return nil
}

// SubtreeEnabled lists the controllers enabled for cgPath's children.
func SubtreeEnabled(cgPath string) []string {
	b, _ := os.ReadFile(filepath.Join(Mountpoint, cgPath, cgroupSubtreeCtl))
	return strings.Fields(string(bytes.TrimSpace(b)))
}
