package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/policy"
	"github.com/spf13/cobra"
)

// A results directory (deploy/slurm/README.md) holds one directory per gathered run, named by
// its run id, with result.att.json, these files and run.json, the daemon's record of the run,
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
}

// maxGatherFile bounds one gathered file (a bundle is far smaller; an audit log is capped at
// 64 MiB by the daemon).
const maxGatherFile = 4 << 30

func newResultsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "results",
		Short: "Gather finished runs into a shared results directory, and say what a seed there needs",
		Long: `A results directory is where runs of many hosts meet (a Slurm cluster's shared filesystem): one
directory per run, named by its run id, holding its attestation, report, audit log, track file,
graded bundle and record. sealrun leaderboard reads it.`,
		Args: exactArgs(0, "a subcommand: gather or seed"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: gather or seed"))
		},
	}
	cmd.AddCommand(newResultsGatherCmd(), newResultsSeedCmd())
	return cmd
}

func newResultsGatherCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "gather RUN DIR",
		Short: "Copy a finished run's files from sealrund into DIR/RUN, atomically and once",
		Long: `Gather copies a finished run's attestation, report, audit log, track file, summary, report.html,
graded bundle (checked against its digest) and record into DIR/RUN. The files are written into a
hidden temporary directory, synced, and renamed into place: a gather cut short leaves nothing
the leaderboard reads, and the next one removes it. Gathering a run again is a no-op when DIR/RUN
holds the same attestation, and an error when it holds another.`,
		Example: `  sealrun results gather r-20261122-101500-a1b2c3 /shared/results`,
		Args:    exactArgs(2, "the run id and the results directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, dir := args[0], args[1]
			if !attest.ValidRunID(id) {
				return usage(fmt.Errorf("%q is not a run id (sealrun ps lists them)", id))
			}
			c := newAPIClient(socket)
			var rec daemon.Record
			if err := c.do(cmd.Context(), "GET", "/runs/"+id, nil, &rec); err != nil {
				return err
			}
			if !rec.Final() {
				return fmt.Errorf("run %s is %s; gather it once it has ended (sealrun run --wait)", id, rec.State)
			}
			done, err := gather(c, cmd, rec, dir)
			if err != nil {
				return err
			}
			if done {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: already gathered, the same attestation\n", filepath.Join(dir, id))
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s\n", filepath.Join(dir, id))
			}
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	return cmd
}

