package grader

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func meanMS(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(ds))
}

func p50MS(ds []time.Duration) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// benchAnswers grades one phase of 100 synthetic questions with the bundle file, b.N times.
func benchAnswers(b *testing.B, file string) {
	e := testEnv(b, 10*time.Second)
	ex := synthExam(b, b.TempDir(), 21, 100)
	u, err := e.Prepare(context.Background(), file, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(u.Dir)
	logs := b.TempDir()
	var per []time.Duration
	var phase time.Duration
	b.ResetTimer()
	for range b.N {
		a, err := e.Answer(context.Background(), u, QuestionsOf(ex), time.Now().Add(time.Minute), logs, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if a.Restarts > 0 {
			b.Fatalf("restarts: %s", a.FirstNote)
		}
		per = append(per, a.Times...)
		phase += a.Elapsed
	}
	b.ReportMetric(meanMS(per), "question-ms")
	b.ReportMetric(p50MS(per), "question-p50-ms")
	b.ReportMetric(float64(phase.Milliseconds())/float64(b.N), "phase-ms")
}

// BenchmarkHarnessPerQuestion: the grading harness's own cost per question — request written,
// the entrypoint's line read back, judged and logged — with a static entrypoint that answers at
// once (target <= 1 ms per question).
func BenchmarkHarnessPerQuestion(b *testing.B) {
	benchAnswers(b, fastBundle(b))
}

// BenchmarkExampleBundle: 100 questions with grader/example (pure Python copy model, CPU).
func BenchmarkExampleBundle(b *testing.B) {
	ws := b.TempDir()
	os.MkdirAll(filepath.Join(ws, "example"), 0o755)
	for _, n := range []string{ManifestName, "predict.py"} {
		data, err := os.ReadFile(filepath.Join("example", n))
		if err != nil {
			b.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "example", n), data, 0o644)
	}
	c, err := Pack(context.Background(), ws, "example", b.TempDir(), DefaultLimits(16<<20))
	if err != nil {
		b.Fatal(err)
	}
	benchAnswers(b, c.Path)
}

// BenchmarkPackVsTar: packing a 16 MiB bundle (float32 weights, as a model's are) against
// `tar -czf` of the same directory, alternating in one run (target >= 0.8x).
func BenchmarkPackVsTar(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Skip("tar is not installed")
	}
	ws := b.TempDir()
	dir := filepath.Join(ws, "b")
	os.MkdirAll(dir, 0o755)
	r := rand.New(rand.NewPCG(1, 2))
	w := make([]byte, 16<<20-4096)
	for i := 0; i+4 <= len(w); i += 4 {
		binary.LittleEndian.PutUint32(w[i:], math.Float32bits(float32(r.NormFloat64()*0.02)))
	}
	os.WriteFile(filepath.Join(dir, "weights.bin"), w, 0o644)
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(manifestJSON), 0o644)
	os.WriteFile(filepath.Join(dir, "predict.py"), []byte("print('hi')\n"), 0o644)
	out := b.TempDir()
	var ours, theirs []time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		c, err := Pack(context.Background(), ws, "b", filepath.Join(out, "c"), Limits{MaxGzipBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(t0))
		size = c.Size
		os.Remove(c.Path)
		t0 = time.Now()
		if o, err := exec.Command("tar", "-C", dir, "-czf", filepath.Join(out, "t.tar.gz"), ".").CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, o)
		}
		theirs = append(theirs, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(ours, func(i, j int) bool { return ours[i] < ours[j] })
	sort.Slice(theirs, func(i, j int) bool { return theirs[i] < theirs[j] })
	o, t := ours[len(ours)/2], theirs[len(theirs)/2]
	b.ReportMetric(float64(o.Microseconds())/1000, "pack-ms")
	b.ReportMetric(float64(t.Microseconds())/1000, "tar-ms")
	b.ReportMetric(float64(t)/float64(o), "ratio")
	b.ReportMetric(float64(size)/(1<<20), "gz-MiB")
}
