package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/sealrun/sealrun/transcript"
)

// TranscriptFile is a run directory's transcript, what every export is derived from.
const TranscriptFile = "transcript.json"

// MaxTranscriptBytes bounds a transcript.json an export reads (the 2,000-turn hour is 8 MB), as
// transcript.Check bounds it.
const MaxTranscriptBytes = transcript.MaxFileBytes

// FindRuns is the run directories under each path: the path itself when it holds
// transcript.json, else each directory below it that does (a results directory, a
// publication's runs/ or the publication itself), sorted.
func FindRuns(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("%s: not a directory; give a run directory (it holds %s) or a directory of them", p, TranscriptFile)
		}
		if _, err := os.Stat(filepath.Join(p, TranscriptFile)); err == nil {
			out = append(out, p)
			continue
		}
		found := 0
		for _, pattern := range []string{"*/" + TranscriptFile, "runs/*/" + TranscriptFile} {
			ms, _ := filepath.Glob(filepath.Join(p, pattern))
			for _, m := range ms {
				out = append(out, filepath.Dir(m))
				found++
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("%s: no %s in it or in the directories below it; sealrund writes it when a run ends (gather runs with sealrun results gather RUN DIR)", p, TranscriptFile)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Load reads a run directory's transcript.json: its bytes (what Source hashes) and the
// transcript.
func Load(dir string) ([]byte, *transcript.Transcript, error) {
	path := filepath.Join(dir, TranscriptFile)
	b, err := transcript.ReadBounded(path)
	if err != nil {
		return nil, nil, err
	}
	var t transcript.Transcript
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, nil, fmt.Errorf("%s: not a transcript: %v", path, err)
	}
	if t.Format != transcript.Format {
		return nil, nil, fmt.Errorf("%s: format %q; this sealrun reads %s", path, t.Format, transcript.Format)
	}
	return b, &t, nil
}

// Exported is what an export file says it was derived from.
type Exported struct {
	Format, Run, TranscriptSHA256, Version string
}

// exportHead is what Recompute reads of an export file: which form it is and, for an ATIF
// trajectory, what it says of its source (extra.sealrun).
type exportHead struct {
	SchemaVersion string          `json:"schema_version"`
	Eval          json.RawMessage `json:"eval"` // an Inspect eval log's
	Extra         struct {
		Sealrun struct {
			Format           string `json:"format"`
			Run              string `json:"run"`
			TranscriptSHA256 string `json:"transcript_sha256"`
			Version          string `json:"sealrun_version"`
		} `json:"sealrun"`
	} `json:"extra"`
}

func (h *exportHead) source() (*Exported, error) {
	s := h.Extra.Sealrun
	if s.Format != Format || s.Run == "" {
		return nil, errors.New("not an export of sealrun's (no extra.sealrun naming its run and transcript)")
	}
	return &Exported{Format: "atif", Run: s.Run, TranscriptSHA256: s.TranscriptSHA256, Version: s.Version}, nil
}

// ReadSource reads what an export file says of its source (an ATIF trajectory's
// extra.sealrun).
func ReadSource(b []byte) (*Exported, error) {
	var h exportHead
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return h.source()
}

// Recompute exports the run in dir again as the file b says it was made (its format and
// sealrun version) and says whether b is exactly that — for an Inspect eval log, whether the
// run's sample in it is — naming the first difference.
func Recompute(b []byte, dir string) (*Exported, error) {
	tj, t, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return RecomputeOf(b, tj, t, dir)
}

// RecomputeOf is Recompute with the run's transcript already loaded (Load of dir): a reader
// checking several exports of one run reads it once.
func RecomputeOf(b, tj []byte, t *transcript.Transcript, dir string) (*Exported, error) {
	if bytes.HasPrefix(b, []byte("PK\x03\x04")) { // Inspect's .eval form
		ex, err := recomputeInspect(b, tj, t)
		if ex != nil {
			ex.Format = "inspect .eval"
		}
		return ex, err
	}
	var head exportHead // read once: its form, and its source
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if head.SchemaVersion == "" && len(head.Eval) > 0 {
		return recomputeInspect(b, tj, t)
	}
	ex, err := head.source()
	if err != nil {
		return nil, err
	}
	if t.Run.ID != ex.Run {
		return ex, fmt.Errorf("the export is of run %s; %s is run %s", ex.Run, dir, t.Run.ID)
	}
	src := SourceOf(tj, t, ex.Version)
	if src.TranscriptSHA256 != ex.TranscriptSHA256 {
		return ex, fmt.Errorf("the export names transcript.json %s; the run's is %s", ex.TranscriptSHA256, src.TranscriptSHA256)
	}
	want, err := ATIF(t, src)
	if err != nil {
		return ex, err
	}
	return ex, sameBytes(b, want, ex.Version)
}

func recomputeInspect(b, tj []byte, t *transcript.Transcript) (*Exported, error) {
	sample, err := SampleOf(b, t.Run.ID)
	if err != nil {
		return nil, err
	}
	return recomputeSample(sample, tj, t)
}

// RecomputeSample is Recompute of one sample of an Inspect eval log (as the log holds it, its
// uuid the run's id) against the run in dir: a reader of a log of many runs reads the log
// once, not once a run.
func RecomputeSample(sample json.RawMessage, dir string) (*Exported, error) {
	tj, t, err := Load(dir)
	if err != nil {
		return nil, err
	}
	return RecomputeSampleOf(sample, tj, t, dir)
}

// RecomputeSampleOf is RecomputeSample with the run's transcript already loaded (Load of dir).
func RecomputeSampleOf(sample json.RawMessage, tj []byte, t *transcript.Transcript, dir string) (*Exported, error) {
	var head struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(sample, &head); err != nil || head.UUID != t.Run.ID {
		return nil, fmt.Errorf("the sample is of run %q; %s is run %s", head.UUID, dir, t.Run.ID)
	}
	return recomputeSample(sample, tj, t)
}

func recomputeSample(sample json.RawMessage, tj []byte, t *transcript.Transcript) (*Exported, error) {
	var meta struct {
		Metadata struct {
			Sealrun struct {
				Format           string `json:"format"`
				TranscriptSHA256 string `json:"transcript_sha256"`
				Version          string `json:"sealrun_version"`
			} `json:"sealrun"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(sample, &meta); err != nil || meta.Metadata.Sealrun.Format != Format {
		return nil, errors.New("the sample is not an export of sealrun's (no metadata.sealrun naming its run and transcript)")
	}
	m := meta.Metadata.Sealrun
	ex := &Exported{Format: "inspect", Run: t.Run.ID, TranscriptSHA256: m.TranscriptSHA256, Version: m.Version}
	src := SourceOf(tj, t, m.Version)
	if src.TranscriptSHA256 != m.TranscriptSHA256 {
		return ex, fmt.Errorf("the sample names transcript.json %s; the run's is %s", m.TranscriptSHA256, src.TranscriptSHA256)
	}
	want, err := InspectSample(t, src)
	if err != nil {
		return ex, err
	}
	return ex, sameBytes(sample, want, m.Version)
}

func sameBytes(got, want []byte, version string) error {
	if bytes.Equal(got, want) {
		return nil
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("the export differs from the one the run gives at byte %d (an edited export, or one made by another sealrun than %s)", i, version)
}
