package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sealrun/sealrun/internal/testenv"
)

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkContainerVsBareRunc: create+start+wait+delete of a runner-profile container running
// `true` (user namespace with its own UID range, netns configured and checked by the hook,
// cgroup, seccomp, bundle, teardown) against bare `runc run` of a minimal bundle of the same
// image, alternating in one run. Reports both medians and their ratio, and where the sealed
// container's time went (Phases, and the teardown). The sealed container runs under
// SEALRUN_TEST_RUNTIME (make bench runs it under runc and crun); under another runtime than
// runc, a bare run of that runtime is timed too. The same sealed container on a host whose runtime
// runs the Go hook itself, not its relay, alternates with it
// (each first in every other round): go-hook-ms.
func BenchmarkContainerVsBareRunc(b *testing.B) {
	requireRoot(b)
	imgs := localImages(b)
	runDir, _ := os.MkdirTemp("/run", "sealrun-bench-")
	defer os.RemoveAll(runDir)
	_, hook := buildBinaries(b)
	h, err := NewHost(HostConfig{StateDir: b.TempDir(), RunDir: runDir, Hook: hook, Runtime: testenv.Runtime(), RoleRuntimes: testRoleRuntimes()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Destroy(ctx)
	wsParent := b.TempDir()
	os.Chmod(wsParent, 0o711)
	ws := filepath.Join(wsParent, "ws")
	if err := r.PrepareWorkspace(ws, 256<<20); err != nil { // with the disk quota, as runs have it
		b.Fatal(err)
	}

	// The same container on a host whose runtime runs the Go hook itself (no relay beside it),
	// alternating: go-hook-ms.
	loneHook := filepath.Join(b.TempDir(), HookBinary)
	if data, err := os.ReadFile(hook); err != nil || os.WriteFile(loneHook, data, 0o755) != nil {
		b.Fatal("copy the hook", err)
	}
	goRunDir, _ := os.MkdirTemp("/run", "sealrun-bench-")
	defer os.RemoveAll(goRunDir)
	hg, err := NewHost(HostConfig{StateDir: b.TempDir(), RunDir: goRunDir, Hook: loneHook, Runtime: testenv.Runtime(), RoleRuntimes: testRoleRuntimes()})
	if err != nil {
		b.Fatal(err)
	}
	rg, err := hg.NewRun(ctx, "benchgo")
	if err != nil {
		b.Fatal(err)
	}
	defer rg.Destroy(ctx)
	wsg := filepath.Join(wsParent, "wsg")
	if err := rg.PrepareWorkspace(wsg, 256<<20); err != nil {
		b.Fatal(err)
	}
	// sealed returns the container, the time from Start until Wait returned, the whole time, and
	// when its start was marked (zero under a runtime that marks none).
	sealed := func(r *Run, ws string) (*Container, time.Duration, time.Duration, time.Time) {
		t0 := time.Now()
		c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.controller, Workspace: ws, Args: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if code, err := c.Wait(ctx); code != 0 || err != nil {
			b.Fatal(code, err)
		}
		t1 := time.Now()
		marked, _ := c.markedStart()
		if err := c.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		return c, t1.Sub(t0), time.Since(t0), marked
	}

	bare := testenv.BareRuncBundle(b, imgs.controller, "true")
	bareRoot := filepath.Join(runDir, "bare")

	var ours, goHook, theirs, same []time.Duration
	phases := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // each host first in every other round
			_, _, dg, _ := sealed(rg, wsg)
			goHook = append(goHook, dg)
		}
		c, ran, d, marked := sealed(r, ws)
		ours = append(ours, d)
		if i%2 == 1 {
			_, _, dg, _ := sealed(rg, wsg)
			goHook = append(goHook, dg)
		}
		p := c.Phases
		run := ran - p.Prepare - p.Runtime - p.Hook - p.Ready
		for k, d := range map[string]time.Duration{"prepare": p.Prepare, "runtime": p.Runtime, "hook": p.Hook, "ready": p.Ready,
			"run": run, "teardown": d - ran} {
			phases[k] = append(phases[k], d)
		}
		if !marked.IsZero() { // the run split at the poststart hook: start, then the process and its wait
			start := min(max(marked.Sub(c.launched.Add(p.Runtime+p.Hook+p.Ready)), 0), run)
			phases["start"] = append(phases["start"], start)
			phases["wait"] = append(phases["wait"], run-start)
		}
		if rt := h.Runtime; rt.Kind != KindRunc {
			t0 := time.Now()
			// With the flags sealrun gives it (runsc's platform; its gofer's netns not pinned
			// as a mount under the root, which would outlive the benchmark).
			args := append(append([]string{}, rt.rc.ExtraArgs...), "--root", bareRoot+"-"+rt.Kind, "run", "--bundle", bare, fmt.Sprintf("sealrun-bare-%d", i))
			cmd := exec.Command(rt.Path, args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("bare %s run: %v %s", rt.Kind, err, out)
			}
			same = append(same, time.Since(t0))
		}
		t0 := time.Now()
		cmd := exec.Command("runc", "--root", bareRoot, "run", "--bundle", bare, fmt.Sprintf("sealrun-bare-%d", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bare runc run: %v %s", err, out)
		}
		theirs = append(theirs, time.Since(t0))
	}
	b.StopTimer()
	mo, mt := median(ours), median(theirs)
	b.ReportMetric(float64(mo.Microseconds())/1000, "sealrun-ms")
	b.ReportMetric(float64(mt.Microseconds())/1000, "bare-runc-ms")
	b.ReportMetric(float64(median(goHook).Microseconds())/1000, "go-hook-ms")
	b.ReportMetric(float64(mo)/float64(mt), "ratio")
	if len(same) > 0 {
		b.ReportMetric(float64(median(same).Microseconds())/1000, "bare-same-ms")
	}
	for k, d := range phases {
		b.ReportMetric(float64(median(d).Microseconds())/1000, k+"-ms")
	}
}

// BenchmarkRunLayout: set up and tear down a run's layout (UID range for the shared GID, cgroup
// parent in every hierarchy, gateway netns with loopback and IPv6 off). Each container's own
// netns (and the controller's veth) is made with the container and counted in its lifecycle.
func BenchmarkRunLayout(b *testing.B) {
	requireRoot(b)
	runDir, _ := os.MkdirTemp("/run", "sealrun-bench-")
	defer os.RemoveAll(runDir)
	h, err := NewHost(HostConfig{StateDir: b.TempDir(), RunDir: runDir})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var setup, teardown []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := h.NewRun(ctx, fmt.Sprintf("layout-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		setup = append(setup, time.Since(t0))
		t0 = time.Now()
		if err := r.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		teardown = append(teardown, time.Since(t0))
	}
	b.ReportMetric(float64(median(setup).Microseconds())/1000, "setup-ms")
	b.ReportMetric(float64(median(teardown).Microseconds())/1000, "teardown-ms")
}

// BenchmarkWorkspaceQuota: the cost of a run's /workspace disk quota — create a sparse 10 GiB
// ext4 image, format it, attach a loop device, mount it, and at the end unmount it — beside the
// plain directory a run without quota gets.
func BenchmarkWorkspaceQuota(b *testing.B) {
	requireRoot(b)
	runDir, _ := os.MkdirTemp("/run", "sealrun-bench-")
	defer os.RemoveAll(runDir)
	h, err := NewHost(HostConfig{StateDir: b.TempDir(), RunDir: runDir})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r, err := h.NewRun(ctx, "quota")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Destroy(ctx)
	dir := b.TempDir()
	var setup, teardown []time.Duration
	for i := 0; i < b.N; i++ {
		ws := filepath.Join(dir, fmt.Sprintf("ws-%d", i))
		t0 := time.Now()
		if err := r.PrepareWorkspace(ws, 10<<30); err != nil {
			b.Fatal(err)
		}
		setup = append(setup, time.Since(t0))
		t0 = time.Now()
		if err := unmountWorkspace(ws); err != nil {
			b.Fatal(err)
		}
		teardown = append(teardown, time.Since(t0))
		os.Remove(ws + ".img")
	}
	b.ReportMetric(float64(median(setup).Microseconds())/1000, "setup-ms")
	b.ReportMetric(float64(median(teardown).Microseconds())/1000, "teardown-ms")
}

// BenchmarkCPUBoundCall: a CPU-bound compute call (numpy: fixed work, matrix products, run from
// a sealed runner container of the python image) under SEALRUN_TEST_RUNTIME against the same
// call under runc, alternating, each first in every other round: the overhead a runtime adds
// where an agent's compute time goes. SEALRUN_BENCH_CPU_SECONDS sizes the work (about that
// many seconds under runc; 30 in make bench's gVisor line, 5 by default);
// SEALRUN_BENCH_BLAS_THREADS sets OpenBLAS's threads for both (its default: one per CPU).
func BenchmarkCPUBoundCall(b *testing.B) {
	requireRoot(b)
	imgs := localImages(b)
	secs := 5.0
	if s, err := strconv.ParseFloat(os.Getenv("SEALRUN_BENCH_CPU_SECONDS"), 64); err == nil && s > 0 {
		secs = s
	}
	ctx := context.Background()
	host := func(runtime, id string) (*Run, string) {
		runDir, _ := os.MkdirTemp("/run", "sealrun-bench-")
		b.Cleanup(func() { os.RemoveAll(runDir) })
		h, err := NewHost(HostConfig{StateDir: b.TempDir(), RunDir: runDir, Runtime: runtime, RoleRuntimes: map[Role]string{RoleController: "runc"}})
		if err != nil {
			b.Fatal(err)
		}
		r, err := h.NewRun(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Destroy(ctx) })
		parent := b.TempDir()
		os.Chmod(parent, 0o711)
		ws := filepath.Join(parent, "ws")
		if err := r.PrepareWorkspace(ws, 0); err != nil {
			b.Fatal(err)
		}
		return r, ws
	}
	var env []string
	if n := os.Getenv("SEALRUN_BENCH_BLAS_THREADS"); n != "" {
		env = []string{"OPENBLAS_NUM_THREADS=" + n}
	}
	call := func(r *Run, ws string, n int) time.Duration {
		var out bytes.Buffer
		t0 := time.Now()
		c, err := r.Start(ctx, ContainerConfig{Role: RoleRunner, Rootfs: imgs.python, Workspace: ws, Stdout: &out, Stderr: &out, Env: env,
			Args: []string{"python3", "-c", fmt.Sprintf("import numpy as np\nrng = np.random.default_rng(1)\na = rng.random((256, 256))\ns = 0.0\nfor _ in range(%d):\n    s += float((a @ a).sum())\nprint(s)", n)}})
		if err != nil {
			b.Fatal(err)
		}
		code, err := c.Wait(ctx)
		d := time.Since(t0)
		c.Destroy(ctx)
		if code != 0 || err != nil {
			b.Fatalf("numpy call under %s: exit %d %v: %s", c.rt.Kind, code, err, out.String())
		}
		return d
	}
	tested, tws := host(testenv.Runtime(), "cpu-tested")
	base, bws := host("runc", "cpu-runc")
	// Size the work under runc: a product's time is the difference of 1,000 and 3,000 of them
	// over 2,000 (the container's start and numpy's import cancel out).
	t1, t3 := call(base, bws, 1000), call(base, bws, 3000)
	n := int(2000 * secs / max(t3-t1, time.Millisecond).Seconds())
	var ours, theirs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			theirs = append(theirs, call(base, bws, n))
		}
		ours = append(ours, call(tested, tws, n))
		if i%2 == 1 {
			theirs = append(theirs, call(base, bws, n))
		}
	}
	b.StopTimer()
	mo, mt := median(ours), median(theirs)
	b.ReportMetric(mo.Seconds(), "call-s")
	b.ReportMetric(mt.Seconds(), "runc-call-s")
	b.ReportMetric(float64(mo)/float64(mt), "ratio")
}

