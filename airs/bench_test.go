package airs

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkValidateSuite validates a 20-task suite: upstream's when SEALRUN_AIRS_BENCH points at
// airs-bench's airsbench/tasks/rad, else 20 copies of the test tasks (target < 1 s).
func BenchmarkValidateSuite(b *testing.B) {
	root := os.Getenv("SEALRUN_AIRS_BENCH")
	var dirs []string
	if root != "" {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name()))
			}
		}
	} else {
		base := b.TempDir()
		for i := range 20 {
			src := "testdata/SentimentClassificationToyAccuracy"
			if i%2 == 1 {
				src = "testdata/MathQuestionAnsweringSVAMPAccuracy"
			}
			dst := filepath.Join(base, filepath.Base(src)+string(rune('a'+i)))
			dst = filepath.Join(dst, filepath.Base(src))
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if err := exec.Command("cp", "-r", src, filepath.Dir(dst)+"/").Run(); err != nil {
				b.Fatal(err)
			}
			dirs = append(dirs, dst)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, d := range dirs {
			if _, err := Open(d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(dirs)), "tasks")
}

// BenchmarkStageData stages a 1 GiB raw data directory (64 files of 16 MiB in 4 directories)
// into the content store and copies it with cp -r in the same run: ratio = cp's time / ours
// (target >= 0.8). Both read from the page cache; sealrun also hashes every byte and fsyncs.
func BenchmarkStageData(b *testing.B) {
	base := b.TempDir()
	src := filepath.Join(base, "raw")
	buf := make([]byte, 16<<20)
	for i := range 64 {
		d := filepath.Join(src, "repo", string(rune('a'+i%4)), "default")
		os.MkdirAll(d, 0o755)
		rand.Read(buf)
		if err := os.WriteFile(filepath.Join(d, "part-"+string(rune('a'+i/4))+".arrow"), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	exec.Command("sync").Run() // the source's own writes are not either side's to flush
	var ours, cp time.Duration
	for i := 0; b.Loop(); i++ {
		store := filepath.Join(base, "store")
		t0 := time.Now()
		if _, err := InstallTree(src, store, MaxDataFiles, MaxDataBytes); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := exec.Command("cp", "-r", src, filepath.Join(base, "cp")).Run(); err != nil {
			b.Fatal(err)
		}
		exec.Command("sync").Run()
		t2 := time.Now()
		ours, cp = ours+t1.Sub(t0), cp+t2.Sub(t1)
		os.RemoveAll(store)
		os.RemoveAll(filepath.Join(base, "cp"))
		exec.Command("sync").Run()
	}
	b.ReportMetric(ours.Seconds()/float64(b.N), "stage-s")
	b.ReportMetric(cp.Seconds()/float64(b.N), "cp-s")
	b.ReportMetric(cp.Seconds()/ours.Seconds(), "ratio")
}
