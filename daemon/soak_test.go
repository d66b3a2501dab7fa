package daemon

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/testenv"
)

// soakAgent makes a short call, a long one (each printing a known stream of bytes), submits and
// finalizes.
const soakAgent = `set -u
runner sh -c 'seq 1 20000'
runner sh -c 'sleep 3; seq 20001 30000'
mkdir -p b && cp sealrun-bundle.json predict.py b/
id=$(runner submit b | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p')
runner finalize "$id"
`

// openFiles are this process's open files: descriptor -> what it is (readlink).
func openFiles() map[string]string {
	m := map[string]string{}
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		m[e.Name()], _ = os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
	}
	return m
}

// newOpenFiles says what is open now that was not before, counted by kind.
func newOpenFiles(before, now map[string]string) string {
	kinds := map[string]int{}
	for fd, what := range now {
		if before[fd] != what {
			if i := strings.Index(what, ":["); i > 0 {
				what = what[:i] // socket:[123] -> socket
			}
			kinds[what]++
		}
	}
	return fmt.Sprint(kinds)
}

// procFacts are this process's resident memory (KiB) and open files.
func procFacts() (rssKiB int, fds int) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rssKiB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	return rssKiB, len(ents)
}

// Load held end to end: N sealed runs queued at once at concurrency 4, beside stress-ng's CPU,
// memory, fork and disk stressors at 2x the cores; each makes a short and a long compute call
// and one submission. Every run ends; every attestation verifies; every byte of every call is
// in its log as the command wrote it; every invalid run's rerun ends; the daemon's memory and
// open files are measured at the start and the end. make test queues 4 (SEALRUN_SOAK_RUNS sets
// it); make soak 200.
func TestSoak(t *testing.T) {
	n := 4
	if v, err := strconv.Atoi(os.Getenv("SEALRUN_SOAK_RUNS")); err == nil && v > 0 {
		n = v
	}
	tb := newTestbed(t)
	tb.cfg.Resources.Concurrency = 4
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(soakAgent), 0o755)
	bin := testenv.RequireTool(t, "stress-ng", "stress-ng")
	c := strconv.Itoa(2 * runtime.NumCPU())
	load := exec.Command(bin, "--cpu", c, "--vm", c, "--vm-bytes", "64M", "--fork", c, "--hdd", c, "--hdd-bytes", "32M", "--temp-path", t.TempDir(), "--timeout", "2h", "--quiet")
	load.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-load.Process.Pid, syscall.SIGKILL); load.Wait() })
	x := tb.executor()
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock") // the admin API, for the gathers
	tb.cfg.Group = "root"
	d := startDaemon(t, tb, x)
	cl := serveAPI(t, tb, d)
	rss0, fds0 := procFacts()
	open0 := openFiles()
	start := time.Now()
	for i := range n {
		if _, err := d.Submit([]byte(tb.trackTOML), "soak.toml", "openai/gpt-x@high", int64(i+1), false, "soak"); err != nil {
			t.Fatal(err)
		}
	}
	// Every run, and every rerun of an invalid one, ends.
	deadline := time.Now().Add(time.Duration(n)*90*time.Second + 5*time.Minute)
	var runs []api.Record
	said := time.Now()
	for {
		runs = d.Runs()
		open := 0
		for _, r := range runs {
			if !r.Final() || (r.State == api.StateInvalid && r.RerunBy == "") {
				open++
			}
		}
		if open == 0 {
			break
		}
		if time.Since(said) > 15*time.Second { // make soak's size takes minutes: say how far it is
			t.Logf("%s: %d of %d records ended", time.Since(start).Round(time.Second), len(runs)-open, len(runs))
			said = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs (and reruns) have not ended after %s", open, len(runs), time.Since(start).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	took := time.Since(start)
	want1, _ := exec.Command("seq", "1", "20000").Output()
	want2, _ := exec.Command("seq", "20001", "30000").Output()
	counts := map[string]int{}
	for _, r := range runs {
		counts[r.State]++
		if r.State == api.StateInvalid {
			t.Logf("invalid: %s: %s (rerun %s)", r.ID, r.Reason, r.RerunBy)
			continue
		}
		att := filepath.Join(r.Dir, "result.att.json")
		if _, err := attest.Verify(mustRead(t, att), tb.verifier, attest.WithTrack(tb.track), attest.WithAuditLog(bytes.NewReader(mustRead(t, filepath.Join(r.Dir, "audit.jsonl"))))); err != nil {
			t.Errorf("%s: %v", r.ID, err)
		}
		for i, want := range [][]byte{want1, want2} {
			if got, err := os.ReadFile(filepath.Join(r.Dir, "calls", fmt.Sprintf("%d.log", i+1))); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: call %d's log holds %d bytes (%v); the command wrote %d", r.ID, i+1, len(got), err, len(want))
			}
		}
	}
	rss1, fds1 := procFacts()
	grew := newOpenFiles(open0, openFiles())
	t.Logf("%d runs queued at once, concurrency 4, beside stress-ng: %d records (%v) in %s; daemon RSS %d -> %d MiB, open files %d -> %d (new: %s)",
		n, len(runs), counts, took.Round(time.Second), rss0>>10, rss1>>10, fds0, fds1, grew)
	// The sandbox keeps the user namespaces of the last 32 ID mappings open (idmapped mounts:
	// sandbox/idmap_linux.go, mappingNamespacesKept), a cache, not a leak: those are bounded by
	// it, everything else by 16.
	userNS := 0
	for _, what := range openFiles() {
		if strings.HasPrefix(what, "user:[") {
			userNS++
		}
	}
	if userNS > 32 || fds1-userNS > fds0+16 {
		t.Errorf("open files grew from %d to %d over %d runs (%d of them user namespaces the sandbox keeps, at most 32); new since the start: %s", fds0, fds1, len(runs), userNS, grew)
	}
	gatherAtOnce(t, tb, cl, runs)
}

