package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
)

// sandboxFlags is the flag group of the sandbox verbs.
type sandboxFlags struct {
	runtime, runDir, runner string
	gpus                    []string
	release                 func() // removes the private run directory (host)
}

// CLIRunDirs is where commands that make containers (grade, regrade, sandbox run and probe) keep
// a run directory of their own each, beside sealrund's and each other's.
const CLIRunDirs = "/run/sealrun-cli"

func (f *sandboxFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.runtime, "runtime", "runc", "OCI runtime binary: runc, crun or runsc (doctor: default from sealrun.toml)")
	cmd.Flags().StringVar(&f.runDir, "run-dir", "", "volatile sandbox state: bundles and runtime state (default: a directory of this process's own under "+CLIRunDirs+", removed at exit; a run directory serves one process at a time)")
}

// host opens the sandbox host of this command: on --run-dir, or on a run directory of its own
// (Close removes it).
func (f *sandboxFlags) host(g *globals) (*sandbox.Host, error) {
	dir := f.runDir
	if dir == "" {
		var err error
		if dir, f.release, err = sandbox.PrivateRunDir(context.Background(), CLIRunDirs); err != nil {
			return nil, err
		}
	}
	return sandbox.NewHost(sandbox.HostConfig{StateDir: g.stateDir, RunDir: dir, Runtime: f.runtime})
}

// Close removes the private run directory host made, once the command's runs have ended.
func (f *sandboxFlags) Close() {
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// runnerBinary finds the static runner client: --runner, next to this binary, or on PATH.
func (f *sandboxFlags) runnerBinary() (string, error) {
	if f.runner != "" {
		return filepath.Abs(f.runner)
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "runner")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	for _, p := range []string{"/usr/local/bin/runner", "bin/runner"} {
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", errors.New("the static runner client was not found next to sealrun, in /usr/local/bin or bin/; build it (make build) or give --runner")
}

// gpuEdits resolves --gpu through the CDI specs, saying which CDI hooks are not run.
func (f *sandboxFlags) gpuEdits(stderr io.Writer) (*sandbox.GPUEdits, error) {
	edits, err := sandbox.ResolveGPUs(sandbox.DefaultCDIDirs, f.gpus)
	if err != nil {
		return nil, err
	}
	for _, hk := range edits.DroppedHooks {
		fmt.Fprintf(stderr, "sealrun: CDI hook not run (hooks never run as host root): %s\n", hk)
	}
	return edits, nil
}

// roleAndRootfs checks --role and resolves --image.
func roleAndRootfs(g *globals, role, image string) (sandbox.Role, string, error) {
	r, err := sandbox.ParseRole(role)
	if err != nil {
		return "", "", usage(err)
	}
	rootfs, err := imageRootfs(g, image)
	return r, rootfs, err
}

// imageRootfs resolves --image to the rootfs in the store.
func imageRootfs(g *globals, image string) (string, error) {
	if image == "" {
		return "", usage(errors.New("give the image with --image (a digest from sealrun images ls, or name@sha256:...)"))
	}
	if i := strings.LastIndex(image, "@"); i >= 0 {
		image = image[i+1:]
	}
	s, err := images.OpenStore(g.stateDir)
	if err != nil {
		return "", err
	}
	return s.Rootfs(image)
}

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Sealed containers: print their specs, probe their posture, run one-off commands",
		Args:  exactArgs(0, "a subcommand: spec, probe, run, reap or cdi"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: spec, probe, run, reap or cdi"))
		},
	}
	cmd.AddCommand(newSandboxSpecCmd(g), newSandboxProbeCmd(g), newSandboxRunCmd(g), newSandboxReapCmd(g), newSandboxCDICmd())
	return cmd
}

