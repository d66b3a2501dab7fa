package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/sandbox"
)

// SocketPath is where the agent socket appears in the controller (runner.SocketPath).
const SocketPath = "/run/sealrun/agent.sock"

// Config is one run's controller.
type Config struct {
	Rootfs     string   // the scaffold image's rootfs
	Entrypoint []string // the scaffold's command (from the image or the track)
	ImageEnv   []string // the scaffold image's own environment (its ENV): under sealrun's own variables
	Workspace  string   // host workspace, /workspace (holds BRIEF.md)
	Runner     string   // host path of the static runner client, mounted at /usr/local/bin/runner
	Socket     string   // host path of the run's agent socket
	Agent      Agent
	Kind       string // the provider kind: which base-URL variable the scaffold gets
	Port       int    // the gateway's port in the gateway netns (default 8080)
	Transcript string // host file the scaffold's stdout and stderr go to
	// TranscriptCap bounds the transcript (default 64 MiB); past it the file says how much more
	// the scaffold wrote.
	TranscriptCap int64
	Limits        sandbox.Limits
	Env           []string // extra scaffold configuration (KEY=VALUE), never secrets
}

// GatewayURL is the gateway's URL as the controller reaches it (port 0: DefaultPort).
func GatewayURL(port int) string {
	if port == 0 {
		port = DefaultPort
	}
	return "http://" + sandbox.GatewayIP.String() + ":" + strconv.Itoa(port)
}

// Env is the documented contract between sealrun and a scaffold (SCAFFOLD.md): the image's own
// environment, then the gateway URL, the agent identity, the brief, and the base-URL variables
// SDKs read (a variable the image sets too is sealrun's). The key variables hold a placeholder:
// SDKs insist on one, and the gateway drops it and injects the real key.
func Env(cfg Config) []string {
	gw := GatewayURL(cfg.Port)
	env := append([]string(nil), cfg.ImageEnv...)
	env = append(env,
		"SEALRUN_GATEWAY="+gw,
		"SEALRUN_PROVIDER="+cfg.Agent.Provider,
		"SEALRUN_PROVIDER_KIND="+cfg.Kind,
		"SEALRUN_MODEL="+cfg.Agent.Model,
		"SEALRUN_EFFORT="+cfg.Agent.Effort,
		"SEALRUN_AGENT="+cfg.Agent.String(),
		"SEALRUN_BRIEF="+sandbox.WorkspacePath+"/BRIEF.md",
		"SEALRUN_AGENT_SOCKET="+SocketPath,
	)
	switch cfg.Kind {
	case KindAnthropic:
		env = append(env, "ANTHROPIC_BASE_URL="+gw, "ANTHROPIC_API_KEY=sealrun-gateway-injects-the-key")
	case KindGoogle:
		env = append(env, "GOOGLE_GEMINI_BASE_URL="+gw, "GEMINI_API_KEY=sealrun-gateway-injects-the-key")
	default:
		env = append(env, "OPENAI_BASE_URL="+gw+"/v1", "OPENAI_API_KEY=sealrun-gateway-injects-the-key")
	}
	return append(env, cfg.Env...)
}

// CheckImageEnv refuses a scaffold image whose own environment (its ENV) sealrun will not start a
// controller with: LD_* variables (the sandbox starts no container with one) and proxy variables
// (the gateway is the only egress; an SDK following a proxy would fail).
func CheckImageEnv(env []string) error {
	for _, e := range env {
		k, _, ok := strings.Cut(e, "=")
		switch {
		case !ok || k == "":
			return fmt.Errorf("its environment entry %q is not KEY=VALUE", e)
		case strings.HasPrefix(k, "LD_"):
			return fmt.Errorf("it sets %s in its environment; sealrun starts no container with LD_* variables: rebuild it without (ENV in the Containerfile)", k)
		case strings.HasSuffix(strings.ToLower(k), "_proxy"):
			return fmt.Errorf("it sets %s in its environment; the run's only egress is its gateway (SEALRUN_GATEWAY, OPENAI_BASE_URL, ANTHROPIC_BASE_URL, GOOGLE_GEMINI_BASE_URL), never a proxy: rebuild it without", k)
		}
	}
	return nil
}

// Controller is a running controller container.
type Controller struct {
	c          *sandbox.Container
	transcript *cappedFile
	stopOnce   sync.Once
	memory     int64 // the container's memory limit
}

// Start starts the scaffold in a controller container of run: as the agent user in /workspace,
// with the runner client and the agent socket mounted, the environment of Env, no GPU, and its
// only peer the run's gateway.
func Start(ctx context.Context, run *sandbox.Run, cfg Config) (*Controller, error) {
	if len(cfg.Entrypoint) == 0 {
		return nil, fmt.Errorf("controller: the scaffold has no entrypoint")
	}
	if cfg.TranscriptCap == 0 {
		cfg.TranscriptCap = 64 << 20
	}
	tf, err := newCappedFile(cfg.Transcript, cfg.TranscriptCap)
	if err != nil {
		return nil, fmt.Errorf("controller transcript: %w", err)
	}
	c, err := run.Start(ctx, sandbox.ContainerConfig{
		Role: sandbox.RoleController, Rootfs: cfg.Rootfs, Args: cfg.Entrypoint, Env: Env(cfg), Cwd: sandbox.WorkspacePath,
		Workspace: cfg.Workspace, Runner: cfg.Runner, Limits: cfg.Limits,
		Extra:  []specs.Mount{{Destination: SocketPath, Type: "bind", Source: cfg.Socket, Options: []string{"bind", "nosuid", "nodev", "noexec"}}},
		Stdout: tf, Stderr: tf,
	})
	if err != nil {
		tf.Close()
		return nil, err
	}
	return &Controller{c: c, transcript: tf, memory: cfg.Limits.WithDefaults().MemoryBytes}, nil
}

