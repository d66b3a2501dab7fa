package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// MinWorkspaceQuota is the smallest workspace filesystem sealrun makes (ext4 needs a few MiB
// for its own metadata).
const MinWorkspaceQuota = 8 << 20

// The disk quota of /workspace is a filesystem of its own: a sparse ext4 image next to the
// workspace directory (<dir>.img), attached to a loop device and mounted on the directory. It
// works on any Linux host with loop devices and e2fsprogs, whatever filesystem the state
// directory is on (XFS/ext4 project quotas need a filesystem mounted with prjquota, which a
// GPU server's root rarely is). Writes past the size fail with ENOSPC inside the container and
// touch nothing of the host's. The image is sparse: it costs what the agent writes.
//
// mountWorkspace makes the image, formats it (no journal: the workspace of a crashed run is
// not recovered, the run is invalid), mounts it nosuid,nodev on dir and gives its root to the
// run's shared GID.
func mountWorkspace(dir string, quota int64, uid, gid uint32) (err error) {
	if quota < MinWorkspaceQuota {
		return fmt.Errorf("%w: workspace quota %d bytes; give at least %d (8 MiB), or 0 for no quota", ErrBadConfig, quota, MinWorkspaceQuota)
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		return fmt.Errorf("workspace quota needs mkfs.ext4: %w; install e2fsprogs (make deps)", err)
	}
	img := dir + ".img"
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("workspace image %s: %w", img, err)
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(img)
		}
	}()
	if err := f.Truncate(quota); err != nil {
		return fmt.Errorf("workspace image %s: %w", img, err)
	}
	out, err := exec.Command(mkfs, "-q", "-F", "-m", "0", "-O", "^has_journal", "-L", "sealrun-ws",
		"-E", fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,nodiscard", uid, gid), img).CombinedOutput()
	if err != nil {
		return fmt.Errorf("format workspace image %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	loop, err := attachLoop(f)
	if err != nil {
		return fmt.Errorf("workspace image %s: %w", img, err)
	}
	defer loop.Close() // autoclear: the device detaches when the filesystem is unmounted
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(loop.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		unix.IoctlSetInt(int(loop.Fd()), unix.LOOP_CLR_FD, 0)
		return fmt.Errorf("mount workspace image %s on %s: %w", img, dir, err)
	}
	os.Remove(filepath.Join(dir, "lost+found")) // host-owned clutter in the agent's home
	return nil
}

// attachLoop binds f to a free loop device (autoclear) and returns the device, open.
func attachLoop(f *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("loop devices: %w (load the loop module: modprobe loop)", err)
	}
	defer ctl.Close()
	for try := 0; try < 20; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open /dev/loop%d: %w", n, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], "sealrun-workspace")
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if errors.Is(err, unix.EBUSY) { // another process took it first
			continue
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) { // kernels before 5.8
			if dev, err = legacyAttach(n, f); err == nil {
				return dev, nil
			}
			if errors.Is(err, unix.EBUSY) {
				continue
			}
		}
		return nil, fmt.Errorf("attach /dev/loop%d: %w", n, err)
	}
	return nil, errors.New("attach a loop device: every free device was taken by others 20 times in a row")
}

func legacyAttach(n int, f *os.File) (*os.File, error) {
	dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(f.Fd())); err != nil {
		dev.Close()
		return nil, err
	}
	if err := unix.IoctlLoopSetStatus64(int(dev.Fd()), &unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}); err != nil {
		unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
		dev.Close()
		return nil, err
	}
	return dev, nil
}

// unmountWorkspace unmounts a quota'd workspace (retrying while the last container's mounts
// drain, then detaching lazily). The image file stays: it holds the workspace as the run left it.
func unmountWorkspace(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(dir, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if derr := unix.Unmount(dir, unix.MNT_DETACH); derr == nil || errors.Is(derr, unix.EINVAL) {
		return nil
	}
	return fmt.Errorf("unmount workspace %s: %w", dir, err)
}

// isMountpoint reports whether dir is the root of a mount.
func isMountpoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// DeviceOf is the device number ("major:minor") of the filesystem dir is on: for a workspace
// with a quota, its own loop device, which the run's I/O caps apply to.
func DeviceOf(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", fmt.Errorf("device of %s: %w", dir, err)
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}
