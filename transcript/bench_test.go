package transcript_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// The synthetic hour of make bench: 2,000 model turns by a scaffold that keeps its system prompt
// (48 KiB), the task and its last 120 turns, each call printing 300 bytes: about 200 MB of
// request and response bodies, as the audit log counts them.
const (
	benchTurns  = 2000
	benchWindow = 120
	benchSystem = 48 << 10
	benchResult = 300
)

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// benchRun writes the synthetic run once per process (about a minute), under the system's
// temporary directory, removed at the end of the benchmarks' process by TestMain's caller.
func benchRun(b *testing.B) string {
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "sealrun-bench-transcript-")
		if benchErr != nil {
			return
		}
		var r *transcripttest.Run
		if r, benchErr = transcripttest.New(filepath.Join(benchDir, "run"), start); benchErr != nil {
			return
		}
		benchErr = transcripttest.Window(r, benchTurns, benchWindow, benchSystem, benchResult, nil)
		r.Close()
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return filepath.Join(benchDir, "run")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readBodiesOnce reads every kept body of the run once, as any reader of them must: each file
// under gateway/ and calls/ decompressed where gzipped (one gzip reader, reset onto each), and
// hashed.
func readBodiesOnce(b *testing.B, dir string) {
	var zr *gzip.Reader
	for _, sub := range []string{"gateway", "calls"} {
		filepath.Walk(filepath.Join(dir, sub), func(p string, fi os.FileInfo, err error) error {
			if err != nil || !fi.Mode().IsRegular() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var r io.Reader = f
			if strings.HasSuffix(p, ".gz") {
				if zr == nil {
					zr, err = gzip.NewReader(f)
				} else {
					err = zr.Reset(f)
				}
				if err != nil {
					b.Fatal(p, err)
				}
				r = zr
			}
			h := sha256.New()
			if _, err := io.Copy(h, r); err != nil {
				b.Fatal(p, err)
			}
			return nil
		})
	}
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// BenchmarkBuild2000Turns: reading the synthetic hour (every body decompressed and hashed, every
// request read into messages) into transcript.json and transcript.html; their sizes against the
// bodies'.
//
// And the CPU it takes (build-cpu-s: Build alone, as the process's user and system time) beside
// the floor every reader pays, reading every kept body once: decompressed and hashed (read-cpu-s;
// target: Build at most 1 s beyond it, beyond-s).
func BenchmarkBuild2000Turns(b *testing.B) {
	dir := benchRun(b)
	out := b.TempDir()
	var tr *transcript.Transcript
	var build, read time.Duration
	b.ResetTimer()
	for b.Loop() {
		var err error
		c0 := cpuTime()
		if tr, err = transcript.Build(dir, header(), transcript.Options{}); err != nil {
			b.Fatal(err)
		}
		c1 := cpuTime()
		if err := transcript.Write(out, tr); err != nil {
			b.Fatal(err)
		}
		c2 := cpuTime()
		readBodiesOnce(b, dir)
		build, read = build+c1-c0, read+cpuTime()-c2
	}
	b.StopTimer()
	if c := tr.Bodies; c.Intact == 0 || c.Withheld+c.Missing+c.Altered > 0 {
		b.Fatalf("bodies %+v: the build did not read them all intact", c)
	}
	b.ReportMetric(build.Seconds()/float64(b.N), "build-cpu-s")
	b.ReportMetric(read.Seconds()/float64(b.N), "read-cpu-s")
	b.ReportMetric((build-read).Seconds()/float64(b.N), "beyond-s")
	j, _ := os.Stat(filepath.Join(out, "transcript.json"))
	h, _ := os.Stat(filepath.Join(out, "transcript.html"))
	kept := dirBytes(filepath.Join(dir, "gateway")) + dirBytes(filepath.Join(dir, "calls"))
	b.ReportMetric(float64(tr.Totals.Exchanges), "turns")
	b.ReportMetric(float64(tr.Totals.BodyBytes)/1e6, "bodies-MB")
	b.ReportMetric(float64(kept)/1e6, "kept-gz-MB")
	b.ReportMetric(float64(j.Size())/1e6, "json-MB")
	b.ReportMetric(float64(h.Size())/1e6, "html-MB")
	b.ReportMetric(float64(h.Size())/float64(tr.Totals.BodyBytes), "html/bodies")
}

// BenchmarkOpenInChromium: the time a transcript.html takes to open in Chromium from a file://
// URL — its first contentful paint and the moment its rows are drawn (the page's own mark) —
// and how smoothly it scrolls from top to bottom (the longest frame while scrolling). The
// synthetic hour, then each page SEALRUN_BENCH_PAGES names (colon-separated; make bench passes
// the demos' publications when they exist).
func BenchmarkOpenInChromium(b *testing.B) {
	dir := benchRun(b)
	out := b.TempDir()
	tr, err := transcript.Build(dir, header(), transcript.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := transcript.Write(out, tr); err != nil {
		b.Fatal(err)
	}
	pages := []string{filepath.Join(out, "transcript.html"), humanHourPage(b)}
	if env := os.Getenv("SEALRUN_BENCH_PAGES"); env != "" {
		pages = append(pages, strings.Split(env, ":")...)
	}
	br := browsertest.New(b)
	for i, p := range pages {
		name := "synthetic-2000"
		switch {
		case i == 1:
			name = "human-hour"
		case i > 1:
			name = filepath.Base(filepath.Dir(p))
		}
		b.Run(name, func(b *testing.B) {
			var paint, ready, worst []float64
			for b.Loop() {
				if err := br.Do(120*time.Second, chromedp.Navigate("about:blank"), chromedp.Navigate("file://"+p), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
					b.Fatal(err)
				}
				// The paint entry is recorded once the frame is shown: wait for it (at most 5 s).
				t, err := browsertest.Eval[struct{ Paint, Ready float64 }](br, `new Promise(function (done) {
				  var t0 = performance.now();
				  (function look() {
				    var p = performance.getEntriesByName('first-contentful-paint')[0], r = performance.getEntriesByName('sealrun-ready')[0];
				    if ((p && r) || performance.now() - t0 > 5000) { done({paint: p ? p.startTime : -1, ready: r ? r.startTime : -1}); return; }
				    requestAnimationFrame(look);
				  })();
				})`)
				if err != nil {
					b.Fatal(err)
				}
				// Scroll from top to bottom in 40 steps, one a frame, and time the frames.
				frame, err := browsertest.Eval[float64](br, `new Promise(function (done) {
				  var steps = 40, i = 0, last = performance.now(), worst = 0, H = document.body.scrollHeight;
				  function tick(now) { worst = Math.max(worst, now - last); last = now;
				    if (++i > steps) { done(worst); return; } window.scrollTo(0, H * i / steps); requestAnimationFrame(tick); }
				  requestAnimationFrame(function (now) { last = now; requestAnimationFrame(tick); });
				})`)
				if err != nil {
					b.Fatal(err)
				}
				paint, ready, worst = append(paint, t.Paint), append(ready, t.Ready), append(worst, frame)
			}
			if name == "human-hour" {
				// The player: the screen halfway through the hour, from the slider.
				seek, err := browsertest.Eval[float64](br, `(function(){var p=document.getElementById('tpos'),t0=performance.now();p.value=String(Math.round(Number(p.max)/2));p.dispatchEvent(new Event('input'));return performance.now()-t0;})()`)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(seek, "player-seek-ms")
			}
			fi, _ := os.Stat(p)
			b.ReportMetric(median(paint), "first-paint-ms")
			b.ReportMetric(median(ready), "drawn-ms")
			b.ReportMetric(median(worst), "worst-scroll-frame-ms")
			b.ReportMetric(float64(fi.Size())/1e6, "html-MB")
		})
	}
}

// humanHourPage is the page of a synthetic human run's hour: a command every 20 s typed at 5 keys
// a second (each key echoed), 2 KiB of output each, and a 20-minute training call printing a line
// a second, recorded as sealrun records it.
func humanHourPage(b *testing.B) string {
	r := newRun(b)
	rec, err := controller.NewRecording(r.Dir, r.Log(), start, 120, 40, "r-test", 0)
	if err != nil {
		b.Fatal(err)
	}
	out := bytes.Repeat([]byte("\x1b[32mok\x1b[0m output of the command, a line of it\r\n"), 2048/48)
	for c := 0; c < 180; c++ {
		t0 := float64(c * 20)
		for k, ch := range "runner python3 train.py --x 1" {
			rec.Input([]byte(string(ch)), at(t0+float64(k)/5))
			rec.Output([]byte(string(ch)), at(t0+float64(k)/5+0.002))
		}
		rec.Output(out, at(t0+7))
		if c%12 == 0 {
			rec.Flush()
		}
	}
	for i := 0; i < 1200; i++ {
		rec.Output([]byte(fmt.Sprintf("step %d loss %.4f\r\n", i, 3/float64(i+1))), at(1800+float64(i)))
	}
	if err := rec.Close(at(3600)); err != nil {
		b.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := transcript.Write(dir, tr); err != nil {
		b.Fatal(err)
	}
	return filepath.Join(dir, "transcript.html")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
