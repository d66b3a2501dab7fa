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

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/ledger/witness/witnesstest"
	"github.com/sealrun/sealrun/report"
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
		rec := waitState(b, d, r.ID, api.StateGraded)
		total += time.Since(t0)
		var rep report.Exam
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
		enc.Encode(api.Event{Time: now, Run: id, Kind: "submitted", Data: data})
		for _, s := range []string{api.StatePreparing, api.StateRunning, api.StateGrading, api.StateGraded} {
			enc.Encode(api.Event{Time: now, Run: id, Kind: "state", State: s})
		}
		enc.Encode(api.Event{Time: now, Run: id, Kind: "result", Data: json.RawMessage(`{"passed":3,"questions":20}`)})
	}
	f.Close()
	d := &Daemon{cfg: &hostconfig.Config{StateDir: state}, runs: map[string]*api.Record{}, spec: map[string]RunSpec{}, subs: map[chan api.Event]string{}}
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

// BenchmarkScaffoldFirstRequest: each shipped agent's start to its first model request, inside
// the sealed controller of a real run (from the run's "running" event to the request reaching the
// provider through the gateway: container start, mounts and gateway included) vs the same image's
// entrypoint with the same rendered config run bare on the host (chroot into the image's rootfs,
// straight to the provider; also on one CPU, as the track's controller gets). Target: the seal
// adds at most 1 s to bare on one CPU (a fast CLI starts in 0.2 s, so a ratio says little).
func BenchmarkScaffoldFirstRequest(b *testing.B) {
	for _, sc := range scaffolds.All() {
		b.Run(sc.Name, func(b *testing.B) { scaffoldFirstRequest(b, sc) })
	}
}

