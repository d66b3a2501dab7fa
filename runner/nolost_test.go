package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/testenv"
)

// outputCase is one compute call whose every output byte is known in advance.
type outputCase struct {
	argv []string
	want []byte
	code int
}

// seqBytes is what seq 1 n prints.
func seqBytes(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// outputCases cycles through short outputs, long ones written right up to the exit, exit codes,
// and output on both streams (one pipe inside, so their order is kept).
func outputCases(run, call int) outputCase {
	tag := fmt.Sprintf("run %d call %d", run, call)
	switch call % 5 {
	case 0:
		return outputCase{[]string{"echo", tag}, []byte(tag + "\n"), 0}
	case 1:
		return outputCase{[]string{"sh", "-c", "echo " + tag + "; seq 1 20000"}, append([]byte(tag+"\n"), seqBytes(20000)...), 0}
	case 2:
		return outputCase{[]string{"sh", "-c", "printf '" + tag + "'; exit 3"}, []byte(tag), 3}
	case 3:
		return outputCase{[]string{"sh", "-c", "echo " + tag + " >&2; seq 1 100000"}, append([]byte(tag+"\n"), seqBytes(100000)...), 0}
	default:
		return outputCase{[]string{"python3", "-c", "import sys; sys.stdout.write('" + tag + "\\n' * 3); sys.stdout.flush(); sys.exit(5)"}, bytes.Repeat([]byte(tag+"\n"), 3), 5}
	}
}

// checkCall compares what the agent received, the call's log and its audit entry with the bytes
// the call wrote.
func (f *fixture) checkCall(t *testing.T, n int, c outputCase, got result, e audit.Call) bool {
	t.Helper()
	sum := sha256.Sum256(c.want)
	want := hex.EncodeToString(sum[:])
	logged, err := os.ReadFile(filepath.Join(f.calls, strconv.Itoa(n)+".log"))
	switch {
	case got.code != c.code:
		tail := got.stdout[max(0, len(got.stdout)-200):]
		t.Errorf("call %d %v: exit %d, want %d (stderr %q; %d of %d bytes received, ending %q; audit: status %q exit %d error %q container %s)",
			n, c.argv, got.code, c.code, got.stderr, len(got.stdout), len(c.want), tail, e.Status, e.Exit, e.Error, e.Container)
	case got.stdout != string(c.want):
		t.Errorf("call %d %v: the agent received %d bytes, the call wrote %d", n, c.argv, len(got.stdout), len(c.want))
	case err != nil || !bytes.Equal(logged, c.want):
		t.Errorf("call %d %v: the call log holds %d bytes (%v), the call wrote %d", n, c.argv, len(logged), err, len(c.want))
	case e.OutputBytes != int64(len(c.want)) || string(e.OutputSHA256) != want:
		t.Errorf("call %d %v: the audit says %d bytes %s, the call wrote %d %s", n, c.argv, e.OutputBytes, e.OutputSHA256, len(c.want), want)
	default:
		return true
	}
	return false
}

// No output is ever lost (issue 28): compute calls of several runs at once, short and long
// outputs, output right before the exit, and calls killed at their limit; every byte each call
// wrote is compared with what the agent received, the call log and the audit's output_bytes and
// output_sha256. SEALRUN_TEST_OUTPUT_CALLS sets the number of calls (default 1,000,
// as make test's runc stage runs it; its crun and gVisor stages run 300, the emulated cgroup v2
// guest 100: the same paths, fewer times).
func TestNoOutputLost(t *testing.T) {
	total := 1000
	if s := os.Getenv("SEALRUN_TEST_OUTPUT_CALLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("SEALRUN_TEST_OUTPUT_CALLS=%q: give a number of calls, at least 10", s)
		}
		total = n
	}
	const runs, limited = 3, 6
	perRun := (total - limited + runs - 1) / runs
	var (
		wg               sync.WaitGroup
		mu               sync.Mutex
		calls, mismatchN int
	)
	count := func(ok bool) {
		mu.Lock()
		calls++
		if !ok {
			mismatchN++
		}
		mu.Unlock()
	}
	start := time.Now()
	for ri := 0; ri < runs; ri++ {
		// Calls back to back, faster than the agent socket lets an agent go (10 a second): under
		// crun a call takes ~35 ms, and the limiter refused a third of them (its test is
		// TestRateLimit). What is checked here is every byte of every call.
		f := newFixture(t, WithRate(1000, 1000))
		wg.Add(1)
		go func(ri int) {
			defer wg.Done()
			for i := 0; i < perRun; i++ {
				c := outputCases(ri, i)
				got := f.runner(c.argv...)
				es := f.entries()
				count(f.checkCall(t, i+1, c, got, es[len(es)-1]))
			}
		}(ri)
	}
	// Calls killed at their limit: what they wrote before the kill arrives whole. The limit, 8 s
	// (stretched on slow machines), leaves the container time to start and seq time to finish on
	// a loaded host (CI runs packages in parallel): with 2 s, a call was once killed before seq
	// had written anything, which is a limit doing its job, not output lost.
	lim := newFixture(t)
	lim.clock.set(lim.rc.Started().Add(55*time.Minute - time.Duration(8*testenv.Slow())*time.Second))
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < limited; i++ {
			c := outputCase{[]string{"sh", "-c", "seq 1 30000; sleep 60"}, seqBytes(30000), ExitLimit}
			got := lim.runner(c.argv...)
			es := lim.entries()
			ok := lim.checkCall(t, i+1, c, got, es[len(es)-1])
			if !es[len(es)-1].LimitHit {
				t.Errorf("limited call %d: not marked as killed at its limit: %+v", i+1, es[len(es)-1])
				ok = false
			}
			count(ok)
		}
	}()
	wg.Wait()
	t.Logf("%d compute calls (%d runs at once, %d killed at their limit) in %v: %d mismatches", calls, runs+1, limited, time.Since(start).Round(time.Second), mismatchN)
	if calls < total {
		t.Errorf("only %d of %d calls ran", calls, total)
	}
}
