package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// shiftRootfs is shiftedRootfs; tests replace it to play a kernel that cannot idmap mounts.
var shiftRootfs = shiftedRootfs

// shiftedRootfs mounts rootfs at target as a read-only, nosuid, nodev idmapped bind mount whose
// ownership is shifted by the container's ID mappings: the image's root-owned files appear owned
// by the container's root, and every other owner keeps its meaning inside the container. The
// store's rootfs is shared by every container and never changed. The mapping is taken from a
// user namespace with exactly the container's mappings (mappingNamespace).
func shiftedRootfs(rootfs, target string, uids, gids []specs.LinuxIDMapping) error {
	userns, err := mappingNamespace(uids, gids)
	if err != nil {
		return err
	}
	defer unix.Close(userns)
	fd, err := unix.OpenTree(unix.AT_FDCWD, rootfs, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idmapped rootfs: open_tree %s: %w", rootfs, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmapped rootfs: mount_setattr on %s: %w (the kernel or filesystem cannot idmap mounts)", rootfs, err)
	}
	if err := os.Mkdir(target, 0o755); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		os.Remove(target)
		return fmt.Errorf("idmapped rootfs: move_mount to %s: %w", target, err)
	}
	return nil
}

// unmountRootfs detaches a container's rootfs mount and removes its mount point. It never
// removes anything below the mount point: that would be the image store.
func unmountRootfs(target string) error {
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove mount point %s (still mounted?): %w", target, err)
	}
	return nil
}

// A user namespace with a container's mappings is what an idmapped mount is made from; nothing
// runs in it. Making one takes a process (fork, exec, the maps written, the namespace opened):
// 1 to 2 ms of every container's start. An open descriptor keeps the namespace alive after the
// process is gone, so the namespaces of the mappings used last are kept (UID ranges are reused:
// a run's compute calls take the same range call after call) and the process is paid once.
var mappingNamespaces = struct {
	sync.Mutex
	byKey map[string]*os.File
	order []string // oldest first
}{byKey: map[string]*os.File{}}

// mappingNamespacesKept bounds the namespaces kept open.
const mappingNamespacesKept = 32

// mappingNamespace returns a descriptor of a user namespace with exactly these mappings, for the
// caller to close.
func mappingNamespace(uids, gids []specs.LinuxIDMapping) (int, error) {
	key := fmt.Sprint(uids, gids)
	mappingNamespaces.Lock()
	defer mappingNamespaces.Unlock()
	if f, ok := mappingNamespaces.byKey[key]; ok {
		return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	}
	f, err := newMappingNamespace(uids, gids)
	if err != nil {
		return -1, err
	}
	if len(mappingNamespaces.order) >= mappingNamespacesKept {
		old := mappingNamespaces.order[0]
		mappingNamespaces.order = mappingNamespaces.order[1:]
		mappingNamespaces.byKey[old].Close()
		delete(mappingNamespaces.byKey, old)
	}
	mappingNamespaces.byKey[key] = f
	mappingNamespaces.order = append(mappingNamespaces.order, key)
	return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
}

// newMappingNamespace makes a user namespace with these mappings: a short-lived process in it,
// whose namespace is opened and which is then let go (reaped off the caller's path).
func newMappingNamespace(uids, gids []specs.LinuxIDMapping) (*os.File, error) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return nil, fmt.Errorf("idmapped rootfs: %w", err)
	}
	toSys := func(m []specs.LinuxIDMapping) []syscall.SysProcIDMap {
		out := make([]syscall.SysProcIDMap, len(m))
		for i, x := range m {
			out[i] = syscall.SysProcIDMap{ContainerID: int(x.ContainerID), HostID: int(x.HostID), Size: int(x.Size)}
		}
		return out
	}
	holder := exec.Command(cat) // waits on stdin: holds the user namespace while we open it
	stdin, err := holder.StdinPipe()
	if err != nil {
		return nil, err
	}
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: toSys(uids), GidMappings: toSys(gids), Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("idmapped rootfs: user namespace for the mapping: %w", err)
	}
	defer func() { stdin.Close(); go holder.Wait() }()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("idmapped rootfs: %w", err)
	}
	return f, nil
}
