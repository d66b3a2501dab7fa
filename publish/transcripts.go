package publish

// A publication carries each run's trajectory: the bodies its audit log hashes (the gateway's
// requests and responses under gateway/, the calls' outputs under calls/), its transcript.json
// and transcript.html. An operator who may not release prompts withholds bodies (--redact): the
// hashes stay in the audit log, the transcript says which bodies were withheld, and a reader
// still checks every body that is there.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/transcript"
)

// RedactAll withholds every body of every run (publish --redact all).
const RedactAll = "all"

// redactions are the bodies to withhold, by run: nil for all of a run's, else the body paths.
type redactions struct {
	all  bool
	runs map[string]map[string]bool // run -> body paths; an empty map: every body of the run
}

// parseRedactions reads --redact values: "all", "RUN" (every body of the run), "RUN:gateway-N"
// (the request and response of the run's model exchange N), "RUN:call-N" (the output of its
// compute call N), "RUN:terminal-N" (segment N of a human run's recording); several at once
// separated by commas.
func parseRedactions(values []string, runs map[string]bool) (*redactions, error) {
	r := &redactions{runs: map[string]map[string]bool{}}
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == RedactAll {
				r.all = true
				continue
			}
			run, what, one := strings.Cut(item, ":")
			if !runs[run] {
				return nil, fmt.Errorf("--redact %q: no run %q among the inputs; give all, RUN, RUN:gateway-N, RUN:call-N or RUN:terminal-N", item, run)
			}
			if r.runs[run] == nil {
				r.runs[run] = map[string]bool{}
			}
			if !one {
				r.runs[run] = map[string]bool{} // the whole run
				r.runs[run][""] = true
				continue
			}
			kind, num, _ := strings.Cut(what, "-")
			n, err := strconv.Atoi(num)
			if err != nil || n < 1 || strconv.Itoa(n) != num || (kind != "gateway" && kind != "call" && kind != "terminal") {
				return nil, fmt.Errorf("--redact %q: %q is not gateway-N (a model exchange), call-N (a compute call) or terminal-N (a segment of a human run's recording)", item, what)
			}
			switch kind {
			case "gateway":
				r.runs[run][audit.GatewayBodyPath(n, audit.BodyRequest)] = true
				r.runs[run][audit.GatewayBodyPath(n, audit.BodyResponse)] = true
			case "call":
				r.runs[run][audit.CallLogPath(n)] = true
			default:
				r.runs[run][audit.TerminalSegmentPath(n)] = true
			}
		}
	}
	return r, nil
}

// withheld says whether the body at path of run is withheld.
func (r *redactions) withheld(run, path string) bool {
	if r == nil {
		return false
	}
	m := r.runs[run]
	return r.all || m[""] || m[path]
}

// copyTrajectory copies a gathered run's bodies (all but the withheld) into its publication
// directory dst and writes its transcript there, made from what is published: a body the
// transcript does not say is withheld must be there and intact.
func copyTrajectory(src, dst string, pred *attest.Predicate, red *redactions, version string) error {
	id := pred.Run.ID
	f, err := os.Open(filepath.Join(src, "audit.jsonl"))
	if err != nil {
		return ioErr(fmt.Errorf("run %s: %w", id, err))
	}
	refs, err := transcript.BodyRefs(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("run %s: its audit log: %w", id, err)
	}
	withheld := map[string]bool{}
	var absent []string
	for _, r := range refs {
		if red.withheld(id, r.Path) {
			withheld[r.Path] = true
			continue
		}
		from := filepath.Join(src, filepath.FromSlash(r.Path))
		if _, err := os.Stat(from); err != nil {
			absent = append(absent, r.Path)
			continue
		}
		to := filepath.Join(dst, filepath.FromSlash(r.Path))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return ioErr(err)
		}
		if err := copyFile(from, to); err != nil {
			return err
		}
	}
	if len(absent) > 0 {
		sort.Strings(absent)
		return fmt.Errorf("run %s: %s holds no %s (and %d more bodies its audit log hashes); gather it again with this sealrun (sealrun results gather), or withhold its bodies with --redact %s", id, src, absent[0], len(absent)-1, id)
	}
	for _, name := range []string{"transcript.json", "transcript.html"} {
		os.Remove(filepath.Join(dst, name)) // as gathered; made again below from what is published
	}
	t, err := transcript.Build(dst, transcript.RunFromPredicate(pred), transcript.Options{Withheld: withheld})
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	if b := t.Bodies; b.Missing > 0 || b.Altered > 0 {
		return fmt.Errorf("run %s: of the bodies its audit log hashes, %d are missing and %d altered in %s; gather it again", id, b.Missing, b.Altered, src)
	}
	if err := transcript.Write(dst, t); err != nil {
		return ioErr(err)
	}
	// The run as an ATIF trajectory, derived from the transcript just written (so withheld
	// there too), naming it: verify-publication recomputes it.
	tj, err := transcript.Marshal(t)
	if err != nil {
		return err
	}
	a, err := export.ATIF(t, export.SourceOf(tj, t, version))
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dst, TrajectoryFile), a); err != nil {
		return ioErr(err)
	}
	return nil
}

// TrajectoryFile is a published run's ATIF trajectory (sealrun export's form).
const TrajectoryFile = "trajectory.json"

