package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
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
// short-lived process in a user namespace with exactly the container's mappings.
func shiftedRootfs(rootfs, target string, uids, gids []specs.LinuxIDMapping) error {
	cat, err := exec.LookPath("cat")
	if err != nil {
		return fmt.Errorf("idmapped rootfs: %w", err)
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
		return err
	}
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: toSys(uids), GidMappings: toSys(gids), Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return fmt.Errorf("idmapped rootfs: user namespace for the mapping: %w", err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	userns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid))
	if err != nil {
		return fmt.Errorf("idmapped rootfs: %w", err)
	}
	defer userns.Close()
	fd, err := unix.OpenTree(unix.AT_FDCWD, rootfs, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idmapped rootfs: open_tree %s: %w", rootfs, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns.Fd())}
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
