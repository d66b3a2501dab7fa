package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/testenv"
)

// inPrivateMounts re-runs the calling test in a private mount namespace of its own in which
// /run/netns and DefaultNetnsDir have never been mounts (testenv.InPrivateMounts).
func inPrivateMounts(t *testing.T) bool {
	t.Helper()
	return testenv.InPrivateMounts(t, LegacyNetnsDir, DefaultNetnsDir)
}

func iproute2FirstMount(t *testing.T, dir string) { t.Helper(); testenv.IPRoute2FirstMount(t, dir) }

// A sealed run's gateway namespace is never stranded by what other programs mount: with runs live
// (each a controller on its gateway's veth, a listener in its gateway namespace), iproute2's
// own `ip netns add` mounts /run/netns for the first time on this "fresh" machine, and then
// something does the same to sealrun's own directory, hiding every namespace mounted there. The
// runs still reach their gateways; then each ends, and teardown leaves nothing: no mount, no file,
// no veth, no record. Before sealrun kept its own directory, and before removeHidden, teardown
// answered "device or resource busy" (the fresh CI of issue 53).
func TestNetnsSurvivesMountsOverTheirDirectory(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	type live struct {
		r *Run
		l net.Listener
		c *Container
	}
	var runs []live
	for i := 0; i < 3; i++ {
		// Ids of this process's own: a run of this test that was killed leaves, on the host, the
		// files its mount namespace's namespaces were mounted on (they went with it).
		r, err := h.NewRun(ctx, fmt.Sprintf("strand%d-%d", i, os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		l, err := ListenGateway(ctx, r.GatewayNetns(), 8080)
		if err != nil {
			r.Destroy(ctx)
			t.Fatal(err)
		}
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				conn.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhello from the gateway\n"))
				conn.Close()
			}
		}()
		c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
		if err != nil {
			l.Close()
			r.Destroy(ctx)
			t.Fatal(err)
		}
		runs = append(runs, live{r, l, c})
	}
	defer func() {
		for _, x := range runs {
			x.l.Close()
			x.r.Destroy(ctx)
		}
	}()

	// iproute2 itself, for the first time on this machine.
	probe := fmt.Sprintf("sealrun-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", probe).Run()
	if over, _ := visibleMount(LegacyNetnsDir); over != LegacyNetnsDir {
		t.Fatalf("ip netns add did not make %s a mount of its own (%q): the test did not reproduce a fresh machine", LegacyNetnsDir, over)
	}
	// And the same done to sealrun's own directory.
	iproute2FirstMount(t, h.cfg.NetnsDir)
	defer unix.Unmount(h.cfg.NetnsDir, unix.MNT_DETACH)
	var hidden []string
	for _, x := range runs {
		hidden = append(hidden, x.r.gateway)
	}
	// (Other packages' tests, in the host's mount namespace, have runs in the same directory: a
	// namespace of theirs mounted before this namespace was made is hidden in this one too.)
	if got := ours(StrandedNetns(h.cfg.NetnsDir), hidden); !sameSet(got, hidden) {
		t.Fatalf("StrandedNetns = %v; want the three runs' namespaces %v hidden under the new mount", got, hidden)
	}

	// The runs go on: a new controller of each still gets its veth and reaches its gateway.
	for _, x := range runs {
		var out bytes.Buffer
		c, err := x.r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, x.r), Stdout: &out, Stderr: &out,
			Args: []string{"sh", "-c", "echo | nc -w 3 10.88.0.1 8080"}})
		if err != nil {
			t.Errorf("run %s: a controller after the mount: %v", x.r.ID, err)
			continue
		}
		if code, err := c.Wait(ctx); code != 0 || err != nil || !strings.Contains(out.String(), "hello from the gateway") {
			t.Errorf("run %s: controller to gateway after the mount: exit %d %v %q", x.r.ID, code, err, out.String())
		}
		c.Destroy(ctx)
	}

	// Each ends; nothing is left, in this mount namespace or on the file system under the mounts.
	for _, x := range runs {
		x.l.Close()
		if err := x.r.Destroy(ctx); err != nil {
			t.Errorf("destroy run %s: %v", x.r.ID, err)
		}
	}
	runs = nil
	if got := ours(StrandedNetns(h.cfg.NetnsDir), hidden); len(got) > 0 {
		t.Errorf("stranded after teardown: %v", got)
	}
	for _, p := range hidden {
		if m := nsfsMountsAt(p); len(m) > 0 {
			t.Errorf("%s: %d namespace mounts left", p, len(m))
		}
	}
	if err := unix.Unmount(h.cfg.NetnsDir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	for _, p := range hidden {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s: the file is left under the mount", p)
		}
	}
}