// BenchmarkRuntimeByFeature: the runtime's own time (SEALRUN_TEST_RUNTIME; runc by default) for
// `run` of the bare bundle of the same image running `true`, and of that bundle with each part of
// the isolation a sealed runner container has added, from its own spec: its seccomp profile, its
// user namespace (the image's /sys bound, as no cgroup mount can be made in it there), its
// cgroup namespace, its masked and read-only paths, its limits, and all of them; and the sealed
// runner's whole spec as Spec writes it (its mounts and namespaces besides), without what sealrun
// adds at a start (the idmapped rootfs, the network hook, its own netns). What a sealed container
// costs beyond that is sealrun's own (BenchmarkContainerVsBareRunc's phases).
func BenchmarkRuntimeByFeature(b *testing.B) {
	requireRoot(b)
	imgs := localImages(b)
	ws := b.TempDir()
	os.Chmod(ws, 0o777) // the container's user works in it (the "spec" variant)
	sealed, err := Spec(Profile{Role: RoleRunner, Rootfs: imgs.controller, Args: []string{"true"}, UIDs: IDRange{Base: RangeBase, Size: RangeSize}, SharedGID: RangeBase, Workspace: ws, CgroupsPath: "/sealrun-bench-features"})
	if err != nil {
		b.Fatal(err)
	}
	rt := testenv.Runtime()
	if rt == "" || rt == "runsc" || strings.HasSuffix(rt, "/runsc") {
		rt = "runc" // gVisor's sandbox is its own runtime; it is measured whole elsewhere
	}
	base := testenv.BareRuncBundle(b, imgs.controller, "true")
	var spec map[string]any
	if err := json.Unmarshal(mustReadFile(b, filepath.Join(base, "config.json")), &spec); err != nil {
		b.Fatal(err)
	}
	features := map[string]func(s map[string]any){
		"seccomp": func(s map[string]any) { linuxOf(s)["seccomp"] = sealed.Linux.Seccomp },
		"userns": func(s map[string]any) {
			l := linuxOf(s)
			l["namespaces"] = append(l["namespaces"].([]any), map[string]any{"type": "user"})
			l["uidMappings"], l["gidMappings"] = sealed.Linux.UIDMappings, sealed.Linux.UIDMappings // one range: the shared group is sealrun's own
			var mounts []any
			for _, m := range s["mounts"].([]any) {
				if d := m.(map[string]any)["destination"]; d != "/sys" && d != "/sys/fs/cgroup" {
					mounts = append(mounts, m)
				}
			}
			s["mounts"] = append(mounts, map[string]any{"destination": "/sys", "type": "none", "source": "/sys", "options": []string{"rbind", "nosuid", "noexec", "nodev", "ro"}})
		},
		"cgroupns": func(s map[string]any) {
			l := linuxOf(s)
			l["namespaces"] = append(l["namespaces"].([]any), map[string]any{"type": "cgroup"})
		},
		"masks": func(s map[string]any) {
			l := linuxOf(s)
			l["maskedPaths"], l["readonlyPaths"] = sealed.Linux.MaskedPaths, sealed.Linux.ReadonlyPaths
		},
		"limits": func(s map[string]any) { linuxOf(s)["resources"] = sealed.Linux.Resources },
	}
	// "spec": the sealed runner's whole spec as Spec writes it (its mounts, namespaces and all
	// of the above), without what sealrun adds when it starts one (the idmapped rootfs, the
	// network hook, its own netns): run on an overlay of the image in which the mount targets
	// are made beforehand (as sealrun's mount-target overlay does; the container's root could
	// not make them, and the image's store is never written).
	specRoot := overlayWithTargets(b, imgs.controller, sealed, sealed.Linux.UIDMappings, sealed.Linux.UIDMappings)
	features["spec"] = func(s map[string]any) {
		var whole map[string]any
		data, _ := json.Marshal(sealed)
		json.Unmarshal(data, &whole)
		version := s["ociVersion"] // the bare bundle's, which every runtime here takes (crun 1.8 refuses 1.1 and later)
		clear(s)
		maps.Copy(s, whole)
		s["root"] = map[string]any{"path": specRoot, "readonly": true}
		s["ociVersion"] = version
		l := linuxOf(s)
		l["gidMappings"] = l["uidMappings"] // one range: the shared group is sealrun's own (Run's)
	}
	variants := [][]string{{}, {"seccomp"}, {"userns"}, {"cgroupns"}, {"masks"}, {"limits"}, {"seccomp", "userns", "cgroupns", "masks", "limits"}, {"spec"}}
	bundles := make([]string, len(variants))
	for i, v := range variants {
		var s map[string]any
		data, _ := json.Marshal(spec)
		json.Unmarshal(data, &s) // a deep copy
		for _, f := range v {
			features[f](s)
		}
		bundles[i] = filepath.Join(b.TempDir(), "bundle")
		os.MkdirAll(bundles[i], 0o755)
		data, _ = json.Marshal(s)
		if err := os.WriteFile(filepath.Join(bundles[i], "config.json"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	root, _ := os.MkdirTemp("/run", "sealrun-bench-")
	defer os.RemoveAll(root)
	times := make([][]time.Duration, len(variants))
	b.ResetTimer()
	for n := range b.N {
		for i := range variants { // alternating, so that each variant sees the same machine
			t0 := time.Now()
			if out, err := exec.Command(rt, "--root", root, "run", "--bundle", bundles[i], fmt.Sprintf("sealrun-feature-%d-%d", n, i)).CombinedOutput(); err != nil {
				b.Fatalf("%s run with %v: %v %s", rt, variants[i], err, out)
			}
			times[i] = append(times[i], time.Since(t0))
		}
	}
	b.StopTimer()
	for i, v := range variants {
		name := strings.Join(v, "+")
		switch {
		case len(v) == 0:
			name = "bare"
		case len(v) > 1:
			name = "all"
		}
		b.ReportMetric(float64(median(times[i]).Microseconds())/1000, name+"-ms")
	}
}

func linuxOf(s map[string]any) map[string]any { return s["linux"].(map[string]any) }

// overlayWithTargets mounts, read-only, rootfs under a layer holding the mount targets it lacks,
// made as a sealed start makes them (resolveMountTargets, makeTargetLayer, owned for the
// mappings) but over the image itself rather than its idmapped view; it returns where it is
// mounted, unmounted when the benchmark ends.
func overlayWithTargets(b *testing.B, rootfs string, spec *specs.Spec, uids, gids []specs.LinuxIDMapping) string {
	dir := b.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711) // the container's root (an unprivileged ID outside) reaches it
	os.Chmod(dir, 0o711)
	layer, merged := filepath.Join(dir, "targets"), filepath.Join(dir, "rootfs")
	targets, err := resolveMountTargets(rootfs, spec.Mounts, false)
	if err == nil {
		err = errors.Join(os.Mkdir(layer, 0o755), os.Mkdir(merged, 0o755))
	}
	if err == nil {
		err = makeTargetLayer(layer, rootfs, targets, uids, gids)
	}
	if err == nil {
		err = mountOverlayIn(dir, layer+":"+rootfs, filepath.Base(merged))
	}
	if err != nil {
		b.Fatalf("the mount targets over %s: %v", rootfs, err)
	}
	b.Cleanup(func() { unmountRootfs(merged) })
	return merged
}

func mustReadFile(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