func newSandboxSpecCmd(g *globals) *cobra.Command {
	var role, image string
	cmd := &cobra.Command{
		Use:   "spec --role controller|runner|grader [--image DIGEST]",
		Short: "Print the OCI runtime spec (config.json) of a role",
		Long: `Spec prints the config.json sealrun gives a container of the role, with placeholder paths and the
first UID range (a real container gets its own range, cgroup path and the network hook). Without
--image the rootfs path is a placeholder.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := sandbox.ParseRole(role)
			if err != nil {
				return usage(err)
			}
			rootfs := "/var/lib/sealrun/images/sha256/<digest>/rootfs"
			if image != "" {
				if rootfs, err = imageRootfs(g, image); err != nil {
					return err
				}
			}
			spec, err := sandbox.Spec(sandbox.ExampleProfile(r, rootfs))
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), spec)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "controller, runner or grader")
	cmd.Flags().StringVar(&image, "image", "", "an image in the store (digest), for its rootfs path")
	return cmd
}

func newSandboxProbeCmd(g *globals) *cobra.Command {
	var f sandboxFlags
	var role, image string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "probe --role R --image DIGEST [--json]",
		Short: "Start a container of a role, check its posture from inside and from the host",
		Long: `Probe starts a container of the role from the image, runs the runner client's posture check
inside it (capabilities, seccomp, mappings, read-only rootfs, masked paths, connection attempts to
every address of this host and to the run's gateway), reads from the host its namespaces,
netlink view, cgroup limits, device rules and file descriptors, tears everything down and
prints the result. Exit status 1 if any property is not as the role requires. Needs root.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, rootfs, err := roleAndRootfs(g, role, image)
			if err != nil {
				return err
			}
			runner, err := f.runnerBinary()
			if err != nil {
				return err
			}
			h, err := f.host(g)
			defer f.Close()
			if err != nil {
				return err
			}
			pc := sandbox.ProbeConfig{Role: r, Rootfs: rootfs, Runner: runner}
			edits, err := f.gpuEdits(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			pc.Devices, pc.Extra, pc.Env, pc.Symlinks = edits.Devices, edits.Mounts, edits.Env, edits.Symlinks
			res, err := h.Probe(cmd.Context(), pc)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				printJSON(w, res)
			} else {
				writeProbe(w, res)
			}
			if !res.OK {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d problems", len(res.Problems)), quiet: true}
			}
			return nil
		},
	}
	f.addFlags(cmd)
	cmd.Flags().StringVar(&role, "role", "", "controller, runner or grader")
	cmd.Flags().StringVar(&image, "image", "", "the image (digest in the store)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the posture as JSON")
	cmd.Flags().StringVar(&f.runner, "runner", "", "the static runner client (default: next to sealrun)")
	cmd.Flags().StringSliceVar(&f.gpus, "gpu", nil, "CDI devices to give a runner or grader (vendor/class=name)")
	return cmd
}

func writeProbe(out interface{ Write([]byte) (int, error) }, r *sandbox.ProbeResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("role", "%s (container %s)", r.Role, r.Container)
	row("namespaces", "%s", strings.Join(r.Namespaces, " "))
	row("uid map", "%s", strings.Join(strings.Fields(r.UIDMap), " "))
	row("capabilities", "%s", r.CapEff)
	row("seccomp", "mode %d, no_new_privs %v", r.Seccomp, r.NoNewPrivs)
	row("rootfs", "read-only %v", r.ReadonlyRootfs)
	row("masked paths", "ok %v", r.MaskedPathsOK)
	row("links", "%s", strings.Join(r.Links, ", "))
	row("addresses", "%s", strings.Join(r.Addresses, ", "))
	row("routes", "%s", strings.Join(r.Routes, "; "))
	row("limits (host)", "memory %s, swap %s, pids %s, cpu %s, cpuset %s", r.Limits["memory"], r.Limits["swap"], r.Limits["pids"], r.Limits["cpu"], r.Limits["cpuset"])
	row("limits (inside)", "memory %s, swap %s, pids %s, cpu %s, cpuset %s", r.LimitsInside["memory"], r.LimitsInside["swap"], r.LimitsInside["pids"], r.LimitsInside["cpu"], r.LimitsInside["cpuset"])
	row("devices", "%s", strings.Join(r.Devices, ", "))
	kernel := func(label string, m map[string]string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			row(label+" "+k, "%s", m[k])
		}
	}
	kernel("nested", r.Nested)
	kernel("socket", r.Sockets)
	kernel("syscall", r.Syscalls)
	for _, e := range r.Egress {
		verdict := "blocked"
		if e.Connected {
			verdict = "CONNECTED"
		}
		if e.Allowed {
			verdict += " (allowed: the run's gateway)"
		}
		row("egress "+e.Target, "%s", verdict)
	}
	for _, p := range r.Problems {
		row("PROBLEM", "%s", p)
	}
	if r.OK {
		row("verdict", "ok: every property is as the %s role requires", r.Role)
	} else {
		row("verdict", "NOT OK: %d problems", len(r.Problems))
	}
	w.Flush()
}