func scaffoldFirstRequest(b *testing.B, sc *scaffolds.Scaffold) {
	tb := newTestbed(b)
	kind := sc.Kinds[0]
	keyFile := filepath.Join(tb.base, kind+".key")
	os.WriteFile(keyFile, []byte("sk-bench\n"), 0o600)
	base := tb.prov.URL
	if kind == controller.KindOpenAI {
		base += "/v1"
	}
	tb.cfg.Providers[kind] = controller.ProviderConfig{Name: kind, Kind: kind, BaseURL: base, KeyFile: keyFile}
	track, _ := shippedTrack(b, tb, sc, nil)
	tb.prov.Agent() // no tool calls: the first answer ends the session
	im := testenv.LocalImages(b)
	d, _ := images.ParsePinned(im.Refs[sc.ImageKey()])
	root, err := tb.store.Rootfs(d.DigestStr())
	if err != nil {
		b.Fatal(err)
	}
	x := tb.executor()
	x.Journal = tb.journal
	x.Entrypoint = nil
	agent := controller.Agent{Provider: kind, Model: "model-x", Effort: "high"}
	env, err := sc.Render(scaffolds.Run{Kind: kind, Gateway: tb.prov.URL, Model: agent.Model, Effort: agent.Effort})
	if err != nil {
		b.Fatal(err)
	}
	env = append(bareEnv(kind, tb.prov.URL, agent), env...)
	var sealed, bare, bare1 time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%s-%d", sc.Name, i)
		n0 := len(tb.prov.Requests())
		if _, err := x.Execute(context.Background(), RunSpec{ID: id, Track: track, Agent: agent, Seed: int64(i + 1), Queued: time.Now()}); err != nil {
			b.Fatal(err)
		}
		var running time.Time
		j, _ := OpenJournal(filepath.Join(tb.state, "journal.jsonl"), func(e api.Event) error {
			if e.Run == id && e.Kind == "state" && e.State == api.StateRunning {
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
		bare += bareScaffold(b, tb, root, env, false)
		bare1 += bareScaffold(b, tb, root, env, true)
	}
	n := float64(b.N)
	b.ReportMetric(sealed.Seconds()/n, "sealed-s")
	b.ReportMetric(bare.Seconds()/n, "bare-s")
	b.ReportMetric(sealed.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(bare1.Seconds()/n, "bare-1cpu-s")
	b.ReportMetric(sealed.Seconds()/bare1.Seconds(), "ratio-1cpu")
	b.ReportMetric((sealed-bare1).Seconds()/n, "added-s")
}

// bareEnv is what the controller's environment says (controller.Env), pointed at the provider
// itself: the bare baseline has no gateway.
func bareEnv(kind, provider string, a controller.Agent) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "SEALRUN_GATEWAY=" + provider, "SEALRUN_PROVIDER=" + a.Provider, "SEALRUN_PROVIDER_KIND=" + kind,
		"SEALRUN_MODEL=" + a.Model, "SEALRUN_EFFORT=" + a.Effort, "SEALRUN_AGENT=" + a.String(), "SEALRUN_BRIEF=/workspace/BRIEF.md"}
	switch kind {
	case controller.KindAnthropic:
		return append(env, "ANTHROPIC_BASE_URL="+provider, "ANTHROPIC_API_KEY=sk-bench")
	case controller.KindGoogle:
		return append(env, "GOOGLE_GEMINI_BASE_URL="+provider, "GEMINI_API_KEY=sk-bench")
	}
	return append(env, "OPENAI_BASE_URL="+provider+"/v1", "OPENAI_API_KEY=sk-bench")
}

// bareScaffold runs the image's entrypoint on the host, chrooted into its rootfs as the
// controller's user, in a private mount namespace (its /proc, /dev, a fresh /tmp and /workspace,
// gone when it exits), against the provider directly (on one CPU when oneCPU), and returns the
// time to its first request.
func bareScaffold(b *testing.B, tb *testbed, root string, env []string, oneCPU bool) time.Duration {
	b.Helper()
	script := `set -e; r="$1"; mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev"
mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"; mount -t tmpfs -o mode=0777 tmpfs "$r/workspace"
echo 'Say done.' > "$r/workspace/BRIEF.md"
exec chroot --userspec=1000:1000 "$r" /bin/bash ` + scaffolds.EntrypointPath
	argv := []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", root}
	if oneCPU {
		argv = append([]string{"taskset", "-c", "0"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	n1 := len(tb.prov.Requests())
	t0 := time.Now()
	// Bounded: a bare CLI that never ends must not hang the benchmark.
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	out, err := cmd.CombinedOutput()
	timer.Stop()
	reqs := tb.prov.Requests()
	if len(reqs) <= n1 {
		b.Fatalf("bare %s made no request (%v):\n%s", filepath.Base(root), err, out)
	}
	return reqs[n1].At.Sub(t0)
}

// BenchmarkRunsWithWitnesses: runs per hour of the quickest whole run (its agent submits and
// finalizes at once), one after another, with no witness, with three in network namespaces of
// their own all cosigning every head, and with all three unreachable (target: the same rate in
// all three: runs never wait for witnesses). It reports the heads the witnesses cosigned too.
func BenchmarkRunsWithWitnesses(b *testing.B) {
	for k, c := range []string{"none", "answering", "down"} {
		b.Run(c, func(b *testing.B) {
			tb := newTestbed(b)
			os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(`mkdir -p b && cp sealrun-bundle.json predict.py b/
id=$(runner submit b | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p'); runner finalize "$id"
`), 0o755)
			hostPub, _ := tb.verifier.PublicKey()
			for i := range 3 {
				n := 30 + 3*k + i
				switch c {
				case "answering":
					w := witnesstest.ServeOn(b, newWitnessNet(b, n, true).listen(b), fmt.Sprintf("witness.test/w%d", i), ledgerOrigin(tb.cfg), hostPub)
					tb.cfg.Witnesses = append(tb.cfg.Witnesses, hostconfig.WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: w.URL, Key: w.Key})
				case "down":
					dn := newWitnessNet(b, n, false)
					_, key, _ := witness.GenerateKey(fmt.Sprintf("witness.test/w%d", i))
					tb.cfg.Witnesses = append(tb.cfg.Witnesses, hostconfig.WitnessConfig{Name: fmt.Sprintf("w%d", i), URL: "http://" + dn.ip + ":8080", Key: key})
				}
			}
			d := startDaemon(b, tb, tb.executor())
			b.ResetTimer()
			t0 := time.Now()
			for i := range b.N {
				r, err := d.Submit([]byte(tb.trackTOML), "bench.toml", "openai/gpt-x@high", int64(i+1), false, "bench")
				if err != nil {
					b.Fatal(err)
				}
				waitState(b, d, r.ID, api.StateGraded)
			}
			el := time.Since(t0)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Hours(), "runs/h")
			if d.witnesses != nil {
				var held uint64
				for _, st := range d.witnesses.Status() {
					held += st.Held
				}
				b.ReportMetric(float64(held)/float64(len(tb.cfg.Witnesses)), "held-size")
			}
		})
	}
}