// transcripts checks every run's bodies and transcript (the audit logs were checked against
// their attestations by runs) and prints a line a run.
func (c *checker) transcripts(onDisk []string) {
	found := make([]finding, len(onDisk))
	leaderboard.EachParallel(len(onDisk), func(i int) {
		id, out := onDisk[i], &found[i]
		d := filepath.Join(c.dir, "runs", id)
		env, err := os.ReadFile(filepath.Join(d, "result.att.json"))
		if err != nil {
			return
		}
		st, err := attest.ReadUnverified(env) // verified by runs; read here for the header alone
		if err != nil {
			return
		}
		if _, err := os.Stat(filepath.Join(d, "audit.jsonl")); err != nil {
			out.say("  runs/%s: no audit log, so no trajectory to check", id)
			return
		}
		rep, err := transcript.Check(d, st.Predicate)
		if err != nil {
			out.bad("runs/%s: its transcript cannot be checked: %v", id, err)
			return
		}
		out.ok, out.bodies = true, rep.Bodies
		b := rep.Bodies
		line := fmt.Sprintf("  runs/%s: %d model exchanges, %d calls; bodies %d intact, %d withheld, %d missing, %d altered", id, rep.Exchanges, rep.Calls, b.Intact, b.Withheld, b.Missing, b.Altered)
		if rep.Transcript {
			line += "; transcript.json is what they give"
		}
		if rep.Page {
			line += ", and transcript.html"
		}
		if b, err := os.ReadFile(filepath.Join(d, TrajectoryFile)); err == nil {
			if _, err := export.Recompute(b, d); err != nil {
				out.bad("runs/%s/%s: %v", id, TrajectoryFile, err)
			} else {
				line += "; trajectory.json (ATIF) is what the transcript gives"
			}
		}
		out.say("%s", line)
		for _, n := range rep.Notes {
			out.say("    %s", n)
		}
		for _, p := range rep.Problems {
			out.bad("runs/%s/%s", id, p)
		}
	})
	var total transcript.Counts
	checked := 0
	for _, f := range found {
		c.replay(f)
		if f.ok {
			checked++
			total.Intact += f.bodies.Intact
			total.Withheld += f.bodies.Withheld
			total.Missing += f.bodies.Missing
			total.Altered += f.bodies.Altered
		}
	}
	fmt.Fprintf(c.w, "trajectories: %d runs; bodies %d intact, %d withheld, %d missing, %d altered (each against the SHA-256 its run's signed audit log carries)\n",
		checked, total.Intact, total.Withheld, total.Missing, total.Altered)
}

// InspectDir is where a publication keeps its runs as Inspect eval logs, one per track and
// agent (sealrun export --format inspect's form).
const InspectDir = "inspect"

// writeInspectLogs writes the published runs that have a transcript as Inspect eval logs under
// tmp/inspect/, from the transcripts just written.
func writeInspectLogs(tmp string, meta Publication, version string) error {
	groups := map[string][]export.Run{}
	var order []string
	for _, id := range meta.Runs {
		d := filepath.Join(tmp, "runs", id)
		if _, err := os.Stat(filepath.Join(d, export.TranscriptFile)); err != nil {
			continue
		}
		tj, t, err := export.Load(d)
		if err != nil {
			return err
		}
		k := export.InspectGroup(t)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], export.Run{T: t, Src: export.SourceOf(tj, t, version)})
	}
	names := map[string]bool{}
	for _, k := range order {
		b, err := export.Inspect(groups[k])
		if err != nil {
			return err
		}
		base := strings.TrimSuffix(export.InspectName(groups[k][0].T), ".json")
		name := base + ".json"
		for i := 2; names[name]; i++ {
			name = fmt.Sprintf("%s-%d.json", base, i)
		}
		names[name] = true
		os.MkdirAll(filepath.Join(tmp, InspectDir), 0o755)
		if err := writeFileSync(filepath.Join(tmp, InspectDir, name), b); err != nil {
			return ioErr(err)
		}
	}
	return nil
}

// inspectLogs checks every eval log under inspect/: each sample exactly what its run's
// transcript gives.
func (c *checker) inspectLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.dir, InspectDir, "*.json"))
	for _, p := range logs {
		rel := InspectDir + "/" + filepath.Base(p)
		b, err := os.ReadFile(p)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		// Read once: a log holds a sample of every run of its track and agent.
		var log struct {
			Samples []json.RawMessage `json:"samples"`
		}
		if err := json.Unmarshal(b, &log); err != nil {
			c.bad("%s: not an eval log: %v", rel, err)
			continue
		}
		found := make([]finding, len(log.Samples))
		leaderboard.EachParallel(len(log.Samples), func(i int) {
			var s struct {
				UUID string `json:"uuid"`
			}
			json.Unmarshal(log.Samples[i], &s)
			if !attest.ValidRunID(s.UUID) {
				found[i].bad("%s: a sample of run %q, which cannot be one of this publication's", rel, s.UUID)
				return
			}
			if _, err := export.RecomputeSample(log.Samples[i], filepath.Join(c.dir, "runs", s.UUID)); err != nil {
				found[i].bad("%s: run %s: %v", rel, s.UUID, err)
				return
			}
			found[i].ok = true
		})
		ok := 0
		for _, f := range found {
			c.replay(f)
			if f.ok {
				ok++
			}
		}
		fmt.Fprintf(c.w, "  %s: %d samples, each exactly what its run's transcript gives\n", rel, ok)
	}
}
