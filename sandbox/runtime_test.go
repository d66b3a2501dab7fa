package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	runc "github.com/containerd/go-runc"
	"github.com/sealrun/sealrun/sandbox/cgroup"
)

// The driver's verbs one by one on a real container: create (pipes, pid file), state, start,
// exec with streamed output, kill, delete, list. Run (create+start+wait) is what containers of a
// run use; these are what a long-lived container needs.
func TestRuntimeDriverVerbs(t *testing.T) {
	h := testHost(t)
	imgs := localImages(t)
	ctx := context.Background()
	p := ExampleProfile(RoleRunner, imgs.controller)
	ws := filepath.Join(t.TempDir(), "ws")
	os.Chmod(filepath.Dir(ws), 0o711)
	os.Mkdir(ws, 0o777)
	p.Workspace, p.Args, p.CgroupsPath = ws, []string{"sleep", "60"}, h.placement.Root+"/driver/sealrun-driver-1"
	spec, err := Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(h.cfg.RunDir, "bundles", "sealrun-driver-1")
	os.MkdirAll(bundle, 0o711)
	h.Runtime.adjustSpec(spec)
	data, _ := json.Marshal(spec)
	os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o600)
	id := "sealrun-driver-1"
	defer func() {
		h.Runtime.Delete(ctx, id)
		(cgroup.Tree{Path: h.placement.Root + "/driver"}).Remove()
		cgroup.RemoveRootIfEmpty(h.placement.Root)
		os.RemoveAll(bundle)
	}()

	pio, err := runc.NewPipeIO(int(p.UIDs.Base+AgentUID), int(p.SharedGID))
	if err != nil {
		t.Fatal(err)
	}
	pio.Stdin().Close()
	defer pio.Close()
	if err := h.Runtime.Create(ctx, id, bundle, pio); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Runtime.State(ctx, id); err != nil || st.Status != "created" || st.Pid <= 0 {
		t.Fatalf("after create: %+v %v", st, err)
	}
	if b, err := os.ReadFile(filepath.Join(bundle, "init.pid")); err != nil || len(b) == 0 {
		t.Errorf("no pid file: %v", err)
	}
	if err := h.Runtime.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, err := h.Runtime.State(ctx, id); err != nil || st.Status != "running" {
		t.Fatalf("after start: %+v %v", st, err)
	}
	eio, err := runc.NewPipeIO(int(p.UIDs.Base+AgentUID), int(p.SharedGID))
	if err != nil {
		t.Fatal(err)
	}
	eio.Stdin().Close()
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(&out, eio.Stdout()) }()
	proc := *spec.Process
	proc.Args = []string{"sh", "-c", "echo from-exec; id -u"}
	if err := h.Runtime.Exec(ctx, id, proc, eio); err != nil {
		t.Fatal(err)
	}
	// The exec has exited and the child's ends are closed (CloseAfterStart): the copy ends at EOF
	// once it drained the pipe. Closing our read end before then loses what is still in it.
	copied := make(chan struct{})
	go func() { wg.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(10 * time.Second):
		t.Error("the exec's output did not reach EOF in 10 s")
	}
	eio.Close()
	wg.Wait()
	if out.String() != "from-exec\n1000\n" {
		t.Errorf("exec output %q", out.String())
	}
	if cs, err := h.Runtime.List(ctx); err != nil || len(cs) != 1 || cs[0].ID != id {
		t.Errorf("list: %v %v", cs, err)
	}
	if err := h.Runtime.Kill(ctx, id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := h.Runtime.State(ctx, id)
		if err == nil && st.Status == "stopped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not stopped after kill: %+v %v", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.Runtime.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Runtime.State(ctx, id); err == nil || !strings.Contains(err.Error(), id) {
		t.Errorf("state after delete: %v (errors must name the container)", err)
	}
}
