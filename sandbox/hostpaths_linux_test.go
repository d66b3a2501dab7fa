package sandbox

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// From inside a container of each role, with every kind of mount a sealed run gives it (the
// image, a quota'd workspace, the runner binary, the agent socket, a read-only directory, the
// grader's bundle), nothing in the mount table, the environment or an error names a host path:
// every mount's root is "/" or a name of the container's own (a device, the socket's file).
func TestNoHostPathsInside(t *testing.T) {
	h := testHost(t)
	ctx := context.Background()
	r, err := h.NewRun(ctx, "hostpaths")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Destroy(ctx); err != nil {
			t.Error(err)
		}
		assertNoLeaks(t, h)
	}()
	base := t.TempDir()
	os.Chmod(base, 0o711)
	ws := filepath.Join(base, "workspace")
	if err := r.PrepareWorkspace(ws, 16<<20); err != nil {
		t.Fatal(err)
	}
	sdir, err := r.SocketDir()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.SocketDir(); err != nil || again != sdir {
		t.Fatalf("a second SocketDir: %q %v; want %q", again, err, sdir)
	}
	sock := filepath.Join(sdir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(sock, 0o666)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	data := filepath.Join(base, "task-data")
	os.MkdirAll(data, 0o755)
	os.WriteFile(filepath.Join(data, "train.csv"), []byte("a,b\n"), 0o644)
	// A directory one container writes (a task script's data directory).
	rw := filepath.Join(base, "data-rw")
	os.MkdirAll(rw, 0o777)
	os.Chmod(rw, 0o777)
	os.WriteFile(filepath.Join(rw, "old"), []byte("old\n"), 0o666)
	os.WriteFile(filepath.Join(rw, "keep"), []byte("keep\n"), 0o666)
	images := localImages(t)
	// Everything a container may print that would betray the host's layout.
	secrets := []string{h.cfg.RunDir, base, images.controller, images.python, filepath.Dir(runnerBinary(t)), "/var/lib", "/tmp/"}
	show := `exec 2>&1; cat /proc/self/mountinfo; echo ---; cat /proc/self/mounts; echo ---; env; echo ---; ls /no/such/path; `
	for _, c := range []struct {
		role  Role
		image string
		cfg   ContainerConfig
		check string
	}{
		{RoleController, images.python, ContainerConfig{Workspace: ws, Runner: runnerBinary(t),
			Extra: []specs.Mount{{Destination: "/run/sealrun/agent.sock", Type: "bind", Source: sock, Options: []string{"bind", "nosuid", "nodev"}}}},
			`test -x /usr/local/bin/runner && echo runner ok; touch /workspace/w && echo workspace ok
python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("/run/sealrun/agent.sock"); print(s.recv(100).decode())'`},
		{RoleRunner, images.python, ContainerConfig{Workspace: ws, Extra: []specs.Mount{
			{Destination: "/task-data", Type: "bind", Source: data, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/usr/local/libexec/shim", Type: "bind", Source: runnerBinary(t), Options: []string{"rbind", "ro", "nosuid", "nodev"}}}},
			`test -x /usr/local/libexec/shim && echo shim ok; cat /task-data/train.csv; python3 -c 'open("/workspace/r", "w")' && echo workspace ok; touch /task-data/x || echo read-only ok`},
		{RoleGrader, images.python, ContainerConfig{Bundle: data, Extra: []specs.Mount{
			{Destination: "/task/data", Type: "bind", Source: rw, Options: []string{"rbind", "nosuid", "nodev", "noexec"}}}},
			`cat /bundle/train.csv; echo new > /task/data/new && mkdir /task/data/sub && echo deep > /task/data/sub/f && rm /task/data/old && mv /task/data/keep /task/data/kept && echo written ok`},
	} {
		t.Run(string(c.role), func(t *testing.T) {
			var out bytes.Buffer
			cfg := c.cfg
			cfg.Role, cfg.Rootfs, cfg.Stdout, cfg.Stderr = c.role, c.image, &out, &out
			cfg.Args = []string{"sh", "-c", show + c.check}
			ct, err := r.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			code, err := ct.Wait(ctx)
			ct.Destroy(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := out.String()
			t.Logf("exit %d:\n%s", code, got)
			for _, s := range secrets {
				if strings.Contains(got, s) {
					t.Errorf("inside, %q shows", s)
				}
			}
			mountinfo, _, _ := strings.Cut(got, "---")
			for _, line := range strings.Split(strings.TrimSpace(mountinfo), "\n") {
				f := strings.Fields(line)
				if len(f) < 10 {
					t.Errorf("mountinfo line %q", line)
					continue
				}
				fstype := f[len(f)-3]
				if f[3] != "/" && strings.Count(f[3], "/") > 1 && fstype != "proc" && fstype != "sysfs" {
					t.Errorf("a mount's root is a host path: %s", line)
				}
			}
			for _, want := range map[Role][]string{
				RoleController: {"runner ok", "hello from the host", "workspace ok"},
				RoleRunner:     {"shim ok", "a,b", "workspace ok", "read-only ok"},
				RoleGrader:     {"a,b", "written ok"},
			}[c.role] {
				if !strings.Contains(got, want) {
					t.Errorf("no %q inside", want)
				}
			}
		})
	}
	// What the grader wrote landed in the directory as plain files, and nothing else is left
	// there or beside it (no whiteout, no overlay work directory).
	var got []string
	filepath.Walk(rw, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != rw {
			rel, _ := filepath.Rel(rw, p)
			kind := "other"
			switch {
			case fi.IsDir():
				kind = "dir"
			case fi.Mode().IsRegular():
				kind = "file"
			}
			got = append(got, rel+" "+kind)
		}
		return nil
	})
	if want := []string{"kept file", "new file", "sub dir", "sub/f file"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the written directory holds %q; want %q", got, want)
	}
	if left, _ := filepath.Glob(filepath.Join(base, ".*")); len(left) > 0 {
		t.Errorf("left beside it: %v", left)
	}
}
