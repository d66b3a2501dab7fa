package publish

// A publication carries each run's trajectory: the bodies its audit log hashes (the gateway's
// requests and responses under gateway/, the calls' outputs under calls/), its transcript.json
// and transcript.html. An operator who may not release prompts withholds bodies (--redact): the
// hashes stay in the audit log, the transcript says which bodies were withheld, and a reader
// still checks every body that is there.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/internal/opt"
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
				return nil, opt.New("publish.Options", "Redact", fmt.Sprintf("%q: no run %q among the inputs; give all, RUN, RUN:gateway-N, RUN:call-N or RUN:terminal-N", item, run))
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
				return nil, opt.New("publish.Options", "Redact", fmt.Sprintf("%q: %q is not gateway-N (a model exchange), call-N (a compute call) or terminal-N (a segment of a human run's recording)", item, what))
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
		return fmt.Errorf("run %s: %s holds no %s (and %d more bodies its audit log hashes); gather it again with this sealrun (sealrun results gather), or withhold its bodies (sealrun publish --redact %s)", id, src, absent[0], len(absent)-1, id)
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
	// report.html made again, from the signed predicate and the audit log, as Verify makes it:
	// a gathered page of another sealrun would not compare.
	if err := transcript.WriteRunPage(dst, pred); err != nil {
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