// The same across a restart: sealrun dies with a run live, something mounts over its namespaces'
// directory, and the next sealrun's Reap removes the hidden namespace and says so.
func TestReapRemovesNetnsHiddenByAMount(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	h := testHost(t)
	imgs := localImages(t) // before the run: a skip would leave it
	ctx := context.Background()
	r, err := h.NewRun(ctx, fmt.Sprintf("strandreap-%d", os.Getpid())) // (the ids above say why)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Start(ctx, ContainerConfig{Role: RoleController, Rootfs: imgs.controller, Workspace: workspace(t, r), Args: []string{"sleep", "600"}})
	if err != nil {
		r.Destroy(ctx)
		t.Fatal(err)
	}
	// The daemon dies here; another program mounts over the directory; a new daemon reaps.
	iproute2FirstMount(t, h.cfg.NetnsDir)
	defer unix.Unmount(h.cfg.NetnsDir, unix.MNT_DETACH)
	if got := StrandedNetns(h.cfg.NetnsDir); !slices.Contains(got, r.gateway) {
		t.Fatalf("StrandedNetns = %v; want %s", got, r.gateway)
	}
	var doctor string
	for _, ch := range Doctor(ctx, HostConfig{NetnsDir: h.cfg.NetnsDir}, t.TempDir()) {
		if ch.Name == "leftovers" {
			doctor = ch.Status + ": " + ch.Detail
		}
	}
	if !strings.Contains(doctor, "hidden under a later mount") || !strings.Contains(doctor, r.gateway) {
		t.Errorf("sealrun doctor's leftovers = %q; want the hidden namespace named", doctor)
	}
	reaped, err := h.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reaped.Stranded, []string{r.gateway}) || len(reaped.Runs) != 1 {
		t.Errorf("reaped %+v; want the run, and its namespace named as stranded", reaped)
	}
	<-c.Done()
	r.ns.Close()
	if got := ours(StrandedNetns(h.cfg.NetnsDir), []string{r.gateway}); len(got) > 0 {
		t.Errorf("stranded after the reap: %v", got)
	}
	unix.Unmount(h.cfg.NetnsDir, unix.MNT_DETACH)
	if _, err := os.Lstat(r.gateway); err == nil {
		t.Errorf("%s: the file is left under the mount", r.gateway)
	}
}

// A run record written by an earlier sealrun names its namespace without a directory: it is one in
// iproute2's /run/netns, and Reap still removes it there.
func TestReapRemovesLegacyNetns(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	h := testHost(t)
	name := fmt.Sprintf("%slegacy%d-gw", Prefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	path := filepath.Join(LegacyNetnsDir, name)
	dir := h.runRecordDir("legacy")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "record.json"), []byte(`{"id":"legacy","netns":"`+name+`","shared":{}}`), 0o600)
	reaped, err := h.Reap(context.Background())
	if err != nil || !slices.Equal(reaped.Runs, []string{"legacy"}) {
		t.Errorf("reaped %+v, %v; want the legacy run", reaped, err)
	}
	if _, err := os.Lstat(path); err == nil || len(nsfsMountsAt(path)) > 0 {
		exec.Command("ip", "netns", "del", name).Run()
		t.Errorf("%s is left", path)
	}
}

// ours is the paths of got that are in mine.
func ours(got, mine []string) []string {
	var out []string
	for _, p := range got {
		if slices.Contains(mine, p) {
			out = append(out, p)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// deleteNetns removes a namespace however it is hidden: under a bind of its directory onto itself
// (iproute2's first mount), under two of them, under a tmpfs mounted over the directory (the path
// then names no file at all), and under a bind of the directory's parent; and it removes a
// namespace that nothing hides, and one already gone, without error.
func TestDeleteNetnsHiddenByMounts(t *testing.T) {
	if !inPrivateMounts(t) {
		return
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "netns")
	for _, tc := range []struct {
		name  string
		cover func() // mounts over dir (or its parent) with the namespace live
	}{
		{"nothing over it", func() {}},
		{"a bind of its directory onto itself", func() { iproute2FirstMount(t, dir) }},
		{"two binds", func() { iproute2FirstMount(t, dir); iproute2FirstMount(t, dir) }},
		{"a tmpfs over its directory", func() {
			if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
		}},
		{"a bind of the directory above", func() { iproute2FirstMount(t, parent) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, Prefix+"hidden-gw")
			if err := createGatewayNetns(p); err != nil {
				t.Fatal(err)
			}
			tc.cover()
			if err := deleteNetns(p); err != nil {
				t.Errorf("deleteNetns: %v", err)
			}
			if m := nsfsMountsAt(p); len(m) > 0 {
				t.Errorf("%d namespace mounts left on %s", len(m), p)
			}
			for unix.Unmount(dir, unix.MNT_DETACH) == nil || unix.Unmount(parent, unix.MNT_DETACH) == nil {
			}
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s is left", p)
			}
			if err := deleteNetns(p); err != nil {
				t.Errorf("deleteNetns of one gone: %v", err)
			}
		})
	}
}
