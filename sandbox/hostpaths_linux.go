package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Host paths. Inside a container, /proc/self/mountinfo gives every mount's root: for a bind
// mount, the path of its source inside the source's filesystem — the store's image directory,
// the run's directory, where the runner binary is installed. A container learns nothing of the
// host's layout from it, because no mount of a container is a bind of a host path:
//   - the rootfs is an overlay whose layers are named relative to the bundle ("lowerdir=
//     targets:image"), over the idmapped image (mounttargets_linux.go);
//   - a read-only directory, or a read-only file, is bound from a read-only overlay of that
//     directory (of the file's directory) made in the bundle, its layers named relative to it
//     ("lowerdir=h0:e"): its mount shows "/" (or "/FILE");
//   - a filesystem's own root shows "/" already: the quota'd workspace, and the run's socket
//     directory (Run.SocketDir), a small tmpfs, since a unix socket cannot be reached through
//     an overlay;
//   - a read-write directory that one container writes (a task script's data directory) is
//     bound from an overlay whose upper layer is that directory itself (its lower an empty
//     directory, its work directory a sibling removed with the container): what the container
//     writes lands in the directory as plain files;
//   - device nodes and CDI files are bound at their own paths, which say nothing new.
// Only a workspace without a quota (probes, tests) still shows its path: several containers
// write it at once, which one overlay upper layer cannot take; the daemon always gives a quota.

// hideDir is the bundle's directory of overlays that stand in for bind-mount sources.
const hideDir = "h"

// hideSources replaces the source of each bind mount that would show a host path with an
// overlay of it made under bundle/h, and returns the overlays' mount points (to unmount).
func hideSources(bundle string, mounts []specs.Mount) (mounted []string, err error) {
	lowers := map[string]string{} // directory -> its overlay's mount point
	defer func() {
		if err != nil {
			unmountAll(mounted)
			mounted = nil
		}
	}()
	for i := range mounts {
		m := &mounts[i]
		if m.Type != "bind" || m.Source == m.Destination || strings.HasPrefix(m.Source, "/dev/") {
			continue
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return mounted, fmt.Errorf("the source of the mount at %s: %w", m.Destination, err)
		}
		dir, file := m.Source, ""
		switch rw := !slices.Contains(m.Options, "ro"); {
		case rw && (!fi.IsDir() || m.Destination == WorkspacePath || isMountpoint(dir)):
			continue
		case rw:
			mp, err := writableOverlayOf(bundle, dir, len(mounted))
			if err != nil {
				return mounted, fmt.Errorf("the source of the mount at %s: %w", m.Destination, err)
			}
			mounted = append(mounted, mp)
			m.Source = mp
			continue
		case fi.IsDir():
		case fi.Mode().IsRegular():
			dir, file = filepath.Dir(m.Source), filepath.Base(m.Source)
		default:
			continue // a socket or device: only a filesystem of its own hides it (Run.SocketDir)
		}
		if isMountpoint(dir) {
			continue
		}
		mp, ok := lowers[dir]
		if !ok {
			if mp, err = overlayOf(bundle, dir, len(mounted)); err != nil {
				return mounted, fmt.Errorf("the source of the mount at %s: %w", m.Destination, err)
			}
			lowers[dir] = mp
			mounted = append(mounted, mp)
		}
		m.Source = mp
		if file != "" {
			m.Source = filepath.Join(mp, file)
		}
	}
	return mounted, nil
}

// overlayOf mounts a read-only overlay of dir at bundle/h/N. The overlay is made from inside
// bundle/h with relative layer names (a link hN to dir, and an empty e), which is all that its
// mount options show.
func overlayOf(bundle, dir string, n int) (string, error) {
	h := filepath.Join(bundle, hideDir)
	if err := os.MkdirAll(filepath.Join(h, "e"), 0o700); err != nil {
		return "", err
	}
	name := strconv.Itoa(n)
	if err := os.Symlink(dir, filepath.Join(h, "h"+name)); err != nil {
		return "", err
	}
	mp := filepath.Join(h, name)
	if err := os.Mkdir(mp, 0o755); err != nil {
		return "", err
	}
	if err := mountOverlayIn(h, "h"+name+":e", name); err != nil {
		os.Remove(mp)
		return "", fmt.Errorf("overlay %s so that its host path stays hidden: %w", dir, err)
	}
	return mp, nil
}

