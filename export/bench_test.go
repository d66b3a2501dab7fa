package export

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// BenchmarkExport2000Turns: the synthetic hour (2,000 model turns, the scaffold keeping its last
// 120, a 48 KiB system prompt: transcript's own benchmark run) exported from its transcript.json
// — read, decoded, written — as ATIF and as an Inspect eval log (target: under 2 s each).
func BenchmarkExport2000Turns(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "run")
	r, err := transcripttest.New(dir, start)
	if err != nil {
		b.Fatal(err)
	}
	if err := transcripttest.Window(r, 2000, 120, 48<<10, 300, nil); err != nil {
		b.Fatal(err)
	}
	r.Close()
	tr, err := transcript.Build(dir, transcript.Run{ID: "r-hour", Track: "ari", Agent: "openai/gpt-x@high", Scaffold: "codex 0.98.0", Seed: 1, State: "graded",
		Started: start, Finished: start.Add(3600e9)}, transcript.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := transcript.Write(dir, tr); err != nil {
		b.Fatal(err)
	}
	tjSize := fileSize(filepath.Join(dir, TranscriptFile))
	for _, format := range []string{"atif", "inspect"} {
		b.Run(format, func(b *testing.B) {
			var n int
			for b.Loop() {
				tj, t, err := Load(dir)
				if err != nil {
					b.Fatal(err)
				}
				src := SourceOf(tj, t, "bench")
				var out []byte
				if format == "atif" {
					out, err = ATIF(t, src)
				} else {
					out, err = Inspect([]Run{{T: t, Src: src}})
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(b.TempDir(), "out.json"), out, 0o644); err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n)/1e6, "out-MB")
			b.ReportMetric(float64(tjSize)/1e6, "transcript-MB")
		})
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}
