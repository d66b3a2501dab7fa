package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/scaffolds"
)

// BenchmarkRunOverhead: a whole sealed run whose agent finalizes at once, from submission to the
// attestation written, minus the grading compute (both phases, from report.json): the harness's
// own cost per run (target <= 2 s).
func BenchmarkRunOverhead(b *testing.B) {
	tb := newTestbed(b)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(`mkdir -p b && cp sealrun-bundle.json predict.py b/
id=$(runner submit b | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p'); runner finalize "$id"
`), 0o755)
	x := tb.executor()
	d := startDaemon(b, tb, x)
	var total, grading, validation time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		r, err := d.Submit([]byte(tb.trackTOML), "bench.toml", "openai/gpt-x@high", int64(i+1), false, "bench")
		if err != nil {
			b.Fatal(err)
		}
		rec := waitState(b, d, r.ID, StateGraded)
		total += time.Since(t0)
		var rep struct {
			Timings struct {
				AnswersMS int64 `json:"answers_ms"`
				BitsMS    int64 `json:"bits_ms"`
			} `json:"timings"`
		}
		json.Unmarshal(mustRead(b, filepath.Join(rec.Dir, "report.json")), &rep)
		grading += time.Duration(rep.Timings.AnswersMS+rep.Timings.BitsMS) * time.Millisecond
		// The validation scoring at submit is grading compute too.
		for _, l := range strings.Split(string(mustRead(b, filepath.Join(rec.Dir, "grading", "validation-1", "validation.jsonl"))), "\n") {
			var q struct{ MS float64 }
			if json.Unmarshal([]byte(l), &q) == nil {
				validation += time.Duration(q.MS * float64(time.Millisecond))
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(total.Seconds()/n, "run-s")
	b.ReportMetric(grading.Seconds()/n, "grading-s")
	b.ReportMetric(validation.Seconds()/n, "validation-answers-s")
	b.ReportMetric((total-grading-validation).Seconds()/n, "overhead-s")
}

// BenchmarkPs10k: the admin API's run list with 10,000 runs in the journal (target <= 100 ms),
// and the daemon's start (journal replay) with them.
func BenchmarkPs10k(b *testing.B) {
	state := b.TempDir()
	os.MkdirAll(filepath.Join(state, "runs"), 0o711)
	track := string(mustRead(b, "../tracks/demo.toml"))
	f, _ := os.Create(filepath.Join(state, "journal.jsonl"))
	enc := json.NewEncoder(f)
	now := time.Now().UTC()
	for i := range 10000 {
		id := fmt.Sprintf("r-20261122-000000-%06x", i)
		data, _ := json.Marshal(submitted{Track: track, Agent: "openai/gpt-x@high", Seed: int64(i), User: "bench"})
		enc.Encode(Event{Time: now, Run: id, Kind: "submitted", Data: data})
		for _, s := range []string{StatePreparing, StateRunning, StateGrading, StateGraded} {
			enc.Encode(Event{Time: now, Run: id, Kind: "state", State: s})
		}
		enc.Encode(Event{Time: now, Run: id, Kind: "result", Data: json.RawMessage(`{"passed":3,"questions":20}`)})
	}
	f.Close()
	d := &Daemon{cfg: &Config{StateDir: state}, runs: map[string]*Record{}, spec: map[string]RunSpec{}, subs: map[chan Event]string{}}
	t0 := time.Now()
	j, err := OpenJournal(filepath.Join(state, "journal.jsonl"), d.apply)
	if err != nil {
		b.Fatal(err)
	}
	replay := time.Since(t0)
	j.Close()
	h := d.Handler()
	b.ResetTimer()
	var ps, psAll time.Duration
	get := func(path string) time.Duration {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		io.Copy(io.Discard, rec.Body)
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
		return time.Since(t0)
	}
	for range b.N {
		ps += get("/v1/runs?active=1")
		psAll += get("/v1/runs")
	}
	b.ReportMetric(float64(ps.Microseconds())/1000/float64(b.N), "ps-ms")
	b.ReportMetric(float64(psAll.Microseconds())/1000/float64(b.N), "ps-all-ms")
	b.ReportMetric(float64(replay.Milliseconds()), "replay-ms")
}

// BenchmarkOpencodeFirstRequest: opencode's start to its first model request, inside the sealed
// controller of a real run (from the run's "running" event to the request reaching the provider
// through the gateway) vs the same binary run bare on the host against the provider directly
// (target: ratio <= 1.2x).
func BenchmarkOpencodeFirstRequest(b *testing.B) {
	tb := newTestbed(b)
	track, _ := opencodeTrack(b, tb)
	tb.prov.Agent() // no tool calls: the first answer ends the session
	im := testenv.LocalImages(b)
	d, _ := images.ParsePinned(im.Refs["controller-opencode"])
	root, err := tb.store.Rootfs(d.DigestStr())
	if err != nil {
		b.Fatal(err)
	}
	x := tb.executor()
	x.Journal = tb.journal
	x.Entrypoint = nil
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	oc, _ := scaffolds.Lookup("opencode")
	env, err := oc.Render(scaffolds.Run{Kind: "openai", Gateway: tb.prov.URL, Model: "gpt-x", Effort: "high"})
	if err != nil {
		b.Fatal(err)
	}
	cfg := strings.TrimPrefix(env[0], "OPENCODE_CONFIG_CONTENT=")
	var sealed, bare, bare1 time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-opencode-%d", i)
		n0 := len(tb.prov.Requests())
		if _, err := x.Execute(context.Background(), RunSpec{ID: id, Track: track, Agent: agent, Seed: int64(i + 1), Queued: time.Now()}); err != nil {
			b.Fatal(err)
		}
		var running time.Time
		j, _ := OpenJournal(filepath.Join(tb.state, "journal.jsonl"), func(e Event) error {
			if e.Run == id && e.Kind == "state" && e.State == StateRunning {
				running = e.Time
			}
			return nil
		})
		j.Close()
		reqs := tb.prov.Requests()
		if len(reqs) <= n0 || running.IsZero() {
			b.Fatalf("run %s: no model request (%d) or no running event", id, len(reqs)-n0)
		}
		sealed += reqs[n0].At.Sub(running)

		bare += bareOpencode(b, tb, root, cfg, false)
		bare1 += bareOpencode(b, tb, root, cfg, true)
	}
	n := float64(b.N)
	b.ReportMetric(sealed.Seconds()/n, "sealed-s")
	b.ReportMetric(bare.Seconds()/n, "bare-s")
	b.ReportMetric(sealed.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(bare1.Seconds()/n, "bare-1cpu-s")
	b.ReportMetric(sealed.Seconds()/bare1.Seconds(), "ratio-1cpu")
}

// bareOpencode runs the image's opencode binary on the host against the fake provider directly
// (on one CPU, as the track's controller gets, when oneCPU) and returns the time to its first
// request.
func bareOpencode(b *testing.B, tb *testbed, root, cfg string, oneCPU bool) time.Duration {
	b.Helper()
	base := b.TempDir()
	home, tmp := filepath.Join(base, "home"), filepath.Join(base, "tmp")
	os.MkdirAll(filepath.Join(home, ".config/opencode/node_modules"), 0o755)
	os.MkdirAll(tmp, 0o755)
	argv := []string{filepath.Join(root, "usr/local/bin/opencode"), "run", "--pure", "--title", "bench"}
	if oneCPU {
		argv = append([]string{"taskset", "-c", "0"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = b.TempDir()
	cmd.Stdin = strings.NewReader("Say done.")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "TMPDIR=" + tmp, "XDG_CONFIG_HOME=" + home + "/.config",
		"XDG_DATA_HOME=" + home + "/.local/share", "XDG_STATE_HOME=" + home + "/.local/state", "XDG_CACHE_HOME=" + home + "/.cache", "NO_COLOR=1", "TERM=dumb", "OPENCODE_CONFIG_CONTENT=" + cfg,
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_PROJECT_CONFIG=1", "OPENCODE_DISABLE_EXTERNAL_SKILLS=1", "OPENCODE_DISABLE_CLAUDE_CODE=1"}
	n1 := len(tb.prov.Requests())
	t0 := time.Now()
	// Bounded: a bare opencode that never ends must not hang the benchmark.
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	if err != nil {
		b.Fatalf("bare opencode: %v\n%s", err, out)
	}
	reqs := tb.prov.Requests()
	if len(reqs) <= n1 {
		b.Fatal("bare opencode made no request")
	}
	return reqs[n1].At.Sub(t0)
}