// sandboxRunFlags are the flags of sealrun sandbox run.
type sandboxRunFlags struct {
	sandboxFlags
	role, image, workspace, bundle string
	cpus                           float64
	memory                         string
}

func newSandboxRunCmd(g *globals) *cobra.Command {
	var f sandboxRunFlags
	cmd := &cobra.Command{
		Use:   "run --role R --image DIGEST [--workspace DIR] [--bundle DIR] -- CMD [ARGS...]",
		Short: "Run a one-off command in a container of a role (calibration, debugging)",
		Long: `Run starts one container of the role from the image, streams its output, propagates its exit
status, and tears everything down (container, cgroups, network namespaces, UID ranges). The
workspace (controller, runner) defaults to a fresh temporary directory; a given --workspace is
made group-owned by the run and group-writable. The grader takes --bundle (read-only). The
container gets --cpus and --memory (1 CPU and 512 MiB unless given: a laptop's; PyTorch with CUDA
needs some GiB of host memory, as a track's [resources] memory gives a run). Needs root.`,
		Example: `  sealrun sandbox run --role runner --image sha256:<hex> -- python3 -c 'import torch; print(torch.__version__)'
  sealrun sandbox run --role runner --image sha256:<hex> --gpu nvidia.com/gpu=0 --cpus 4 --memory 32GiB -- python3 train.py`,
		Args: minArgs(1, "a command after --"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return sandboxRun(cmd, g, &f, args)
		},
	}
	f.addFlags(cmd)
	cmd.Flags().StringVar(&f.role, "role", "", "controller, runner or grader")
	cmd.Flags().StringVar(&f.image, "image", "", "the image (digest in the store)")
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "host directory mounted at /workspace (default: a temporary one)")
	cmd.Flags().StringVar(&f.bundle, "bundle", "", "host directory mounted read-only at /bundle (grader)")
	cmd.Flags().StringSliceVar(&f.gpus, "gpu", nil, "CDI devices to give a runner or grader (vendor/class=name)")
	cmd.Flags().Float64Var(&f.cpus, "cpus", 1, "CPU bandwidth of the container, in cores (0.01 to 4096)")
	cmd.Flags().StringVar(&f.memory, "memory", "512MiB", "memory of the container, no swap (bytes, or a size as tracks write it: 512MiB, 32GiB)")
	return cmd
}

// limits reads --cpus and --memory as the container's limits.
func (f *sandboxRunFlags) limits() (sandbox.Limits, error) {
	if !(f.cpus > 0) { // a zero would take the default, and NaN compares false
		return sandbox.Limits{}, usage(fmt.Errorf("--cpus %v: give the container's CPU bandwidth in cores, 0.01 to 4096", f.cpus))
	}
	mem, err := policy.ParseBytes(f.memory)
	if err != nil {
		return sandbox.Limits{}, usage(fmt.Errorf("--memory %q: %v (e.g. 512MiB, 32GiB)", f.memory, err))
	}
	l := sandbox.Limits{CPUs: f.cpus, MemoryBytes: mem}
	if err := l.Validate(); err != nil {
		return sandbox.Limits{}, usage(fmt.Errorf("--cpus %v --memory %s: %v", f.cpus, f.memory, err))
	}
	return l, nil
}