// gatherAtOnce gathers every graded run into one results directory from 8 clients at once, each
// in its own order, as array jobs on several nodes do, while a reader lists the directory as the
// leaderboard does: every gather succeeds, the reader never sees a run without its attestation,
// record, report and audit log, each run arrives once and verifies, and nothing temporary stays
// (a killed gather's leftover is planted; a gather waits for another holding the run's lock).
func gatherAtOnce(t *testing.T, tb *testbed, cl *client.Client, runs []api.Record) {
	t.Helper()
	var graded []api.Record
	for _, r := range runs {
		if r.State == api.StateGraded {
			graded = append(graded, r)
		}
	}
	if len(graded) == 0 {
		t.Fatal("no run was graded: nothing to gather")
	}
	results := filepath.Join(t.TempDir(), "results")
	os.Mkdir(results, 0o755)
	// What a killed gather of the first run left (removed by the next gather of that run, which
	// holds the run's gather lock: no other gather of it is at work).
	os.MkdirAll(filepath.Join(results, "."+graded[0].ID+".tmp-killed", "half"), 0o755)
	// A gather of the second run waits while another holds that run's lock.
	if len(graded) > 1 {
		unlock, locked, err := client.LockGather(context.Background(), results, graded[1].ID)
		if err != nil || !locked {
			t.Fatalf("lock: %v %v", locked, err)
		}
		done := make(chan error, 1)
		go func() { _, err := cl.Gather(context.Background(), graded[1], results); done <- err }()
		select {
		case err := <-done:
			t.Errorf("a gather went on while another held the run's lock (%v)", err)
		case <-time.After(500 * time.Millisecond):
		}
		unlock()
		if err := <-done; err != nil {
			t.Errorf("the gather that waited: %v", err)
		}
	}
	stop := make(chan struct{})
	reader := make(chan error, 1)
	var looks atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				reader <- nil
				return
			default:
			}
			ents, _ := os.ReadDir(results)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".") {
					continue // a gather at work (the leaderboard skips these too)
				}
				for _, f := range []string{"result.att.json", "run.json", "report.json", "audit.jsonl"} {
					if _, err := os.Stat(filepath.Join(results, e.Name(), f)); err != nil {
						reader <- fmt.Errorf("a reader saw %s without %s: %v", e.Name(), f, err)
						return
					}
				}
				looks.Add(1)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(graded))
	var fresh atomic.Int64
	t0 := time.Now()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range graded {
				already, err := cl.Gather(context.Background(), graded[(i*(g+1)+g)%len(graded)], results)
				if err != nil {
					errs <- err
				} else if !already {
					fresh.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(t0)
	close(stop)
	if err := <-reader; err != nil {
		t.Error(err)
	}
	close(errs)
	for err := range errs {
		t.Errorf("gather: %v", err)
	}
	for _, r := range graded {
		dir := filepath.Join(results, r.ID)
		if _, err := attest.Verify(mustRead(t, filepath.Join(dir, "result.att.json")), tb.verifier, attest.WithTrack(tb.track), attest.WithAuditLog(bytes.NewReader(mustRead(t, filepath.Join(dir, "audit.jsonl"))))); err != nil {
			t.Errorf("gathered %s: %v", r.ID, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(results, ".*")); len(left) > 0 {
		t.Errorf("after the gathers, %v are left", left)
	}
	// The second run (when there is one) was gathered by the gather that waited for its lock.
	waited := 0
	if len(graded) > 1 {
		waited = 1
	}
	if got, want := fresh.Load(), int64(len(graded)-waited); got != want {
		t.Errorf("%d runs were gathered anew, of %d graded", got, len(graded))
	}
	t.Logf("%d graded runs gathered by 8 clients at once into one directory in %s (%d gathers copied, the rest found them there; the reader looked at %d runs)", len(graded), took.Round(time.Millisecond), fresh.Load(), looks.Load())
}
