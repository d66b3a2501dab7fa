package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// userImage is a rootfs as images sealrun did not build look: busybox, and none of sealrun's mount
// targets — /usr/local/bin is a symlink into a directory that does not exist, /workspace is a file,
// there is no /run; /opt, where the symlink leads, has a mode of its own that the layer must keep.
func userImage(t *testing.T) string {
	t.Helper()
	bb, err := os.ReadFile(filepath.Join(localImages(t).controller, "bin", "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{"bin", "usr", "opt", "etc"} { // no /proc, /sys, /dev or /tmp either
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755)
	for _, tool := range []string{"sh", "ls", "cat", "test", "grep", "echo", "stat"} {
		os.Symlink("busybox", filepath.Join(root, "bin", tool))
	}
	os.Chmod(filepath.Join(root, "opt"), 0o711)
	os.Symlink("../../opt/tools", filepath.Join(root, "usr", "local"))
	os.WriteFile(filepath.Join(root, "workspace"), []byte("not a directory\n"), 0o644)
	os.Chmod(filepath.Dir(root), 0o755)
	return root
}

// An image without sealrun's mount targets runs unchanged: the runner client, the agent socket and
// /workspace appear through a layer of their own (the symlinked /usr/local/bin followed, the file
// at /workspace covered), the image's /opt keeps its mode, the image's files are untouched, and
// the container's mount table names no host path for its root.
func TestImageWithoutMountTargets(t *testing.T) {
	h := testHost(t)
	root := userImage(t)
	before := treeOf(t, root)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "userimg")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy(ctx)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	os.WriteFile(sock, nil, 0o644)
	var out, errb bytes.Buffer
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: root, Workspace: workspace(t, r), Runner: runnerBinary(t),
		Extra:  []specs.Mount{{Destination: "/run/sealrun/agent.sock", Type: "bind", Source: sock, Options: []string{"bind", "nosuid", "nodev"}}},
		Stdout: &out, Stderr: &errb,
		Args: []string{"sh", "-c", `exec 2>&1; test -x /usr/local/bin/runner && echo runner ok; test -f /opt/tools/bin/runner && echo via the symlink
test -d /workspace && touch /workspace/x && echo workspace ok; test -e /run/sealrun/agent.sock && echo socket ok
stat -c '%a %u' /opt; grep ' / / ' /proc/self/mountinfo`}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s%s", code, err, out.String(), errb.String())
	}
	c.Destroy(ctx)
	got := out.String()
	wants := []string{"runner ok\n", "via the symlink\n", "workspace ok\n", "socket ok\n", "711 0\n", "lowerdir=targets:image"}
	if h.RuntimeFor(RoleController).Kind == KindRunsc {
		wants = wants[:5] // gVisor's mountinfo shows its own mounts, not the host's overlay
	}
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("inside: no %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, h.cfg.RunDir) || strings.Contains(got, root) {
		t.Errorf("the root's mount names a host path:\n%s", got)
	}
	if after := treeOf(t, root); after != before {
		t.Errorf("the image's rootfs changed: %s -> %s", before, after)
	}
	// An image that has every target needs nothing in the layer.
	ts, err := resolveMountTargets(localImages(t).controller, []specs.Mount{{Destination: WorkspacePath, Type: "bind", Source: t.TempDir()}}, false)
	if err != nil || layerNeeded(ts) {
		t.Errorf("sealrun's own image needs a layer: %+v %v", ts, err)
	}
}

