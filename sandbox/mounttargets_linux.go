package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Mount targets. Every bind mount of a container needs its target in the rootfs, and the rootfs
// is the image's, never written (it is the store's, shared by every container, and its digest is
// what the track pins). An image sealrun did not build usually lacks some targets — the runner
// client, the agent socket, /workspace, /bundle, a GPU driver's libraries — or has a symlink or a
// file where a target's directory should be. For such an image the container's rootfs is a
// read-only overlay of two layers: on top, a layer sealrun makes for the container holding only
// the missing targets (and the directories down to them, with the image's own modes and owners
// where the image has them); below, the image's idmapped rootfs. Nothing of the image changes.
// An image that has every target gets an empty layer: the overlay is made all the same, so that
// the rootfs's mount names no host path (hostpaths_linux.go).

// mountTarget is a mount's target as resolved inside the image (symlinks followed, clamped to
// the rootfs as the runtime resolves them), and what it must be.
type mountTarget struct {
	dest     string // the spec's destination
	resolved string // the path inside the rootfs after symlinks, "/"-rooted
	dir      bool   // the mount's source is a directory
	link     string // not a mount: a symlink to make there, pointing at link
	missing  bool   // the image lacks it, or has another kind of file there
	replaces string // what the image has in the way ("a file", "a symlink"), if anything
	// mode is the mode a tmpfs mount's directory must have (its mode= option): runc gives the
	// tmpfs the mode of the directory it mounts it on, whatever the option says, so the layer
	// makes the directory with this mode where the image's has another.
	mode fs.FileMode
	// modeOnly: the image has the directory, in another mode than the tmpfs's: the layer fixes
	// the mode where it can be made, and the container still starts where it cannot (an
	// unshifted rootfs), with the image's mode.
	modeOnly bool
}