// sandboxRun runs one container of the role in a sandbox run of its own and returns its exit
// status as the command's.
func sandboxRun(cmd *cobra.Command, g *globals, f *sandboxRunFlags, args []string) error {
	limits, err := f.limits()
	if err != nil {
		return err
	}
	r, rootfs, err := roleAndRootfs(g, f.role, f.image)
	if err != nil {
		return err
	}
	h, err := f.host(g)
	defer f.Close()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	run, err := h.NewRun(ctx, fmt.Sprintf("cli-%d", os.Getpid()))
	if err != nil {
		return err
	}
	defer run.Destroy(context.Background())
	cc := sandbox.ContainerConfig{Role: r, Rootfs: rootfs, Args: args, Limits: limits, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	cleanup, err := f.mounts(run, &cc)
	defer cleanup()
	if err != nil {
		return err
	}
	edits, err := f.gpuEdits(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	cc.Devices, cc.Extra, cc.Env, cc.Symlinks = edits.Devices, edits.Mounts, edits.Env, edits.Symlinks
	c, err := run.Start(ctx, cc)
	if err != nil {
		return err
	}
	code, err := c.Wait(ctx)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code, err: fmt.Errorf("exit status %d", code), quiet: true}
	}
	return nil
}

// mounts gives the container its bundle (grader) or workspace (the others: --workspace, else a
// temporary one that cleanup removes).
func (f *sandboxRunFlags) mounts(run *sandbox.Run, cc *sandbox.ContainerConfig) (cleanup func(), err error) {
	cleanup = func() {}
	if cc.Role == sandbox.RoleGrader {
		if f.bundle == "" {
			return cleanup, usage(errors.New("the grader needs --bundle DIR"))
		}
		cc.Bundle, err = filepath.Abs(f.bundle)
		return cleanup, err
	}
	workspace := f.workspace
	if workspace == "" {
		tmp, err := os.MkdirTemp("", "sealrun-workspace-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		os.Chmod(tmp, 0o711)
		workspace = filepath.Join(tmp, "workspace")
	}
	if cc.Workspace, err = filepath.Abs(workspace); err != nil {
		return cleanup, err
	}
	return cleanup, run.PrepareWorkspace(cc.Workspace, 0)
}

func newSandboxCDICmd() *cobra.Command {
	var root, out string
	cmd := &cobra.Command{
		Use:   "cdi [--out FILE|-] [--root DIR]",
		Short: "Write a CDI spec for this host's NVIDIA GPUs, where NVIDIA's Container Toolkit is not installed",
		Long: `Cdi writes the CDI spec runs get their GPUs from (--gpu, [resources] gpus) on a host without
nvidia-ctk: the GPUs the loaded driver shows (/proc/driver/nvidia, else the /dev/nvidiaN nodes),
named as nvidia-ctk names them (nvidia.com/gpu=0, =GPU-<uuid>, =all), its control nodes, every
library of the driver's version (under its SONAME too) and nvidia-smi, read-only. It runs no hooks
and needs none. Where nvidia-ctk is installed, use its spec instead (nvidia-ctk cdi generate): two
specs naming the same GPUs are refused, and so is writing one beside the other. Run it again
after a driver upgrade (sealrun doctor says when the spec is stale). --root reads another root's
driver (tests; a chroot).`,
		Example: `  sealrun sandbox cdi                       # writes ` + sandbox.NVIDIACDIFile + `
  sealrun sandbox cdi --out -               # prints it`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("--out is empty: give a file under /etc/cdi or /var/run/cdi, or - to print the spec"))
			}
			g, err := sandbox.GenerateNVIDIACDI(root)
			if err != nil {
				return err
			}
			if out == "-" {
				_, err := cmd.OutOrStdout().Write(g.JSON())
				return err
			}
			if !strings.HasSuffix(out, ".json") {
				return usage(fmt.Errorf("--out %s: a CDI spec file's name ends in .json (the CDI library reads nothing else here)", out))
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
				return fmt.Errorf("--out %s: its directory %s does not exist (mkdir -p it; sealrun reads CDI specs from %s)", out, filepath.Dir(abs), strings.Join(sandbox.DefaultCDIDirs, " and "))
			}
			for _, name := range g.GPUs {
				if f := sandbox.CDISpecFile([]string{filepath.Dir(abs)}, name); f != "" && f != abs {
					return fmt.Errorf("%s is already in %s (nvidia-ctk's?): use that spec, or remove it first; two specs naming the same GPU are refused", name, f)
				}
			}
			if err := fileio.WriteFile(abs, g.JSON(), 0o644); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			smi := "no nvidia-smi found"
			if len(g.Binaries) > 0 {
				smi = g.Binaries[0]
			}
			fmt.Fprintf(w, "wrote %s: NVIDIA driver %s, %d libraries, %s\n", abs, g.Driver, len(g.Libraries), smi)
			fmt.Fprintf(w, "GPUs: %s\n", strings.Join(g.GPUs, ", "))
			if !slices.Contains(sandbox.DefaultCDIDirs, filepath.Dir(abs)) {
				fmt.Fprintf(w, "note: sealrun reads CDI specs from %s only; this one is elsewhere\n", strings.Join(sandbox.DefaultCDIDirs, " and "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", sandbox.NVIDIACDIFile, "the spec file to write (- prints it)")
	cmd.Flags().StringVar(&root, "root", "/", "the root whose driver to read")
	return cmd
}

func newSandboxReapCmd(g *globals) *cobra.Command {
	var f sandboxFlags
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Remove what crashed runs of this run directory left behind",
		Long: `Reap removes what sealrun recorded under this --run-dir and left behind: containers in its
runtime root, runs (their cgroups, gateway network namespaces and workspace mounts), its UID
range records and bundles. It never touches what another sealrun on the machine made (another
run directory). --run-dir is sealrund's /run/sealrun unless given; a run directory whose process
still runs is refused (each process holds its own). The daemon calls it at start.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.runDir == "" {
				f.runDir = "/run/sealrun" // sealrund's own: refused while it runs (its run directory is held)
			}
			h, err := f.host(g)
			if err != nil {
				return err
			}
			r, err := h.Reap(cmd.Context())
			w := cmd.OutOrStdout()
			if r.Empty() {
				fmt.Fprintln(w, "nothing to reap")
			}
			for _, x := range []struct {
				what  string
				names []string
			}{{"container", r.Containers}, {"run (cgroups, gateway netns, workspace mounts) of", r.Runs}, {"UID range of", r.Ranges}, {"bundle", r.Bundles},
				{"network namespace hidden under a later mount of its directory:", r.Stranded}} {
				for _, n := range x.names {
					fmt.Fprintf(w, "removed %s %s\n", x.what, n)
				}
			}
			return err
		},
	}
	f.addFlags(cmd)
	return cmd
}

func newDoctorCmd(g *globals) *cobra.Command {
	var f sandboxFlags
	var asJSON bool
	var configPath string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this host can run sealed runs: root, runtime, cgroups, namespaces, GPUs, disk",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			hc := sandbox.HostConfig{StateDir: g.stateDir, RunDir: f.runDir, Runtime: f.runtime}
			if cfg, err := hostconfig.Load(configPath); err == nil && !cmd.Flags().Changed("runtime") {
				// The runtimes the daemon will use: its default and each role's.
				hc.Runtime, hc.RoleRuntimes = cfg.Runtime, cfg.RoleRuntimes()
			}
			checks := sandbox.Doctor(cmd.Context(), hc, g.stateDir)
			checks = append(checks, configCheck(configPath))
			failed := 0
			w := cmd.OutOrStdout()
			if asJSON {
				printJSON(w, checks)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, c := range checks {
				if c.Status == "fail" {
					failed++
				}
				if asJSON {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
				if c.Fix != "" && c.Status != "ok" {
					fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
				}
			}
			tw.Flush()
			if failed > 0 {
				return &exitError{code: exitInvalid, err: fmt.Errorf("%d checks failed", failed), quiet: true}
			}
			return nil
		},
	}
	f.addFlags(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&configPath, "config", hostconfig.DefaultPath, "the daemon's configuration to check")
	return cmd
}

// configCheck validates the daemon's configuration: every problem, or warn when there is none
// (a host that only verifies or grades needs none).
func configCheck(path string) sandbox.Check {
	if _, err := os.Stat(path); err != nil {
		return sandbox.Check{Name: "config", Status: "warn", Detail: path + " does not exist", Fix: "make install writes it; sealrund needs it"}
	}
	if _, err := hostconfig.Load(path); err != nil {
		return sandbox.Check{Name: "config", Status: "fail", Detail: strings.ReplaceAll(err.Error(), "\n", "; "), Fix: "fix each key named, then sealrund --check"}
	}
	return sandbox.Check{Name: "config", Status: "ok", Detail: path + " is valid"}
}
