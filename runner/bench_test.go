package runner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/sandbox/sandboxtest"

	"github.com/sealrun/sealrun/internal/testenv"
)

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func pct(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkRunnerTrueVsBareRunc: `runner true` end to end — the real client, the socket, the
// service, a fresh runner container from the python image started through the C shim
// (runner-exec), output and exit back, the audit entry fsynced — against bare `runc run` of
// `true` from the same image, alternating in one run. The service starts each call's container
// ahead of it, between calls (warm_linux.go), as it does for an agent: runner-ms. The same call
// where the service starts none ahead, the container started for the call (cold-ms), and
// started through the Go fallback shim (`runner _exec`, where runner-exec is not installed):
// go-shim-ms. Every timing begins once no container is starting in the background, so that
// none of them, the bare run's included, shares the CPUs with a start. The socket's rate limit
// (10 requests a second by default) is lifted: calls back to back outrun it.
func BenchmarkRunnerTrueVsBareRunc(b *testing.B) {
	f := newFixture(b, WithRate(1000, 1000))
	alone := filepath.Join(b.TempDir(), "runner")
	data, err := os.ReadFile(f.client)
	if err == nil {
		err = os.WriteFile(alone, data, 0o755)
	}
	if err != nil {
		b.Fatal(err)
	}
	fgo := newFixtureWith(b, func(c *Config) { c.Shim = alone }, WithRate(1000, 1000), withoutWarm())
	fcold := newFixture(b, WithRate(1000, 1000), withoutWarm())
	imgs := sandboxtest.LocalImages(b)
	bare := testenv.BareRuncBundle(b, imgs.Python, "true")
	root := b.TempDir()
	settle := func() {
		for _, f := range []*fixture{f, fgo, fcold} {
			f.svc.settle()
		}
	}
	call := func(f *fixture) time.Duration {
		settle()
		t0 := time.Now()
		cmd := exec.Command(f.client, "true")
		cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("runner true (shim %s): %v %s", f.svc.o.shim, err, out)
		}
		return time.Since(t0)
	}
	var ours, cold, goShim, theirs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []func(){ // each first in turn
			func() { ours = append(ours, call(f)) },
			func() { cold = append(cold, call(fcold)) },
			func() { goShim = append(goShim, call(fgo)) },
		}
		for k := range order {
			order[(i+k)%len(order)]()
		}
		settle()
		t0 := time.Now()
		if out, err := exec.Command("runc", "--root", root, "run", "--bundle", bare, fmt.Sprintf("sealrun-bare-%d", i)).CombinedOutput(); err != nil {
			b.Fatalf("bare runc run: %v %s", err, out)
		}
		theirs = append(theirs, time.Since(t0))
	}
	b.StopTimer()
	mo, mc, mg, mt := median(ours), median(cold), median(goShim), median(theirs)
	b.ReportMetric(float64(mo.Microseconds())/1000, "runner-ms")
	b.ReportMetric(float64(mc.Microseconds())/1000, "cold-ms")
	b.ReportMetric(float64(mg.Microseconds())/1000, "go-shim-ms")
	b.ReportMetric(float64(mt.Microseconds())/1000, "bare-runc-ms")
	b.ReportMetric(float64(mo)/float64(mt), "ratio")
	b.ReportMetric(float64(mc)/float64(mt), "cold-ratio")
}

// BenchmarkStreamThroughput: a call printing 1 GiB to stdout, through the service and the real
// client, to a reader that discards it.
func BenchmarkStreamThroughput(b *testing.B) {
	f := newFixture(b, WithLogCap(1<<20))
	const size = 1 << 30
	var rates []float64
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(f.client, "head", "-c", strconv.Itoa(size), "/dev/zero")
		cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
		out, _ := cmd.StdoutPipe()
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, out)
		cmd.Wait()
		if n != size {
			b.Fatalf("received %d bytes", n)
		}
		rates = append(rates, float64(size)/(1<<20)/time.Since(t0).Seconds())
	}
	sort.Float64s(rates)
	b.ReportMetric(rates[len(rates)/2], "MiB/s")
}

// BenchmarkLineLatency: a call prints 400 lines 5 ms apart, each stamped with CLOCK_MONOTONIC
// (one clock for every namespace); the time from the stamp to the line's arrival at the client's
// reader is the whole path's latency, the daemon's share included. p50 and p99 reported.
func BenchmarkLineLatency(b *testing.B) {
	f := newFixture(b)
	var lat []time.Duration
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(f.client, "python3", "-c", "import time\nfor i in range(400):\n    print(time.monotonic_ns(), flush=True); time.sleep(0.005)")
		cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + f.sock}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ts unix.Timespec
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
			stamp, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			if err == nil {
				lat = append(lat, time.Duration(ts.Nano()-stamp))
			}
		}
		cmd.Wait()
	}
	b.ReportMetric(float64(pct(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(lat, 0.99).Microseconds())/1000, "p99-ms")
}
