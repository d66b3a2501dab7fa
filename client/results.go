package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
)

// A results directory (deploy/slurm/README.md) holds one directory per gathered run, named by
// its run id, with result.att.json, these files, the bodies its audit log hashes (gateway/ and
// calls/, transcript.BodyRefs) and run.json, the daemon's record of the run,
// which `results seed` reads to decide what a (re)submitted seed does. Only the signed
// attestation counts for the leaderboard.
var gatherFiles = []struct {
	name, file string
	required   bool
}{
	{"report", "report.json", true},
	{"audit", "audit.jsonl", true},
	{"track", "track.toml", true},
	{"summary", "summary.txt", false},
	{"report-html", "report.html", false},
	{"bundle", "bundle.tar.gz", false},
	{"transcript-json", "transcript.json", false},
	{"transcript-html", "transcript.html", false},
	{"sigstore", "result.sigstore.json", false},
	{"tpm", attest.TPMQuoteFile, false},
}

// maxGatherFile bounds one gathered file (a bundle is far smaller; an audit log is capped at
// 64 MiB by the daemon).
const maxGatherFile = 4 << 30

// SeedState is what a results directory holds for one seed of an agent on a track.
type SeedState struct {
	State string `json:"state"` // "none", "graded", "failed" or "invalid"
	Run   string `json:"run"`   // the graded or failed run; for invalid, the one to rerun
	Runs  int    `json:"runs"`  // gathered runs of the seed
}

// ReadSeedState reads the run records (DIR/*/run.json) of a results directory and says what it
// holds for one seed of an agent on a track (the track's id).
func ReadSeedState(dir, trackID, agent string, seed int64) (SeedState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return SeedState{}, fmt.Errorf("results directory %s: %w; give the shared results directory (SEALRUN_RESULTS for the job script)", dir, fileio.Cause(err))
	}
	var runs []api.Record
	rerun := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := fileio.ReadLimited(filepath.Join(dir, e.Name(), "run.json"), "run record", 1<<20)
		if err != nil {
			continue // not a gathered run
		}
		var r api.Record
		if json.Unmarshal(b, &r) != nil || r.ID != e.Name() {
			return SeedState{}, fmt.Errorf("%s: not a run record of run %s; move it aside", filepath.Join(dir, e.Name(), "run.json"), e.Name())
		}
		if r.TrackID == trackID && r.Agent == agent && r.Seed == seed {
			runs = append(runs, r)
			if r.RerunOf != "" {
				rerun[r.RerunOf] = true
			}
		}
	}
	s := SeedState{State: "none", Runs: len(runs)}
	sort.Slice(runs, func(i, k int) bool { return runs[i].Finished.Before(runs[k].Finished) })
	for _, r := range runs {
		switch {
		case r.State == api.StateGraded || r.State == api.StateFailed:
			if s.State != api.StateGraded && s.State != api.StateFailed {
				s.State, s.Run = r.State, r.ID
			}
		case r.State == api.StateInvalid && !rerun[r.ID] && (s.State == "none" || s.State == api.StateInvalid):
			s.State, s.Run = r.State, r.ID // the latest invalid run nothing reruns
		}
	}
	return s, nil
}
