package sandbox

// Reap: removing what recorded runs of this host left after a crash, and nothing else.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// removeRecorded removes what a run record lists, and then the record (kept if anything failed,
// so that a later Reap tries again).
func (h *Host) removeRecorded(rec runRecord) []error {
	var errs []error
	if rec.Cgroup != "" {
		t := cgroup.Tree{Path: rec.Cgroup}
		if err := t.KillAll(h.cfg.KillTimeout); err != nil {
			errs = append(errs, err)
		}
		if err := t.Remove(); err != nil {
			errs = append(errs, err)
		}
		cgroup.RemoveRootIfEmpty(h.placement.Root)
	}
	for _, ws := range slices.Concat(rec.Workspaces, rec.Mounts) {
		if err := unmountWorkspace(ws); err != nil {
			errs = append(errs, err)
		}
	}
	if p := rec.netnsPath(); p != "" {
		if err := deleteNetns(p); err != nil {
			errs = append(errs, err)
		}
	}
	if rec.Shared.Base != 0 {
		if err := h.ranges.Release(rec.Shared); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(h.runRecordDir(rec.ID)); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// netnsPath is the path of the record's gateway namespace ("" if it has none): a bare name is
// one under LegacyNetnsDir, where earlier sealrun kept them.
func (rec runRecord) netnsPath() string {
	if rec.Netns == "" || filepath.IsAbs(rec.Netns) {
		return rec.Netns
	}
	return filepath.Join(LegacyNetnsDir, rec.Netns)
}

// Reaped lists what Reap removed.
type Reaped struct {
	Containers, Runs, Ranges, Bundles []string
	// Stranded are the gateway namespaces of those runs that a later mount over their directory
	// had hidden from their path (removed all the same: see removeHidden).
	Stranded []string
}

func (r Reaped) Empty() bool {
	return len(r.Containers)+len(r.Runs)+len(r.Ranges)+len(r.Bundles) == 0
}

// Reap removes what an earlier sealrun with this host's run directory left behind (a crash, a
// killed daemon): the containers in its runtime root, the runs it recorded (their cgroups,
// workspace mounts, gateway netns, also one a later mount hid: Reaped.Stranded names those), its
// UID ranges and bundles. It touches nothing another
// sealrun on the machine made. The daemon calls it at start, when nothing of its own is live.
func (h *Host) Reap(ctx context.Context) (Reaped, error) {
	var out Reaped
	var errs []error
	h.thawRecorded()
	stranded := StrandedNetns(h.cfg.NetnsDir)
	out.Containers, errs = h.reapContainers(ctx, errs)
	if entries, err := os.ReadDir(filepath.Join(h.cfg.RunDir, "runs")); err == nil {
		for _, e := range entries {
			var rec runRecord
			b, err := os.ReadFile(filepath.Join(h.runRecordDir(e.Name()), "record.json"))
			if err == nil {
				err = json.Unmarshal(b, &rec)
			}
			if err != nil || rec.ID != e.Name() {
				// Claimed but nothing created yet (a crash inside NewRun): only the claim goes.
				rec = runRecord{ID: e.Name()}
			}
			rerrs := h.removeRecorded(rec)
			errs = append(errs, rerrs...)
			out.Runs = append(out.Runs, e.Name())
			if p := rec.netnsPath(); p != "" && len(rerrs) == 0 && slices.Contains(stranded, p) {
				out.Stranded = append(out.Stranded, p)
			}
		}
	}
	if owners, err := h.ranges.Owners(); err == nil {
		for rg, owner := range owners {
			if err := h.ranges.Release(rg); err != nil {
				errs = append(errs, err)
			}
			out.Ranges = append(out.Ranges, owner)
		}
	}
	out.Bundles, errs = h.reapBundles(errs)
	if len(errs) > 0 {
		return out, infra(h.cfg.RunDir, "reap", errors.Join(errs...))
	}
	return out, nil
}

// thawRecorded thaws the cgroups of the recorded runs: a process killed between freezing a
// cgroup and thawing it left it frozen, its tasks would never die, and the runtime's delete
// would wait for them.
func (h *Host) thawRecorded() {
	entries, err := os.ReadDir(filepath.Join(h.cfg.RunDir, "runs"))
	if err != nil {
		return
	}
	for _, e := range entries {
		var rec runRecord
		if b, err := os.ReadFile(filepath.Join(h.runRecordDir(e.Name()), "record.json")); err == nil && json.Unmarshal(b, &rec) == nil && rec.Cgroup != "" {
			cgroup.Tree{Path: rec.Cgroup}.ThawDescendants()
		}
	}
}

// reapContainers kills and deletes every container in the runtimes' roots and lists them.
func (h *Host) reapContainers(ctx context.Context, errs []error) ([]string, []error) {
	var ids []string
	for _, rt := range h.Runtimes() {
		cs, err := rt.List(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, c := range cs {
			kctx, cancel := context.WithTimeout(ctx, h.cfg.KillTimeout)
			rt.Kill(kctx, c.ID, syscall.SIGKILL)
			// The runtime process that ran it in the foreground may delete it first, once it
			// died (crun does it sooner than runc): gone is what was asked.
			if err := rt.Delete(kctx, c.ID); err != nil && rt.exists(c.ID) {
				errs = append(errs, err)
			}
			cancel()
			ids = append(ids, c.ID)
		}
	}
	return ids, errs
}

// reapBundles removes the bundle directories left, once nothing is mounted in them (never
// recursing into a mounted source or image), and lists them.
func (h *Host) reapBundles(errs []error) ([]string, []error) {
	var names []string
	bundles := filepath.Join(h.cfg.RunDir, "bundles")
	entries, err := os.ReadDir(bundles)
	if err != nil {
		return nil, errs
	}
	for _, e := range entries {
		if err := unmountHidden(filepath.Join(bundles, e.Name())); err != nil {
			errs = append(errs, err)
			continue // never recurse into a mounted source
		}
		if err := unmountRootfs(filepath.Join(bundles, e.Name(), "rootfs")); err != nil {
			errs = append(errs, err)
			continue // never recurse into a mounted image
		}
		if err := unmountRootfs(filepath.Join(bundles, e.Name(), "image")); err != nil {
			errs = append(errs, err)
			continue
		}
		os.RemoveAll(filepath.Join(bundles, e.Name()))
		names = append(names, e.Name())
	}
	return names, errs
}

// ReapRunDir removes what a host with run directory runDir left — its containers, recorded
// runs (cgroups, mounts, gateway netns), UID ranges and bundles — and then the directory. The
// caller must know that host's process is gone: the tests use it for the run directories of
// test processes that were killed before their cleanups ran.
func ReapRunDir(ctx context.Context, runDir string) error {
	h, err := NewHost(HostConfig{StateDir: filepath.Join(runDir, "reap-state"), RunDir: runDir})
	if err != nil {
		return err
	}
	defer releaseRunDir(runDir)
	if _, err := h.Reap(ctx); err != nil {
		return err
	}
	return os.RemoveAll(runDir)
}

// PrivateRunDir makes a run directory of this process's own under parent (parent/<pid>), for
// a command that makes containers beside a daemon and other commands (sealrun grade, sandbox
// run): first it reaps the run directories under parent whose process is gone (one at a time
// across processes). release, called once the host's runs have ended, removes the directory.
func PrivateRunDir(ctx context.Context, parent string) (dir string, release func(), err error) {
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return "", nil, fmt.Errorf("run directories %s: %w", parent, err)
	}
	lock, err := os.OpenFile(filepath.Join(parent, ".reap.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("run directories %s: %w", parent, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", nil, fmt.Errorf("run directories %s: lock: %w", parent, err)
	}
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		old := filepath.Join(parent, e.Name())
		if !e.IsDir() || RunDirHeld(old) {
			continue
		}
		if err := ReapRunDir(ctx, old); err != nil {
			return "", nil, fmt.Errorf("reap %s, left by a sealrun process that is gone: %w", old, err)
		}
	}
	dir = filepath.Join(parent, strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", nil, fmt.Errorf("run directory %s: %w", dir, err)
	}
	// Held before the reap lock is let go: another process reaping meanwhile sees it taken.
	if err := lockRunDir(dir); err != nil {
		return "", nil, err
	}
	return dir, func() { releaseRunDir(dir); os.RemoveAll(dir) }, nil
}
