package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
