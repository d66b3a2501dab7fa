package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// privateMountsEnv marks a test binary re-run by InPrivateMounts.
const privateMountsEnv = "SEALRUN_TEST_PRIVATE_MOUNTS"

// InPrivateMounts re-runs the calling test in a private mount namespace of its own (unshare(1),
// propagation private: nothing it mounts or unmounts reaches this host's mount table), in which
// none of fresh is a mount — on a machine where nothing has run `ip netns add` yet, /run/netns
// is a plain directory, whatever this host's is — and returns false; in that namespace (the
// re-run) it returns true. The re-run's output goes to this test's log. Processes the re-run
// starts (a sealrund) are in that namespace too.
func InPrivateMounts(t *testing.T, fresh ...string) bool {
	t.Helper()
	RequireRoot(t)
	if os.Getenv(privateMountsEnv) != "" {
		for _, dir := range fresh {
			for i := 0; i < 16 && unix.Unmount(dir, unix.MNT_DETACH) == nil; i++ {
			}
			if IsMountPoint(dir) {
				t.Fatalf("%s is still a mount in the private mount namespace", dir)
			}
		}
		return true
	}
	RequireTool(t, "unshare", "util-linux")
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=15m")
	cmd.Env = append(os.Environ(), privateMountsEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("the test in a private mount namespace:\n%s", out)
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("the test in a private mount namespace failed: %v", err)
	}
	return false
}

// IsMountPoint says whether dir is a mount point (its mount differs from its parent's).
func IsMountPoint(dir string) bool {
	id := func(p string) uint64 {
		var st unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &st) != nil {
			return 0
		}
		return st.Mnt_id
	}
	d := id(dir)
	return d != 0 && d != id(filepath.Dir(dir))
}

// IPRoute2FirstMount does to dir what iproute2's `ip netns add` does to /run/netns the first time
// it runs on a host: it binds the directory onto itself and makes it shared. It runs mount(8),
// another program, as on an operator's host.
func IPRoute2FirstMount(t testing.TB, dir string) {
	t.Helper()
	for _, args := range [][]string{{"--bind", dir, dir}, {"--make-shared", dir}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
}

// SmallDisk mounts a tmpfs of size bytes on a new temporary directory and returns it, unmounted
// when the test ends: a disk that fills, for the tests of what a full disk leaves behind.
func SmallDisk(t testing.TB, size int) string {
	t.Helper()
	RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount a tmpfs of %d bytes on %s: %v", size, dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}