// workSuffix ends the name of a writable overlay's work directory, beside its upper layer.
const workSuffix = ".sealrun-overlay-work"

// writableOverlayOf mounts at bundle/h/N a writable overlay whose upper layer is dir (links uN
// and wN to dir and its work directory, an empty lower e), so that writes land in dir.
func writableOverlayOf(bundle, dir string, n int) (string, error) {
	h := filepath.Join(bundle, hideDir)
	if err := os.MkdirAll(filepath.Join(h, "e"), 0o700); err != nil {
		return "", err
	}
	name := strconv.Itoa(n)
	work := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+workSuffix)
	if err := os.Mkdir(work, 0o700); err != nil {
		return "", fmt.Errorf("overlay work directory: %w", err)
	}
	if err := os.Symlink(work, filepath.Join(h, "w"+name)); err != nil {
		os.Remove(work)
		return "", err
	}
	if err := os.Symlink(dir, filepath.Join(h, "u"+name)); err != nil {
		return "", err
	}
	mp := filepath.Join(h, name)
	if err := os.Mkdir(mp, 0o755); err != nil {
		return "", err
	}
	if err := mountOverlayFlags(h, "lowerdir=e,upperdir=u"+name+",workdir=w"+name, name, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		os.Remove(mp)
		return "", fmt.Errorf("overlay %s so that its host path stays hidden: %w", dir, err)
	}
	return mp, nil
}

// removeWork removes the work directories of a bundle's writable overlays, once unmounted.
func removeWork(bundle string) error {
	links, _ := filepath.Glob(filepath.Join(bundle, hideDir, "w*"))
	var errs []error
	for _, l := range links {
		if work, err := os.Readlink(l); err == nil && strings.HasSuffix(work, workSuffix) {
			if err := os.RemoveAll(work); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// mountOverlayIn mounts a read-only overlay of the lower layers (paths relative to dir) on
// target (relative to dir), from a thread whose working directory is dir.
func mountOverlayIn(dir, lower, target string) error {
	return mountOverlayFlags(dir, "lowerdir="+lower, target, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// mountOverlayFlags mounts an overlay with the options (paths relative to dir) on target
// (relative to dir), from a thread whose working directory is dir.
func mountOverlayFlags(dir, opts, target string, flags uintptr) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, with its own working directory, dies with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare the working directory: %w", err)
			return
		}
		if err := unix.Chdir(dir); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount("overlay", target, "overlay", flags, opts)
	}()
	return <-errc
}

// unmountAll detaches the mounts, last first, and removes their mount points.
func unmountAll(mps []string) error {
	var errs []error
	for i := len(mps) - 1; i >= 0; i-- {
		if err := unmountRootfs(mps[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unmountHidden detaches whatever overlays a bundle's h directory holds (a crashed process's
// bundle, whose list is lost) and removes them.
func unmountHidden(bundle string) error {
	h := filepath.Join(bundle, hideDir)
	entries, err := os.ReadDir(h)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var mps []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			mps = append(mps, filepath.Join(h, e.Name()))
		}
	}
	if err := unmountAll(mps); err != nil {
		return err
	}
	return removeWork(bundle)
}

// SocketDir returns the run's directory for unix sockets that its containers bind (the agent
// socket): a small tmpfs of its own, so that the socket's mount inside shows "/NAME" and no host
// path. It is made on the first call and unmounted by Destroy (or Reap, after a crash).
func (r *Run) SocketDir() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir := filepath.Join(r.h.runRecordDir(r.ID), "sockets")
	if slices.Contains(r.rec.Mounts, dir) {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", infra(r.ID, "socket directory", err)
	}
	r.rec.Mounts = append(r.rec.Mounts, dir)
	if err := r.save(); err != nil {
		return "", err
	}
	// Room for a few sockets, nothing else: 64 inodes, 64 KiB. Not noexec: a bind of its file
	// into a user namespace could not then drop the flag (a locked mount flag).
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64k,nr_inodes=64"); err != nil {
		return "", infra(r.ID, "socket directory", fmt.Errorf("mount a tmpfs on %s: %w", dir, err))
	}
	return dir, nil
}
