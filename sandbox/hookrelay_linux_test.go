package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// The relay's server answers what is not a hook request with a reason and configures nothing.
func TestParseRelayRequest(t *testing.T) {
	good := "runner\x00gw\x00/x/netns.json\x00/sealrun/c/ctr\x00" + `{"ociVersion":"1.0.2","id":"c","status":"creating","pid":42,"bundle":"/b"}`
	args, st, err := parseRelayRequest([]byte(good))
	if err != nil || strings.Join(args, " ") != "runner gw /x/netns.json /sealrun/c/ctr" || st.Pid != 42 {
		t.Fatalf("good request: %v %+v %v", args, st, err)
	}
	for name, req := range map[string]string{
		"empty":              "",
		"three arguments":    "runner\x00gw\x00/x\x00{}",
		"no state":           "runner\x00gw\x00/x\x00/c\x00",
		"state not JSON":     "runner\x00gw\x00/x\x00/c\x00pid=1",
		"oversized":          "runner\x00gw\x00/x\x00/c\x00" + strings.Repeat(" ", relayRequestMax),
		"state with a NUL":   "runner\x00gw\x00/x\x00/c\x00{\"pid\":1}\x00junk",
		"state of the wrong": "runner\x00gw\x00/x\x00/c\x00[1,2]",
	} {
		if _, _, err := parseRelayRequest([]byte(req)); err == nil || !strings.HasPrefix(err.Error(), "relay: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The relay binary against its server: a request that is not a container's is refused with the
// reason on stderr and exit 1; a peer that is not root is refused; a server that is gone, a
// wrong argument count and an oversized state are errors naming what happened.
func TestRelayBinary(t *testing.T) {
	requireRoot(t)
	_, hook := buildBinaries(t)
	relay := filepath.Join(filepath.Dir(hook), RelayBinary)
	name, err := startRelay()
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, cred *syscall.Credential, args ...string) (int, string) {
		cmd := exec.Command(relay, args...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	dir := t.TempDir()
	evidence := filepath.Join(dir, "netns.json")
	for _, c := range []struct {
		name, stdin string
		cred        *syscall.Credential
		args        []string
		code        int
		want        string
	}{
		{"no pid", `{"ociVersion":"1.0.2","id":"c"}`, nil, []string{name, "runner", "gw", evidence, "/sealrun-no-such-cgroup"}, 1, "sealrun network hook: container state has no pid"},
		{"unknown role", `{"pid":1}`, nil, []string{name, "agent", "gw", evidence, "/sealrun-no-such-cgroup"}, 1, `unknown role "agent"`},
		{"not JSON", `pid=1`, nil, []string{name, "runner", "gw", evidence, "/sealrun-no-such-cgroup"}, 1, "relay: read container state"},
		{"not root", `{"pid":1}`, &syscall.Credential{Uid: 65534, Gid: 65534}, []string{name, "runner", "gw", evidence, "/sealrun-no-such-cgroup"}, 1, "only root's runtime may run the hook"},
		{"server gone", `{"pid":1}`, nil, []string{"sealrun-hook-no-such-server", "runner", "gw", evidence, "/c"}, 1, "connect to @sealrun-hook-no-such-server"},
		{"oversized state", strings.Repeat(" ", 1<<20+1), nil, []string{name, "runner", "gw", evidence, "/c"}, 1, "container state over 1048576 bytes"},
		{"usage", "", nil, []string{name, "runner"}, 2, "usage: sealrun-hook-relay SOCKET"},
	} {
		code, out := run(c.stdin, c.cred, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d %q; want %d ~%q", c.name, code, out, c.code, c.want)
		}
	}
	if _, err := os.Stat(evidence); err == nil {
		t.Error("a refused request left evidence")
	}
}

// Both hooks end themselves (netnshook.Deadline), since crun gets no hook time-out from sealrun:
// the relay, when its server never answers, and the Go hook, when its state never ends, each say
// so and exit 1 by the deadline (shortened to 1 s here). The spec gives runc and gVisor a
// time-out as well, and crun none.
func TestHooksEndThemselves(t *testing.T) {
	requireRoot(t)
	_, hook := buildBinaries(t)
	relay := filepath.Join(filepath.Dir(hook), RelayBinary)
	name := fmt.Sprintf("sealrun-hook-test-silent-%d", os.Getpid())
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn // read nothing, answer nothing
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func() {
		l.Close()
		<-accepted
		for _, c := range held {
			c.Close()
		}
	}()
	evidence := filepath.Join(t.TempDir(), "netns.json")
	for _, c := range []struct {
		name string
		argv []string
		want string
	}{
		{"relay", []string{relay, name, "runner", "gw", evidence, "/c"}, "no answer within its deadline"},
		{"Go hook", []string{hook, "runner", "gw", evidence, "/c"}, "not done after 1s"},
	} {
		pr, pw, err := os.Pipe() // a state that never ends
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(c.argv[0], c.argv[1:]...)
		cmd.Stdin = pr
		cmd.Env = append(os.Environ(), netnshook.DeadlineEnv+"=1")
		began := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(began)
		pr.Close()
		pw.Close()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v %q; want exit 1 ~%q", c.name, err, out, c.want)
		}
		if took > 20*time.Second {
			t.Errorf("%s: ended after %s, not near its 1 s deadline", c.name, took)
		}
	}
	h := &Host{relayPath: relay, relayName: name, hookPath: hook, hookArgv0: HookBinary}
	for _, kind := range []string{KindRunc, KindCrun, KindRunsc} {
		for _, hs := range []specs.Hook{h.hookSpec(kind, RoleRunner, "gw", evidence, "/c"), (&Host{hookPath: hook, hookArgv0: HookBinary}).hookSpec(kind, RoleRunner, "gw", evidence, "/c")} {
			switch {
			case kind == KindCrun && hs.Timeout != nil:
				t.Errorf("%s: hook %s has a time-out of %d s; crun must get none", kind, hs.Path, *hs.Timeout)
			case kind != KindCrun && (hs.Timeout == nil || time.Duration(*hs.Timeout)*time.Second <= netnshook.Deadline):
				t.Errorf("%s: hook %s has time-out %v; want one past the hook's own deadline", kind, hs.Path, hs.Timeout)
			}
		}
	}
}

// The relay's server does the hook's work on a thread that it switches back: after containers
// were started through it, every thread of this process is still in the host's network
// namespace (a thread left in a container's would make later readings of /proc/self/ns/net,
// and threads cloned from it, the container's).
func TestRelayLeavesNoThreadInAContainer(t *testing.T) {
	r, imgs := testRun(t, "relaythreads")
	if r.h.relayPath == "" {
		t.Fatal("the test host does not use the relay")
	}
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ws := workspace(t, r)
	for i := 0; i < 12; i++ {
		c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: ws, Args: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := c.Wait(ctx); code != 0 || err != nil {
			t.Fatalf("exit %d %v", code, err)
		}
		c.Destroy(ctx)
	}
	// The last hook's thread switches back just after it wrote the evidence Start waited for.
	var away []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		away = away[:0]
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, p := range tasks {
			if ns, err := os.Readlink(p); err == nil && ns != host {
				away = append(away, p+" is "+ns)
			}
		}
		if len(away) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(away) > 0 {
		t.Errorf("threads outside the host's network namespace %s: %v", host, away)
	}
}

// The relay's socket from inside: a container of each role looks for it in /proc/net/unix and
// connects to its name, and neither finds it (an abstract socket belongs to the host's network
// namespace); this test process, on the host, reaches it with the same name.
func TestRelaySocketUnreachableFromContainers(t *testing.T) {
	r, imgs := testRun(t, "relaywall")
	if r.h.relayName == "" {
		t.Fatal("the test host does not use the relay")
	}
	host, err := net.Dial("unix", "@"+r.h.relayName)
	if err != nil {
		t.Fatalf("the host cannot reach its own relay (the attack below would prove nothing): %v", err)
	}
	host.Close()
	const attack = `import socket, sys
name = sys.argv[1]
print("listed" if any(name in l for l in open("/proc/net/unix")) else "unlisted")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0" + name)
    print("CONNECTED")
except OSError as e:
    print("refused", e.errno)
`
	ctx := context.Background()
	for _, role := range []Role{RoleController, RoleRunner, RoleGrader} {
		cfg := ContainerConfig{Role: role, Rootfs: imgs.python, Args: []string{"python3", "-c", attack, r.h.relayName}}
		if role == RoleGrader {
			cfg.Bundle = t.TempDir()
			os.Chmod(filepath.Dir(cfg.Bundle), 0o711)
			os.Chmod(cfg.Bundle, 0o755)
		} else {
			cfg.Workspace = workspace(t, r)
		}
		var out bytes.Buffer
		cfg.Stdout, cfg.Stderr = &out, &out
		c, err := r.Start(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		code, err := c.Wait(ctx)
		c.Destroy(ctx)
		if code != 0 || err != nil || out.String() != "unlisted\nrefused 111\n" {
			t.Errorf("%s: exit %d %v: %q; want the relay's socket unlisted and refused (ECONNREFUSED)", role, code, err, out.String())
		}
	}
}
