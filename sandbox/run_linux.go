package sandbox

// A run's layout: its record (written before anything it names is created), UID range, gateway
// network namespace, cgroup parent and workspaces, and their removal.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sealrun/sealrun/airgap"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

var runIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// Run is one run's sandbox layout: a cgroup parent <root>/<id> (see Placement), a gateway netns
// sealrun-<id>-gw (in the host's NetnsDir), a UID range whose base is the run's shared GID, and its workspaces. What it
// creates is recorded under the host's run directory (runs/<id>/record.json) before it is
// created, so that Reap of this host — and only of this host — finds it after a crash.
type Run struct {
	h       *Host
	ID      string
	shared  IDRange
	gateway string // the gateway netns's file (in the host's NetnsDir)
	// ns is the gateway netns, open from its creation to Destroy: GatewayNetns's path reaches it
	// through this descriptor, whatever is mounted over its directory meanwhile.
	ns *os.File
	cg cgroup.Tree

	mu   sync.Mutex
	seq  int
	live map[string]*Container
	rec  runRecord
	// evidence: the network evidence of the first container of each role (every container of
	// a role is configured alike), for the run's attestation.
	evidence map[Role]NetnsEvidence
}

// Evidence returns the network evidence the hook recorded for the first container of each role
// the run started, checked against the role's air gap before that container ran.
func (r *Run) Evidence() map[Role]NetnsEvidence {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Role]NetnsEvidence, len(r.evidence))
	for k, v := range r.evidence {
		out[k] = v
	}
	return out
}

// runRecord is what a run created, as recorded in <RunDir>/runs/<id>/record.json.
type runRecord struct {
	ID string `json:"id"`
	// Netns is the gateway namespace's path (a bare name, as earlier sealrun wrote it: under
	// LegacyNetnsDir).
	Netns      string   `json:"netns,omitempty"`
	Cgroup     string   `json:"cgroup,omitempty"`
	Shared     IDRange  `json:"shared"`
	Workspaces []string `json:"workspaces,omitempty"` // quota'd workspace mounts
	Mounts     []string `json:"mounts,omitempty"`     // other filesystems of the run's own (its socket directory)
}

func (h *Host) runRecordDir(id string) string { return filepath.Join(h.cfg.RunDir, "runs", id) }

// save writes the record atomically.
func (r *Run) save() error {
	if r.h.onRecord != nil {
		r.h.onRecord(r.rec)
	}
	b, _ := json.Marshal(r.rec)
	p := filepath.Join(r.h.runRecordDir(r.ID), "record.json")
	if err := os.WriteFile(p+".tmp", b, 0o600); err != nil {
		return infra(r.ID, "record run", err)
	}
	return infra(r.ID, "record run", os.Rename(p+".tmp", p))
}

// NewRun sets up a run's layout. A run id that is live on this machine — on this host or on
// another sealrun's (another run directory), or whose netns or cgroup exists for any reason —
// is refused with ErrRunInUse: NewRun never adopts, kills or deletes what it did not create.
// Everything it made is undone if a step fails.
func (h *Host) NewRun(ctx context.Context, id string) (_ *Run, err error) {
	if !runIDRE.MatchString(id) {
		return nil, fmt.Errorf("%w: run id %q: use 1 to 31 lowercase letters, digits and dashes", ErrBadConfig, id)
	}
	// r is not the named result: a failed step returns nil, and the undo steps below still need
	// the run they undo (before, they read the nil result and panicked, hiding the step's error).
	r := &Run{h: h, ID: id, gateway: filepath.Join(h.cfg.NetnsDir, Prefix+id+"-gw"), cg: cgroup.Tree{Path: path.Join(h.placement.Root, id)}, live: map[string]*Container{}}
	r.rec.ID = id
	dir := h.runRecordDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: run %s is live on this host (record %s); choose another id, or if its daemon died, reap it (sealrun sandbox reap)", ErrRunInUse, id, dir)
		}
		return nil, infra(id, "record run", err)
	}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
			os.RemoveAll(dir)
		}
	}()
	if r.cg.Exists() {
		return nil, fmt.Errorf("%w: run %s: cgroup %s already exists (another sealrun on this machine uses this id); choose another id", ErrRunInUse, id, r.cg.Path)
	}
	if r.shared, err = h.ranges.Allocate("run " + id); err != nil {
		return nil, infra(id, "allocate UID range", err)
	}
	r.rec.Shared = r.shared
	undo = append(undo, func() { h.ranges.Release(r.shared) })
	// The netns name is the atomic claim on the id across the machine (created O_EXCL).
	r.rec.Netns = r.gateway
	if err = r.save(); err != nil {
		return nil, err
	}
	if err = createGatewayNetns(r.gateway); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if len(nsfsMountsAt(r.gateway)) == 0 {
				// No namespace is mounted there in this mount namespace: the file of a sealrun
				// that ran in a mount namespace of its own and was killed (its namespace went
				// with it), or of one that runs in another and uses the id now.
				return nil, fmt.Errorf("%w: run %s: %s already exists, with no network namespace mounted on it here (left by a sealrun killed in a private mount namespace, or held by one running in another); choose another id, or if no sealrun on this machine uses %s, remove the file", ErrRunInUse, id, r.gateway, id)
			}
			return nil, fmt.Errorf("%w: run %s: network namespace %s already exists (another sealrun on this machine uses this id); choose another id", ErrRunInUse, id, r.gateway)
		}
		return nil, infra(id, "create gateway netns", err)
	}
	undo = append(undo, func() { deleteNetns(r.gateway) })
	if r.ns, err = os.Open(r.gateway); err != nil {
		return nil, infra(id, "open gateway netns", err)
	}
	undo = append(undo, func() { r.ns.Close() })
	r.rec.Cgroup = r.cg.Path
	if err = r.save(); err != nil {
		return nil, err
	}
	if err = r.cg.Create(h.placement.Base); err != nil {
		return nil, infra(id, "create cgroup", err)
	}
	undo = append(undo, func() { r.cg.KillAll(time.Second); r.cg.Remove() })
	return r, nil
}

