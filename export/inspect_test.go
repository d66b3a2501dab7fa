package export

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// Three runs of one track and agent, one of them invalid, as one Inspect eval log, by the rules
// written from Inspect's models; each run's sample recomputes from its run directory alone.
func TestInspect(t *testing.T) {
	var runs []Run
	dirs := map[string]string{}
	for seed := 1; seed <= 3; seed++ {
		r, err := transcripttest.New(t.TempDir(), start)
		if err != nil {
			t.Fatal(err)
		}
		if err := transcripttest.Window(r, 3+seed, 0, 800, 200, nil); err != nil {
			t.Fatal(err)
		}
		r.Entry(audit.KindValidation, map[string]any{"candidate": strings.Repeat("ab", 32), "passed": 5, "questions": 12, "score": 41.7})
		state := "graded"
		if seed == 3 {
			state = "invalid"
		} else {
			r.Entry(audit.KindSealed, map[string]any{"passed": 6 + seed, "questions": 12, "score": float64(6+seed) * 100 / 12})
		}
		r.Close()
		run := transcript.Run{ID: fmt.Sprintf("r-seed-%d", seed), Track: "ari", TrackVersion: "1", TrackID: strings.Repeat("cd", 32), Agent: "openai/gpt-x@high",
			Scaffold: "codex 0.98.0", Seed: int64(seed), State: state, Started: start, Finished: start.Add(50 * time.Minute)}
		if state == "invalid" {
			run.Reason = "the host ran out of disk"
		}
		tr, err := transcript.Build(r.Dir, run, transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := transcript.Write(r.Dir, tr); err != nil {
			t.Fatal(err)
		}
		tj, tr2, err := Load(r.Dir)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, Run{T: tr2, Src: SourceOf(tj, tr2, "v-test")})
		dirs[run.ID] = r.Dir
	}
	b, err := Inspect(runs)
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" { // for a check by hand with Inspect's own schema
		os.WriteFile(filepath.Join(d, "inspect-3-runs.json"), b, 0o644)
	}
	log := exporttest.InspectRules(t, b)
	samples := log["samples"].([]any)
	if len(samples) != 3 {
		t.Fatalf("%d samples", len(samples))
	}
	for i, sv := range samples {
		s := sv.(map[string]any)
		scored := s["scores"] != nil
		if (i < 2) != scored {
			t.Errorf("sample %d (seed %v): scored %v; the invalid run has no score, the others theirs", i, s["epoch"], scored)
		}
		if i == 2 && s["error"] == nil {
			t.Errorf("the invalid run's sample carries no error")
		}
	}
	res := fmt.Sprint(log["results"])
	if !strings.Contains(res, "completed_samples:2") || !strings.Contains(res, "scored_samples:2") {
		t.Errorf("results %s", res)
	}
	for id, dir := range dirs {
		if ex, err := Recompute(b, dir); err != nil || ex.Format != "inspect" {
			t.Errorf("run %s recomputed from its directory: %+v %v", id, ex, err)
		}
	}
	// An edited sample is caught; a run the log does not hold is named.
	edited := bytes.Replace(b, []byte(`"epoch":2`), []byte(`"epoch":7`), 1)
	if _, err := Recompute(edited, dirs["r-seed-2"]); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Errorf("an edited sample: %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, TranscriptFile), mustMarshal(t, &transcript.Transcript{Format: transcript.Format, Run: transcript.Run{ID: "r-other"}}), 0o644)
	if _, err := Recompute(b, other); err == nil || !strings.Contains(err.Error(), "no sample of run r-other") {
		t.Errorf("a run the log does not hold: %v", err)
	}
	// Another track or agent is refused, not mixed in.
	runs[1].T.Run.Agent = "anthropic/claude"
	if _, err := Inspect(runs); err == nil || !strings.Contains(err.Error(), "another track or agent") {
		t.Errorf("two agents in one log: %v", err)
	}
	t.Logf("3 runs: %d bytes", len(b))
}

func mustMarshal(t *testing.T, tr *transcript.Transcript) []byte {
	b, err := transcript.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A run that ended before it started (no events, no times: invalid at preparation) still
// exports, by each format's rules.
func TestExportEmptyRun(t *testing.T) {
	tr := &transcript.Transcript{Format: transcript.Format, Run: transcript.Run{ID: "r-empty", Track: "ari", Agent: "m", State: "invalid", Reason: "the image did not unpack"}}
	tj := mustMarshal(t, tr)
	src := SourceOf(tj, tr, "v")
	a, err := ATIF(tr, src)
	if err != nil {
		t.Fatal(err)
	}
	exporttest.ATIFRules(t, a)
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" {
		os.WriteFile(filepath.Join(d, "atif-empty.json"), a, 0o644)
	}
	i, err := Inspect([]Run{{T: tr, Src: src}})
	if err != nil {
		t.Fatal(err)
	}
	exporttest.InspectRules(t, i)
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" {
		os.WriteFile(filepath.Join(d, "inspect-empty.json"), i, 0o644)
	}
}