// addSymlinks adds symlinks (container path -> target) the layer makes. A path the image already
// has keeps the image's entry when it is the same link, else the layer's link hides it.
func addSymlinks(ts []mountTarget, rootfs string, links map[string]string) ([]mountTarget, error) {
	paths := make([]string, 0, len(links))
	for p := range links {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if !path.IsAbs(p) || links[p] == "" {
			return nil, fmt.Errorf("symlink %q -> %q: give an absolute path and a target", p, links[p])
		}
		dir, rest, err := resolveIn(rootfs, path.Dir(p))
		if err != nil {
			return nil, fmt.Errorf("resolve the symlink %s in the image: %w", p, err)
		}
		t := mountTarget{dest: p, resolved: path.Join(append(append([]string{dir}, rest...), path.Base(p))...), link: links[p], missing: true}
		if len(rest) == 0 {
			if old, err := os.Readlink(filepath.Join(rootfs, t.resolved)); err == nil && old == t.link {
				t.missing = false
			}
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// layerNeeded reports whether any bind mount's target is missing from the image.
func layerNeeded(ts []mountTarget) bool {
	for _, t := range ts {
		if t.missing && !t.modeOnly {
			return true
		}
	}
	return false
}

// resolveMountTargets resolves the targets of the spec's mounts inside rootfs: every mount needs
// its mount point (a FROM-scratch image has no /proc, /sys, /dev or /tmp either). Targets below
// /dev and /tmp are on the container's own tmpfs, and those below /proc and /sys in the kernel's
// own filesystems: they need nothing from the image — except, with hostSideBinds (gVisor, whose
// gofer makes bind mounts in the rootfs on the host before its kernel mounts the tmpfs), a bind
// mount's target below /dev or /tmp. A bind mount's target is a directory or a
// file as its source is; any other mount's a directory.
func resolveMountTargets(rootfs string, mounts []specs.Mount, hostSideBinds bool) ([]mountTarget, error) {
	var out []mountTarget
	for _, m := range mounts {
		d := path.Clean(m.Destination)
		if d == "/" || strings.HasPrefix(d, "/proc/") || strings.HasPrefix(d, "/sys/") {
			continue
		}
		if (strings.HasPrefix(d, "/dev/") || strings.HasPrefix(d, "/tmp/")) && !(hostSideBinds && isBind(m)) {
			continue
		}
		t := mountTarget{dest: m.Destination, dir: true}
		if isBind(m) {
			st, err := os.Stat(m.Source)
			if err != nil {
				return nil, fmt.Errorf("the source of the mount at %s: %w", m.Destination, err)
			}
			t.dir = st.IsDir()
		}
		if m.Type == "tmpfs" {
			t.mode = tmpfsMode(m.Options)
		}
		resolved, rest, err := resolveIn(rootfs, m.Destination)
		if err != nil {
			return nil, fmt.Errorf("resolve the mount target %s in the image: %w", m.Destination, err)
		}
		t.resolved = path.Join(append([]string{resolved}, rest...)...)
		switch {
		case len(rest) > 0:
			t.missing = true
		default:
			fi, err := os.Lstat(filepath.Join(rootfs, resolved))
			if err != nil {
				return nil, fmt.Errorf("the mount target %s: %w", m.Destination, err)
			}
			switch {
			case fi.IsDir() != t.dir:
				t.missing = true
				t.replaces = kindOf(fi.Mode())
			case t.mode != 0 && fi.Mode()&modeBits != t.mode:
				t.missing, t.modeOnly = true, true
				t.replaces = fmt.Sprintf("a directory of mode %s", fi.Mode()&modeBits)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// modeBits are the bits of a directory's mode a tmpfs takes from it.
const modeBits = fs.ModePerm | fs.ModeSticky | fs.ModeSetuid | fs.ModeSetgid

// tmpfsMode is the mode a tmpfs mount's mode= option asks for (0 when it asks none).
func tmpfsMode(opts []string) fs.FileMode {
	for _, o := range opts {
		v, ok := strings.CutPrefix(o, "mode=")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			return 0
		}
		m := fs.FileMode(n) & fs.ModePerm
		for bit, flag := range map[uint64]fs.FileMode{0o1000: fs.ModeSticky, 0o2000: fs.ModeSetgid, 0o4000: fs.ModeSetuid} {
			if n&bit != 0 {
				m |= flag
			}
		}
		return m
	}
	return 0
}

// isBind reports whether the runtime treats m as a bind mount: its type, or (as CDI specs write
// them, with no type) its options say so.
func isBind(m specs.Mount) bool {
	return m.Type == "bind" || slices.Contains(m.Options, "bind") || slices.Contains(m.Options, "rbind")
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsRegular():
		return "a file"
	}
	return "a special file"
}

// resolveIn follows p inside root the way the runtime does (securejoin): each component that is a
// symlink is replaced by its target, absolute targets taken from root, ".." never above it. It
// returns the longest existing resolved prefix and the components below it that do not exist
// (or are in the way: a non-directory with more components to go).
func resolveIn(root, p string) (string, []string, error) {
	todo := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if errors.Is(err, fs.ErrNotExist) {
			return cur, append([]string{c}, todo...), nil
		}
		if err != nil {
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > 40 {
				return "", nil, fmt.Errorf("too many symlinks at %s", next)
			}
			target, err := os.Readlink(filepath.Join(root, next))
			if err != nil {
				return "", nil, err
			}
			if strings.HasPrefix(target, "/") {
				cur = "/"
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if !fi.IsDir() && len(todo) > 0 {
			return cur, append([]string{c}, todo...), nil // in the way: the layer puts a directory here
		}
		cur = next
	}
	return cur, nil, nil
}

// idShift maps an owner inside the container to the host, by the container's mappings.
func idShift(id uint32, maps []specs.LinuxIDMapping) int {
	for _, m := range maps {
		if id >= m.ContainerID && id < m.ContainerID+m.Size {
			return int(m.HostID + id - m.ContainerID)
		}
	}
	return int(maps[0].HostID) // an id the mapping lacks reads as nobody: give it to container root
}

// makeTargetLayer writes, under layer, every missing target of ts and the directories down to
// it: a directory the image has gets the image's mode and owner (shifted like the idmapped
// rootfs), a new one mode 0755 owned by the container's root, a target an empty file or directory.
func makeTargetLayer(layer, rootfs string, ts []mountTarget, uids, gids []specs.LinuxIDMapping) error {
	// The layer's root is the overlay's root directory: the image's, shifted.
	fi, err := os.Stat(rootfs)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Chmod(layer, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Lchown(layer, idShift(st.Uid, uids), idShift(st.Gid, gids)); err != nil {
		return err
	}
	tl := &targetLayer{layer: layer, rootfs: rootfs, uids: uids, gids: gids, made: map[string]bool{}}
	sort.Slice(ts, func(i, j int) bool { return ts[i].resolved < ts[j].resolved })
	for _, t := range ts {
		if !t.missing {
			continue
		}
		if err := tl.mkdirs(path.Dir(t.resolved)); err != nil {
			return fmt.Errorf("mount target %s: %w", t.dest, err)
		}
		if err := tl.target(t); err != nil {
			return err
		}
	}
	return nil
}

// targetLayer is a mount-target layer being written.
type targetLayer struct {
	layer, rootfs string
	uids, gids    []specs.LinuxIDMapping
	made          map[string]bool
}

// mkdirs makes the directory p of the layer and those down to it, each with the image's mode and
// owner where the image has it, else 0755 owned by the container's root.
func (tl *targetLayer) mkdirs(p string) error {
	if p == "/" || tl.made[p] {
		return nil
	}
	if err := tl.mkdirs(path.Dir(p)); err != nil {
		return err
	}
	mode, uid, gid := os.FileMode(0o755), idShift(0, tl.uids), idShift(0, tl.gids)
	if fi, err := os.Lstat(filepath.Join(tl.rootfs, p)); err == nil && fi.IsDir() {
		st := fi.Sys().(*syscall.Stat_t)
		mode, uid, gid = fi.Mode().Perm(), idShift(st.Uid, tl.uids), idShift(st.Gid, tl.gids)
	}
	host := filepath.Join(tl.layer, p)
	if err := os.Mkdir(host, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	tl.made[p] = true
	if err := os.Chmod(host, mode); err != nil {
		return err
	}
	return os.Lchown(host, uid, gid)
}

// target makes one missing target (its directory made): a symlink, a directory or an empty file,
// owned by the container's root.
func (tl *targetLayer) target(t mountTarget) error {
	host := filepath.Join(tl.layer, t.resolved)
	if t.link != "" {
		if err := os.Symlink(t.link, host); err != nil {
			return fmt.Errorf("symlink %s: %w", t.dest, err)
		}
		return os.Lchown(host, idShift(0, tl.uids), idShift(0, tl.gids))
	}
	if t.dir {
		if err := tl.mkdirs(t.resolved); err != nil {
			return fmt.Errorf("mount target %s: %w", t.dest, err)
		}
		if t.mode != 0 { // a tmpfs's directory: its mode, owned by the container's root
			if err := os.Chmod(host, t.mode); err != nil {
				return fmt.Errorf("mount target %s: %w", t.dest, err)
			}
			return os.Lchown(host, idShift(0, tl.uids), idShift(0, tl.gids))
		}
		return nil
	}
	f, err := os.OpenFile(host, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("mount target %s: %w", t.dest, err)
	}
	f.Close()
	return os.Lchown(host, idShift(0, tl.uids), idShift(0, tl.gids))
}

// mountTargetOverlay mounts at target a read-only overlay of layer over image. The layers are
// given to the kernel relative to their directory, dir, from a thread whose working directory is
// dir alone: the mount's options in /proc/self/mountinfo then read "lowerdir=targets:image",
// naming no host path.
func mountTargetOverlay(dir, layer, image, target string) error {
	if err := mountOverlayIn(dir, fmt.Sprintf("%s:%s", filepath.Base(layer), filepath.Base(image)), filepath.Base(target)); err != nil {
		return fmt.Errorf("overlay the mount targets on the image (overlayfs over an idmapped mount needs Linux 5.19): %w", err)
	}
	return nil
}

// describeTargets says what the layer adds, for errors and logs.
func describeTargets(ts []mountTarget) string {
	var parts []string
	for _, t := range ts {
		if !t.missing {
			continue
		}
		s := t.dest
		if t.resolved != t.dest {
			s += " (at " + t.resolved + ")"
		}
		if t.replaces != "" {
			s += " over " + t.replaces
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