// HumanShellLoop is what a human run's controller runs: a login shell on its terminal, started
// again when the person leaves it (exit, ^D), so that the run ends only as an agent's does (runner
// finalize, the deadline), never by a slip of the keyboard.
var HumanShellLoop = []string{HumanShell, "-c", `while :; do ` + HumanShell + ` -l; echo; echo "[sealrun: the shell ended; a new one starts. The run ends on runner finalize or at its deadline.]"; done`}

// StartHuman starts a human run's controller: the same container as a scaffold's (the agent
// user in /workspace, runner and the agent socket, the environment of Env, no GPU, only the
// gateway) running HumanShellLoop on a terminal, bound to sess, every byte of it recorded in rec
// (which the caller closes once the controller has stopped).
func StartHuman(ctx context.Context, run *sandbox.Run, cfg Config, sess *Session, rec *Recording) (*Controller, error) {
	cols, rows := sess.Size()
	env := append(Env(cfg), "TERM="+TerminalType, "SHELL="+HumanShell, "HOME="+sandbox.WorkspacePath, "PS1=[sealrun] \\w \\$ ")
	c, err := run.Start(ctx, sandbox.ContainerConfig{
		Role: sandbox.RoleController, Rootfs: cfg.Rootfs, Args: HumanShellLoop, Env: env, Cwd: sandbox.WorkspacePath,
		Workspace: cfg.Workspace, Runner: cfg.Runner, Limits: cfg.Limits,
		Extra:    []specs.Mount{{Destination: SocketPath, Type: "bind", Source: cfg.Socket, Options: []string{"bind", "nosuid", "nodev", "noexec"}}},
		Terminal: true, Cols: cols, Rows: rows, Stdout: sess,
	})
	if err != nil {
		return nil, err
	}
	console := c.Console()
	sess.Bind(console, func(cols, rows int) error { return sandbox.SetWinsize(console, cols, rows) }, rec)
	return &Controller{c: c, memory: cfg.Limits.WithDefaults().MemoryBytes}, nil
}

// Container is the controller's container (its air-gap evidence, pid, stats).
func (c *Controller) Container() *sandbox.Container { return c.c }

// Done is closed when the scaffold has exited, or when its container ended without it having
// run (Exited says which).
func (c *Controller) Done() <-chan struct{} { return c.c.Done() }

// Exited, once Done is closed, says how the container ended: nil when the scaffold ran and
// exited (with any status: its own end), an InfraError when it never ran (sandbox.NeverRan: the
// runtime failed to start it; nothing of the scaffold's ran) or the runtime failed.
func (c *Controller) Exited() error {
	var ce *sandbox.CommandError
	if _, err := c.c.Wait(context.Background()); err != nil && !errors.As(err, &ce) {
		return err
	}
	return nil
}

// Ended says, once Done is closed and before Stop, how the scaffold ended by itself: its exit
// status and its memory peak, and whether the kernel's OOM killer killed a process of it at the
// controller's memory limit (a scaffold that needs more memory than the track gives: the
// operator sees why the agent stopped, not only that nothing was promoted).
func (c *Controller) Ended() string {
	exit, _ := c.c.Wait(context.Background())
	msg := fmt.Sprintf("the scaffold exited with status %d", exit)
	st, err := c.c.Stats()
	if err != nil {
		return msg
	}
	mib := func(n uint64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
	if st.OOMKills > 0 {
		return msg + fmt.Sprintf(" after the kernel's OOM killer killed %d of its processes at the controller's memory limit (%s; its peak %s): the track's [resources] memory is less than this scaffold needs", st.OOMKills, mib(uint64(c.memory)), mib(st.MemoryPeak))
	}
	return msg + fmt.Sprintf("; its memory peak %s of %s", mib(st.MemoryPeak), mib(uint64(c.memory)))
}

// Stop ends the scaffold at the deadline, on finalize or on cancel: the container is frozen
// (nothing it does after this moment counts), killed with everything in it, and removed; the
// transcript is closed. It returns the scaffold's exit status if it had exited by itself.
func (c *Controller) Stop(ctx context.Context) error {
	var err error
	c.stopOnce.Do(func() {
		select {
		case <-c.c.Done():
		default:
			c.c.Freeze()
			c.c.Kill(ctx, syscall.SIGKILL)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c.c.Wait(wctx)
		err = c.c.Destroy(ctx)
		if c.transcript != nil {
			c.transcript.Close()
		}
	})
	return err
}

// cappedFile keeps the first cap bytes written and notes how many more there were.
type cappedFile struct {
	mu      sync.Mutex
	f       *os.File
	cap     int64
	n, over int64
}

func newCappedFile(path string, limit int64) (*cappedFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &cappedFile{f: f, cap: limit}, nil
}

func (c *cappedFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.cap - c.n
	k := min(int64(len(p)), max(room, 0))
	if k > 0 && c.f != nil {
		c.f.Write(p[:k])
		c.n += k
	}
	c.over += int64(len(p)) - k
	return len(p), nil
}

func (c *cappedFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	if c.over > 0 {
		fmt.Fprintf(c.f, "\n[sealrun: the transcript keeps the first %d bytes; the scaffold wrote %d more]\n", c.n, c.over)
	}
	c.f.Sync()
	err := c.f.Close()
	c.f = nil
	return err
}
