package export

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Inspect's .eval form of an eval log: a zip of the log's parts, as Inspect's own eval recorder
// writes them (inspect_ai/log/_recorders/eval.py): _journal/start.json (version, eval, plan),
// one samples/ID_epoch_N.json per sample, summaries.json (a summary of each), and header.json
// (the log without its samples). Entries are stored, not compressed, in a fixed order and with
// the eval's completion as their time, so that the same runs always give the same bytes (sealrun
// verify --export recomputes them).

// InspectEval is runs (all of one InspectGroup) as one Inspect eval log in its .eval form. Two
// runs of one seed (an invalid run and its rerun) are one sample there, as Inspect reads a
// sample id and epoch once: the later run's.
func InspectEval(runs []Run) ([]byte, error) {
	log, err := inspectLogOf(runs)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	mod, _ := time.Parse(time.RFC3339, requiredTime(runs[len(runs)-1].T.Run.Finished))
	if mod.Year() < 1980 {
		mod = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	put := func(name string, v any) error {
		b, ok := v.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(v); err != nil {
				return fmt.Errorf("encode %s: %w", name, err)
			}
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store, Modified: mod.UTC()})
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if err := put("_journal/start.json", map[string]any{"version": log.Version, "eval": log.Eval, "plan": log.Plan}); err != nil {
		return nil, err
	}
	var summaries []map[string]any
	seen := map[string]int{}
	for _, s := range log.Samples {
		var smp map[string]any
		if err := json.Unmarshal(s, &smp); err != nil {
			return nil, fmt.Errorf("a sample of the eval log: %w", err)
		}
		epoch, _ := smp["epoch"].(float64)
		name := fmt.Sprintf("samples/%v_epoch_%s.json", smp["id"], strconv.FormatFloat(epoch, 'f', -1, 64))
		if err := put(name, []byte(s)); err != nil {
			return nil, err
		}
		sum := map[string]any{"message_count": len(asSlice(smp["messages"]))}
		for _, k := range []string{"id", "epoch", "input", "target", "metadata", "scores", "model_usage", "role_usage", "started_at", "completed_at",
			"total_time", "working_time", "uuid", "error", "limit", "retries"} {
			sum[k] = smp[k]
		}
		// A summary's error and limit are strings (EvalSampleSummary), a sample's objects.
		if e, ok := smp["error"].(map[string]any); ok {
			sum["error"] = e["message"]
		}
		if l, ok := smp["limit"].(map[string]any); ok {
			sum["limit"] = l["type"]
		}
		sum["completed"] = smp["error"] == nil
		if i, ok := seen[name]; ok {
			summaries[i] = sum // the later run of the seed: Inspect keeps the last
			continue
		}
		seen[name] = len(summaries)
		summaries = append(summaries, sum)
	}
	if err := put("summaries.json", orEmpty(summaries)); err != nil {
		return nil, err
	}
	header := *log
	header.Samples = nil
	if err := put("header.json", header); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// sampleOfEval finds run's sample in a .eval log: its entry's exact bytes.
func sampleOfEval(b []byte, run string) (json.RawMessage, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("not a .eval log (a zip): %v", err)
	}
	for _, f := range zr.File {
		if len(f.Name) < 8 || f.Name[:8] != "samples/" {
			continue
		}
		if f.UncompressedSize64 > 1<<30 {
			return nil, fmt.Errorf("%s in the .eval log is over 1 GiB", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s in the .eval log: %w", f.Name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, 1<<30))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s in the .eval log: %w", f.Name, err)
		}
		var head struct {
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(data, &head) == nil && head.UUID == run {
			return data, nil
		}
	}
	return nil, fmt.Errorf("the .eval log holds no sample of run %s", run)
}