// gather copies rec's files into dir/rec.ID; already is true when they were there.
func gather(c *apiClient, cmd *cobra.Command, rec daemon.Record, dir string) (already bool, err error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return false, fmt.Errorf("results directory %s: not a directory (%v); create it on the shared filesystem, writable by the jobs' user", dir, err)
	}
	dest := filepath.Join(dir, rec.ID)
	var att []byte
	if err := c.do(cmd.Context(), "GET", "/runs/"+rec.ID+"/files/attestation", nil, &att); err != nil {
		return false, fmt.Errorf("run %s: %w", rec.ID, err)
	}
	if same, err := sameAttestation(dest, att); err != nil || same {
		return same, err
	}
	// What an earlier gather of this run left when it was killed.
	old, _ := filepath.Glob(filepath.Join(dir, "."+rec.ID+".tmp-*"))
	for _, o := range old {
		os.RemoveAll(o)
	}
	tmp, err := os.MkdirTemp(dir, "."+rec.ID+".tmp-")
	if err != nil {
		return false, fmt.Errorf("results directory %s is not writable (%v); give the jobs' user write access to it", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	os.Chmod(tmp, 0o755)
	var bundleSum string
	// The attestation as fetched above (compared with what dest holds); the rest streamed.
	if err := exams.WriteAtomic(filepath.Join(tmp, "result.att.json"), 0o644, func(w io.Writer) error { _, err := w.Write(att); return err }); err != nil {
		return false, err
	}
	for _, f := range gatherFiles {
		sum, ok, err := fetchFile(c, cmd, rec.ID, f.name, filepath.Join(tmp, f.file))
		if err != nil {
			return false, err
		}
		if !ok && f.required {
			return false, fmt.Errorf("run %s has no %s; it cannot be gathered (sealrun show %s)", rec.ID, f.file, rec.ID)
		}
		if f.name == "bundle" {
			bundleSum = sum
		}
	}
	if bundleSum != "" {
		var rep struct {
			Candidate struct{ ID string } `json:"candidate"`
		}
		b, _ := os.ReadFile(filepath.Join(tmp, "report.json"))
		if json.Unmarshal(b, &rep) != nil || rep.Candidate.ID != "sha256:"+bundleSum {
			return false, fmt.Errorf("run %s: the bundle copied has sha256 %s, not the graded candidate %q of its report; gather again", rec.ID, bundleSum, rep.Candidate.ID)
		}
	}
	recJSON, _ := json.MarshalIndent(rec, "", "  ")
	if err := exams.WriteAtomic(filepath.Join(tmp, "run.json"), 0o644, func(w io.Writer) error { _, err := w.Write(append(recJSON, '\n')); return err }); err != nil {
		return false, err
	}
	if err := syncDir(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dest); err != nil {
		// Another gather of the same run won the race: fine if it holds the same attestation.
		if same, serr := sameAttestation(dest, att); serr == nil && same {
			os.RemoveAll(tmp)
			return true, nil
		}
		return false, fmt.Errorf("move the gathered run into %s: %w", dest, err)
	}
	return false, syncDir(dir)
}

// sameAttestation says whether dest already holds att; a different one is an error.
func sameAttestation(dest string, att []byte) (bool, error) {
	have, err := os.ReadFile(filepath.Join(dest, "result.att.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, serr := os.Stat(dest); serr == nil {
			return false, fmt.Errorf("%s exists without result.att.json; it is not a gathered run: move it aside", dest)
		}
		return false, nil
	case err != nil:
		return false, err
	case string(have) != string(att):
		return false, fmt.Errorf("%s holds another attestation of this run id; two daemons gave one id, or the file was changed: move it aside and gather again", dest)
	}
	return true, nil
}

// fetchFile streams a run file into path, synced, and returns its sha256; ok is false when the
// daemon has no such file (404).
func fetchFile(c *apiClient, cmd *cobra.Command, id, name, path string) (sum string, ok bool, err error) {
	req, _ := http.NewRequestWithContext(cmd.Context(), "GET", "http://sealrund/v1/runs/"+id+"/files/"+name, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", false, c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "", false, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", false, fmt.Errorf("run %s, file %s: sealrund answered %s: %s", id, name, resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, maxGatherFile+1))
	if err != nil {
		return "", false, fmt.Errorf("run %s, file %s: %w", id, name, err)
	}
	if n > maxGatherFile {
		return "", false, fmt.Errorf("run %s, file %s: over %d bytes", id, name, int64(maxGatherFile))
	}
	if err := f.Sync(); err != nil {
		return "", false, err
	}
	return hex.EncodeToString(h.Sum(nil)), true, f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// SeedState is what a results directory holds for one seed of an agent on a track.
type SeedState struct {
	State string `json:"state"` // "none", "graded", "failed" or "invalid"
	Run   string `json:"run"`   // the graded or failed run; for invalid, the one to rerun
	Runs  int    `json:"runs"`  // gathered runs of the seed
}

func newResultsSeedCmd() *cobra.Command {
	var track, agent string
	var seed int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "seed DIR --track T.toml --agent PROVIDER/MODEL[@EFFORT] --seed N",
		Short: "Say what a results directory holds for one seed: none, graded RUN, failed RUN or invalid RUN",
		Long: `Seed reads the records of the runs gathered in DIR and prints one line for a seed of an agent on a
track (the track file's id):

  none           no run of it was gathered: run it
  graded RUN     it has a valid result: nothing to do (a requeued job stops here)
  failed RUN     likewise; a failed run is the agent's, and counts
  invalid RUN    only invalid runs: rerun it with --rerun-of RUN (the latest invalid run that
                 no gathered run reruns)`,
		Example: `  sealrun results seed /shared/results --track tracks/ari-v1.toml --agent openai/gpt-x@high --seed 3`,
		Args:    exactArgs(1, "the results directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if track == "" || agent == "" || !cmd.Flags().Changed("seed") {
				return usage(errors.New("give --track, --agent and --seed"))
			}
			data, err := readLimited(track, "track file", 1<<20)
			if err != nil {
				return err
			}
			t, err := policy.Parse(track, data)
			if err != nil {
				return err
			}
			s, err := seedState(args[0], t.ID, agent, seed)
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", s.State, s.Run)
			return nil
		},
	}
	cmd.Flags().StringVar(&track, "track", "", "the track file")
	cmd.Flags().StringVar(&agent, "agent", "", "the agent: PROVIDER/MODEL[@EFFORT]")
	cmd.Flags().Int64Var(&seed, "seed", 0, "the seed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON: state, run, runs")
	return cmd
}

// seedState reads DIR/*/run.json.
func seedState(dir, trackID, agent string, seed int64) (SeedState, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return SeedState{}, fmt.Errorf("results directory %s: %w; give the shared results directory (SEALRUN_RESULTS for the job script)", dir, unwrapPathErr(err))
	}
	var runs []daemon.Record
	rerun := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := readLimited(filepath.Join(dir, e.Name(), "run.json"), "run record", 1<<20)
		if err != nil {
			continue // not a gathered run
		}
		var r daemon.Record
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
		case r.State == daemon.StateGraded || r.State == daemon.StateFailed:
			if s.State != daemon.StateGraded && s.State != daemon.StateFailed {
				s.State, s.Run = r.State, r.ID
			}
		case r.State == daemon.StateInvalid && !rerun[r.ID] && (s.State == "none" || s.State == daemon.StateInvalid):
			s.State, s.Run = r.State, r.ID // the latest invalid run nothing reruns
		}
	}
	return s, nil
}

// unwrapPathErr drops the *PathError's repetition of the path.
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