// Where targets resolve: through absolute and relative symlinks, never above the rootfs, and
// what is in the way.
func TestResolveMountTargets(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "opt", "real"), 0o755)
	os.Symlink("/opt/real", filepath.Join(root, "abs"))
	os.Symlink("../../../../..", filepath.Join(root, "opt", "up"))
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	os.Symlink("loop2", filepath.Join(root, "loop1"))
	os.Symlink("loop1", filepath.Join(root, "loop2"))
	src := t.TempDir()
	for _, tc := range []struct {
		dest, resolved string
		missing        bool
	}{
		{"/abs/x", "/opt/real/x", true},
		{"/opt/up/etc/y", "/etc/y", true},
		{"/file/z", "/file/z", true},
		{"/opt/real", "/opt/real", false},
		{"/file", "/file", true},
	} {
		ts, err := resolveMountTargets(root, []specs.Mount{{Destination: tc.dest, Type: "bind", Source: src}}, false)
		if err != nil || len(ts) != 1 || ts[0].resolved != tc.resolved || ts[0].missing != tc.missing {
			t.Errorf("%s: %+v %v; want %s missing=%v", tc.dest, ts, err, tc.resolved, tc.missing)
		}
	}
	if _, err := resolveMountTargets(root, []specs.Mount{{Destination: "/loop1/x", Type: "bind", Source: src}}, false); err == nil || !strings.Contains(err.Error(), "too many symlinks") {
		t.Errorf("a symlink loop: %v", err)
	}
	if _, err := resolveMountTargets(root, []specs.Mount{{Destination: "/x", Type: "bind", Source: "/no/such/source"}}, false); err == nil {
		t.Error("a missing mount source was accepted")
	}
}

// treeOf describes every entry under root: path, mode, owner, size, link target, content.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d", p, fi.Mode(), st.Uid, st.Gid)
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		} else if target, err := os.Readlink(p); err == nil {
			b.WriteString(" -> " + target)
		}
		b.WriteString("\n")
		return nil
	})
	return b.String()
}

// gVisor's gofer makes bind mounts on the host before gVisor's kernel mounts /tmp and /dev: a
// bind target below them needs its mount point in the rootfs (the layer) under runsc, and
// nowhere else; their tmpfs and other non-bind mounts never do.
func TestMountTargetsBelowTmpfsForHostSideBinds(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tmp"), 0o1777)
	src := filepath.Join(t.TempDir(), "runner")
	os.WriteFile(src, nil, 0o755)
	mounts := []specs.Mount{
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs"},
		{Destination: "/tmp/.sealrun/runner-exec", Type: "bind", Source: src, Options: []string{"rbind", "ro"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm"},
	}
	ts, err := resolveMountTargets(root, mounts, false)
	if err != nil || len(ts) != 1 || ts[0].dest != "/tmp" {
		t.Errorf("runc, crun: %+v %v; want only /tmp", ts, err)
	}
	ts, err = resolveMountTargets(root, mounts, true)
	if err != nil || len(ts) != 2 || ts[1].resolved != "/tmp/.sealrun/runner-exec" || !ts[1].missing || ts[1].dir {
		t.Errorf("runsc: %+v %v; want /tmp and the missing file target below it", ts, err)
	}
}

// Any image's /tmp is the scaffold's to write, whatever the image has there: none (a target
// made for it), a 0755 root directory, or the usual 1777 one. It is a 1777 tmpfs in every case,
// as SCAFFOLD.md promises (Claude Code makes /tmp/claude-<uid> at start).
func TestTmpIsWritableWhateverTheImage(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		tmp  func(root string)
	}{
		{"no /tmp", func(string) {}},
		{"a 0755 /tmp", func(root string) {
			os.Mkdir(filepath.Join(root, "tmp"), 0o755)
			os.Chmod(filepath.Join(root, "tmp"), 0o755)
		}},
		{"a 0700 /tmp", func(root string) {
			os.Mkdir(filepath.Join(root, "tmp"), 0o700)
			os.Chmod(filepath.Join(root, "tmp"), 0o700)
		}},
		{"a 1777 /tmp", func(root string) {
			os.Mkdir(filepath.Join(root, "tmp"), 0o755)
			os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := userImage(t)
			tc.tmp(root)
			r, err := h.NewRun(ctx, "tmpmode")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Destroy(ctx)
			var out bytes.Buffer
			c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: root, Workspace: workspace(t, r), Runner: runnerBinary(t), Stdout: &out, Stderr: &out,
				Args: []string{"sh", "-c", `stat -c 'mode %a' /tmp; mkdir /tmp/claude-$(id -u) && echo > /tmp/claude-$(id -u)/x && echo tmp writable`}})
			if err != nil {
				t.Fatal(err)
			}
			code, err := c.Wait(ctx)
			c.Destroy(ctx)
			if code != 0 || err != nil || !strings.Contains(out.String(), "mode 1777") || !strings.Contains(out.String(), "tmp writable") {
				t.Errorf("exit %d %v:\n%s", code, err, out.String())
			}
		})
	}
}
