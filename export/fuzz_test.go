package export

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// FuzzRecompute: an export a publication carries (ATIF trajectory, Inspect eval log as JSON or
// .eval) as a forger may write it, against a real run directory: never a panic, and what
// recomputes without an error is the export sealrun writes of that run, byte for byte.
func FuzzRecompute(f *testing.F) {
	r, err := transcripttest.New(f.TempDir(), start)
	if err != nil {
		f.Fatal(err)
	}
	if err := transcripttest.Window(r, 3, 0, 800, 200, nil); err != nil {
		f.Fatal(err)
	}
	r.Entry(audit.KindSealed, map[string]any{"passed": 7, "questions": 12, "score": 58.3})
	r.Close()
	run := transcript.Run{ID: "r-fuzz", Track: "ari", TrackVersion: "1", TrackID: strings.Repeat("cd", 32), Agent: "openai/gpt-x@high",
		Scaffold: "codex 0.98.0", Seed: 1, State: "graded", Started: start, Finished: start.Add(50 * time.Minute)}
	tj, t := written(f, r.Dir, run)
	src := SourceOf(tj, t, "v-fuzz")
	atif, err := ATIF(t, src)
	if err != nil {
		f.Fatal(err)
	}
	insp, err := Inspect([]Run{{T: t, Src: src}})
	if err != nil {
		f.Fatal(err)
	}
	eval, err := InspectEval([]Run{{T: t, Src: src}})
	if err != nil {
		f.Fatal(err)
	}
	good := [][]byte{atif, insp, eval}
	for _, b := range good {
		f.Add(b)
	}
	f.Add(bytes.Replace(atif, []byte(`"r-fuzz"`), []byte(`"r-other"`), 1))
	f.Add(bytes.Replace(insp, []byte(`"epoch":1`), []byte(`"epoch":2`), 1))
	f.Add(eval[:len(eval)/2])
	f.Add([]byte(`{"eval":{},"samples":[{"uuid":"x"}]}`))
	f.Add([]byte(`{"schema_version":"ATIF-v1.4","extra":{"sealrun":{"run":"r-fuzz"}}}`))
	f.Fuzz(func(t2 *testing.T, b []byte) {
		ex, err := RecomputeOf(b, tj, t, r.Dir)
		if err != nil {
			return
		}
		for _, g := range good {
			if bytes.Equal(b, g) {
				return
			}
		}
		// An Inspect log of several samples recomputes on the run's own sample only; anything
		// else that recomputed must be one of the exports above.
		if ex.Format == "inspect" || ex.Format == "inspect .eval" {
			return
		}
		t2.Fatalf("an export recomputed as %s that is none sealrun wrote: %s", fmt.Sprint(ex), b)
	})
}