// GatewayNetns is a path that opens the run's gateway network namespace until Destroy: this
// process's descriptor of it (/proc/PID/fd/N), for this process and the network hook alike. Not
// the namespace's file in the NetnsDir: a mount another program makes over that directory would
// hide it from its path mid-run.
func (r *Run) GatewayNetns() string { return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), r.ns.Fd()) }

// SharedGID is the host GID that container GID 1000 maps to in every container of the run.
func (r *Run) SharedGID() uint32 { return r.shared.Base }

// PrepareWorkspace makes dir usable as /workspace by every container of the run: group-owned
// by the run's shared GID, group-writable, setgid so that new files keep the group. With a
// quota (bytes, at least MinWorkspaceQuota) dir is a filesystem of that size of its own (see
// mountWorkspace), unmounted by Destroy; with 0 it is a plain directory (tests, probes).
func (r *Run) PrepareWorkspace(dir string, quota int64) error {
	if quota != 0 {
		if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
			return err
		}
		r.mu.Lock()
		r.rec.Workspaces = append(r.rec.Workspaces, dir)
		err := r.save()
		r.mu.Unlock()
		if err != nil {
			return err
		}
		if err := mountWorkspace(dir, quota, r.shared.Base, r.shared.Base); err != nil {
			if errors.Is(err, ErrBadConfig) {
				return err
			}
			return infra(r.ID, "workspace quota", err)
		}
	} else if err := os.MkdirAll(dir, 0o2770); err != nil {
		return err
	}
	if err := os.Chown(dir, int(r.shared.Base), int(r.shared.Base)); err != nil {
		return err
	}
	return os.Chmod(dir, 0o2770|fs.ModeSetgid)
}

func deleteGatewayLink(gateway string) {
	ns, err := netns.GetFromPath(gateway)
	if err != nil {
		return
	}
	defer ns.Close()
	if h, err := netlink.NewHandleAt(ns); err == nil {
		if l, err := h.LinkByName(airgap.GatewayLink); err == nil {
			h.LinkDel(l)
		}
		h.Close()
	}
}

// Destroy removes the whole run: its containers, every task left in its cgroup subtree, the
// cgroups, the workspace mounts (their images stay), the gateway netns, the run's UID range and
// its record.
func (r *Run) Destroy(ctx context.Context) error {
	r.mu.Lock()
	live := make([]*Container, 0, len(r.live))
	for _, c := range r.live {
		live = append(live, c)
	}
	r.mu.Unlock()
	var errs []error
	for _, c := range live {
		if err := c.Destroy(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	r.mu.Lock()
	if r.ns != nil {
		r.ns.Close()
	}
	r.mu.Unlock()
	errs = append(errs, r.h.removeRecorded(r.rec)...)
	if len(errs) > 0 {
		return infra(r.ID, "destroy run", errors.Join(errs...))
	}
	return nil
}
