package export

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
		tj, tr2 := written(t, r.Dir, run)
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
	checkEval(t, runs, b)
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
	// The .eval form recomputes from each run's directory as well; an edited one is caught.
	z, err := InspectEval(runs)
	if err != nil {
		t.Fatal(err)
	}
	for id, dir := range dirs {
		if ex, err := Recompute(z, dir); err != nil || ex.Format != "inspect .eval" {
			t.Errorf("run %s recomputed from its directory, in the .eval: %+v %v", id, ex, err)
		}
	}
	if _, err := Recompute(bytes.Replace(z, []byte(`"epoch":2`), []byte(`"epoch":7`), 1), dirs["r-seed-2"]); err == nil {
		t.Error("an edited .eval was taken")
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

// checkEval: the .eval form of the same runs is Inspect's zip (start.json, the samples, their
// summaries, header.json, in that order), its parts the JSON log's (the header the log without
// its samples, each sample the same bytes), the same bytes each time, and verify finds each run's
// sample in it.
func checkEval(t *testing.T, runs []Run, jsonLog []byte) {
	t.Helper()
	z, err := InspectEval(runs)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := InspectEval(runs); !bytes.Equal(z, again) {
		t.Error("two .eval exports of the same runs differ")
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" {
		os.WriteFile(filepath.Join(d, "inspect-3-runs.eval"), z, 0o644)
	}
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	parts := map[string][]byte{}
	for _, f := range zr.File {
		names = append(names, f.Name)
		rc, _ := f.Open()
		parts[f.Name], _ = io.ReadAll(rc)
		rc.Close()
	}
	if got := strings.Join(names, ","); got != "_journal/start.json,samples/ari_epoch_1.json,samples/ari_epoch_2.json,samples/ari_epoch_3.json,summaries.json,header.json" {
		t.Errorf("entries %s", got)
	}
	var whole map[string]json.RawMessage
	json.Unmarshal(jsonLog, &whole)
	var samples []json.RawMessage
	json.Unmarshal(whole["samples"], &samples)
	for i, s := range samples {
		if name := fmt.Sprintf("samples/ari_epoch_%d.json", i+1); !bytes.Equal(parts[name], s) {
			t.Errorf("%s is not the JSON log's sample %d", name, i)
		}
	}
	// The header and the samples put together are the JSON log, by Inspect's rules.
	var header map[string]any
	json.Unmarshal(parts["header.json"], &header)
	if header["samples"] != nil {
		t.Error("header.json carries the samples")
	}
	var all []any
	for i := range samples {
		var s any
		json.Unmarshal(parts[fmt.Sprintf("samples/ari_epoch_%d.json", i+1)], &s)
		all = append(all, s)
	}
	header["samples"] = all
	rebuilt, _ := json.Marshal(header)
	exporttest.InspectRules(t, rebuilt)
	var sums []map[string]any
	if err := json.Unmarshal(parts["summaries.json"], &sums); err != nil || len(sums) != 3 {
		t.Fatalf("summaries.json: %v, %d", err, len(sums))
	}
	for i, s := range sums {
		if s["uuid"] != runs[i].T.Run.ID || s["epoch"] != float64(i+1) || s["id"] != "ari" || s["completed"] != (runs[i].T.Run.State != "invalid") {
			t.Errorf("summary %d: %v", i, s)
		}
		if e, ok := s["error"]; ok && e != nil {
			if _, isString := e.(string); !isString {
				t.Errorf("summary %d: its error is %T; Inspect's EvalSampleSummary takes a string", i, e)
			}
		}
	}
	for _, r := range runs {
		got, err := SampleOf(z, r.T.Run.ID)
		want, _ := InspectSample(r.T, r.Src)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("run %s's sample in the .eval: %v", r.T.Run.ID, err)
		}
	}
	if _, err := SampleOf(z, "r-nope"); err == nil || !strings.Contains(err.Error(), "no sample of run r-nope") {
		t.Errorf("a run not in the .eval: %v", err)
	}
	if _, err := SampleOf([]byte("PK\x03\x04garbage"), "r"); err == nil || !strings.Contains(err.Error(), "not a .eval log") {
		t.Errorf("a broken zip: %v", err)
	}
}

// written builds the transcript of r's run directory as run, writes it there, and loads it as an
// export reads it.
func written(tb testing.TB, dir string, run transcript.Run) ([]byte, *transcript.Transcript) {
	tb.Helper()
	tr, err := transcript.Build(dir, run, transcript.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := transcript.Write(dir, tr); err != nil {
		tb.Fatal(err)
	}
	tj, t, err := Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return tj, t
}
