package verify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/export"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/transcript"
)

// boundToAttestation are the files of a run its attestation (and the checks beside it) covers
// without its audit log.
var boundToAttestation = map[string]bool{"result.att.json": true, "report.json": true, "bundle.tar.gz": true, "track.toml": true, "result.sigstore.json": true, witness.RunProofFile: true}

// trajectoryUnchecked says why each file of the run at rel that hangs on its audit log was not
// checked.
func (c *checker) trajectoryUnchecked(out *finding, rel, why string) {
	for _, f := range c.present {
		if name, ok := strings.CutPrefix(f, rel); ok && !boundToAttestation[name] {
			out.cannot(f, why)
		}
	}
}

// transcripts checks every run's bodies and transcript (the audit logs were checked against
// their attestations by runs) and prints a line a run.
func (c *checker) transcripts(onDisk []string) {
	found := make([]finding, len(onDisk))
	leaderboard.EachParallel(len(onDisk), func(i int) {
		id, out := onDisk[i], &found[i]
		d := filepath.Join(c.dir, "runs", id)
		rel := "runs/" + id + "/"
		var pred *attest.Predicate
		if v := c.verified[id]; v != nil {
			pred = v.Statement.Predicate
		} else {
			// runs named it not valid; its trajectory is still checked against what it says,
			// so that what else is wrong is named too.
			env, _, err := c.snap.read(rel+"result.att.json", "attestation", attest.MaxEnvelopeBytes)
			if err != nil {
				return
			}
			st, err := attest.ReadUnverified(env)
			if err != nil {
				return
			}
			pred = st.Predicate
		}
		if !c.snap.has(rel + "audit.jsonl") {
			// runs named it missing where the attestation names an audit log; else the run
			// was published as its attestation alone. Either way what hangs on the log cannot
			// be checked.
			out.say("  runs/%s: no audit log, so no trajectory to check", id)
			c.trajectoryUnchecked(out, rel, "part of the run's trajectory, which is checked against its audit log, and there is none")
			return
		}
		rfs := c.snap.runFS(id)
		rep, err := transcript.CheckFS(rfs, d, pred)
		if err != nil {
			out.bad("runs/%s: its transcript cannot be checked: %v", id, err)
			c.trajectoryUnchecked(out, rel, "part of the run's trajectory, which could not be checked (above)")
			return
		}
		out.ok, out.bodies = true, rep.Bodies
		if rep.Parsed != nil {
			c.seed(id, rep.JSON, rep.Parsed)
		}
		b := rep.Bodies
		line := fmt.Sprintf("  runs/%s: %d model exchanges, %d calls; bodies %d intact, %d withheld, %d missing, %d altered", id, rep.Exchanges, rep.Calls, b.Intact, b.Withheld, b.Missing, b.Altered)
		// Every body the audit log hashes that is here was compared with its hash (a missing
		// or altered one is a problem of rep's).
		for _, p := range rep.Intact {
			out.claims = append(out.claims, rel+p)
		}
		note := strings.Join(rep.Notes, "; ")
		for _, f := range []struct {
			name string
			ok   bool
		}{{"transcript.json", rep.Transcript}, {"transcript.html", rep.Page}} {
			switch {
			case f.ok:
				out.claims = append(out.claims, rel+f.name)
			case !c.snap.has(rel + f.name):
				out.bad("%s%s: missing: sealrun publish writes it for every run with an audit log (sealrun transcript %s makes it again)", rel, f.name, rel)
			default:
				out.cannot(rel+f.name, "not compared: "+note)
			}
		}
		if rep.Transcript {
			line += "; transcript.json is what they give"
		}
		if rep.Page {
			line += ", and transcript.html"
		}
		switch b, missing, err := c.snap.read(rel+publish.TrajectoryFile, "file", maxWhole); {
		case missing:
			out.bad("%s%s: missing: sealrun publish writes every run's ATIF trajectory beside its transcript", rel, publish.TrajectoryFile)
		case err != nil:
			out.bad("%s%s: %v", rel, publish.TrajectoryFile, err)
		default:
			tj, t, err := c.transcriptOf(id)
			if err == nil {
				_, err = export.RecomputeOf(b, tj, t, d)
			}
			if err != nil {
				out.bad("%s%s: %v", rel, publish.TrajectoryFile, err)
			} else {
				out.claims = append(out.claims, rel+publish.TrajectoryFile)
				line += "; trajectory.json (ATIF) is what the transcript gives"
			}
		}
		// report.html: made again from the signed predicate and the audit log just checked, and
		// compared by its digest with the file as the files check hashed it.
		if !c.snap.has(rel + transcript.RunPageFile) {
			out.bad("%s%s: missing: sealrun publish writes every run's page (the board links it)", rel, transcript.RunPageFile)
		} else if want, err := transcript.RunPageFS(rfs, pred); err == nil && sha256Hex(want) == c.sums[rel+transcript.RunPageFile] {
			out.claims = append(out.claims, rel+transcript.RunPageFile)
			line += "; report.html is what the attestation and the log give"
		} else {
			out.bad("%s%s: not the page its attestation and audit log give (a page made by another sealrun, or edited)", rel, transcript.RunPageFile)
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

// inspectLogs checks every eval log under inspect/: each sample exactly what its run's
// transcript gives, and every run with a transcript a sample of exactly one of them (a sample
// dropped, or the folder removed, is named).
func (c *checker) inspectLogs(onDisk []string) {
	logs, _ := filepath.Glob(filepath.Join(c.dir, publish.InspectDir, "*.json"))
	in := map[string][]string{} // run -> the logs holding a sample of it
	for _, p := range logs {
		rel := publish.InspectDir + "/" + filepath.Base(p)
		// First the runs the log's header names, in its samples' order (its first bytes read,
		// not its samples): the whole log made again from them, with the digest the files
		// check computed of it, is every sample checked without reading one (the header is
		// trusted for nothing: only the digest counts).
		if ids, versions, ok := c.inspectHeader(rel); ok {
			if sum, err := c.inspectLogDigest(ids, versions); err == nil && sum == c.sums[rel] {
				for _, id := range ids {
					in[id] = append(in[id], rel)
				}
				c.claim(rel)
				fmt.Fprintf(c.w, "  %s: %d samples, each exactly what its run's transcript gives\n", rel, len(ids))
				continue
			}
		}
		b, _, err := c.snap.read(rel, "Inspect eval log", publish.MaxFile)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		// Otherwise each sample, to name what differs. Read once: a log holds a sample of
		// every run of its track and agent.
		var log struct {
			Samples []json.RawMessage `json:"samples"`
		}
		if err := json.Unmarshal(b, &log); err != nil {
			c.bad("%s: not an eval log: %v", rel, err)
			continue
		}
		found := make([]finding, len(log.Samples))
		ids := make([]string, len(log.Samples))
		versions := make([]string, len(log.Samples)) // the sealrun version each sample names
		leaderboard.EachParallel(len(log.Samples), func(i int) {
			var s struct {
				UUID     string `json:"uuid"`
				Metadata struct {
					Sealrun struct {
						Version string `json:"sealrun_version"`
					} `json:"sealrun"`
				} `json:"metadata"`
			}
			json.Unmarshal(log.Samples[i], &s)
			if !attest.ValidRunID(s.UUID) {
				found[i].bad("%s: a sample of run %q, which cannot be one of this publication's", rel, s.UUID)
				return
			}
			ids[i], versions[i] = s.UUID, s.Metadata.Sealrun.Version
		})
		// The whole log made again from its runs (its eval spec, results, stats and every
		// sample, as the version each sample names made it): equal, every sample is what its
		// run's transcript gives. Only when it is not is each sample made again, to name which.
		whole := errors.New("a sample names no run")
		if !slices.Contains(ids, "") {
			whole = c.sameInspectLog(b, ids, versions)
		}
		if whole != nil {
			leaderboard.EachParallel(len(log.Samples), func(i int) {
				if ids[i] == "" {
					return
				}
				d := filepath.Join(c.dir, "runs", ids[i])
				tj, t, err := c.transcriptOf(ids[i])
				if err == nil {
					_, err = export.RecomputeSampleOf(log.Samples[i], tj, t, d)
				}
				if err != nil {
					found[i].bad("%s: run %s: %v", rel, ids[i], err)
					return
				}
				found[i].ok = true
			})
		}
		ok := 0
		for i, f := range found {
			c.replay(f)
			if f.ok || (whole == nil && ids[i] != "") {
				ok++
			}
			if ids[i] != "" {
				in[ids[i]] = append(in[ids[i]], rel)
			}
		}
		switch {
		case whole == nil:
			c.claim(rel)
		case ok == len(found) && ok > 0:
			c.bad("%s: %v", rel, whole)
		}
		fmt.Fprintf(c.w, "  %s: %d samples, each exactly what its run's transcript gives\n", rel, ok)
	}
	for _, id := range onDisk {
		if !c.snap.has("runs/" + id + "/" + export.TranscriptFile) {
			continue
		}
		switch where := in[id]; {
		case len(where) == 0:
			c.bad("%s/: no eval log holds a sample of run %s (sealrun publish writes one log per track and agent, with a sample of each of their runs)", publish.InspectDir, id)
		case len(where) > 1:
			c.bad("%s/: run %s is a sample of %d logs (%s); sealrun publish puts each run in one", publish.InspectDir, id, len(where), strings.Join(where, ", "))
		}
	}
}

// sigstoreBundles checks each run's Sigstore bundle (result.sigstore.json): it carries the very
// envelope of result.att.json, and, with the timestamp authority's chain, a timestamp that
// checks over its signature. A bundle with a timestamp and no chain to check it stays unchecked.
func (c *checker) sigstoreBundles(onDisk []string) {
	for _, id := range onDisk {
		rel := "runs/" + id + "/" + filepath.Base(attest.BundlePath("result.att.json"))
		if !c.snap.has(rel) || c.verified[id] == nil {
			continue // none; or the run's attestation did not verify (runs named it)
		}
		b, _, err := c.snap.read(rel, "Sigstore bundle", attest.MaxEnvelopeBytes)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		own, _, _ := c.snap.read("runs/"+id+"/result.att.json", "attestation", attest.MaxEnvelopeBytes)
		env, err := attest.EnvelopeOf(b)
		if err != nil || !attest.SameEnvelope(env, own) {
			c.bad("%s: carries another envelope than runs/%s/result.att.json (%v)", rel, id, err)
			continue
		}
		tokens, err := attest.BundleTimestamps(b)
		switch {
		case err != nil:
			c.bad("%s: %v", rel, err)
		case len(tokens) == 0:
			c.claim(rel) // the envelope alone, checked above
		case c.chain == nil:
			c.why[rel] = "its RFC 3161 timestamp is checked only with the authority's chain (--tsa-chain)"
		default:
			at, tsa, err := attest.CheckBundleTimestamps(b, env, c.chain)
			if err != nil {
				c.bad("%s: %v", rel, err)
				continue
			}
			c.claim(rel)
			fmt.Fprintf(c.w, "  %s: timestamped by %s: the attestation existed by %s\n", rel, tsa, at.Format(time.RFC3339))
		}
	}
}

// ledgerTimestamps checks each ledger's head timestamp (LEDGER.tsr), with the timestamp
// authority's chain: of one of the ledger's signed heads, by that authority.
func (c *checker) ledgerTimestamps(meta publish.Publication, ks []leaderboard.Key) {
	for _, l := range meta.Ledgers {
		rel := l + ".tsr"
		p := filepath.Join(c.dir, filepath.FromSlash(rel))
		if _, err := os.Stat(p); err != nil || c.chain == nil {
			continue // none; or no chain (account names it unchecked)
		}
		der, err := fileio.ReadLimited(p, "timestamp", attest.MaxTimestampResponse)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		ls, err := leaderboard.LoadLedgers([]string{filepath.Join(c.dir, filepath.FromSlash(l))}, ks)
		if err != nil || len(ls) != 1 {
			continue // boards named it
		}
		at, tsa, _, err := attest.CheckHeadTimestamp(der, ls[0].Heads, c.chain)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		c.claim(rel)
		fmt.Fprintf(c.w, "  %s: a head of %s, timestamped by %s at %s\n", rel, l, tsa, at.Format(time.RFC3339))
	}
}

// sameInspectLog checks that log, an eval log whose samples (of runs ids) each checked, is
// byte for byte the log export.Inspect makes of those runs.
func (c *checker) sameInspectLog(log []byte, ids, versions []string) error {
	want, err := c.inspectLogFor(ids, versions)
	if err != nil {
		return err
	}
	if !bytes.Equal(log, want) {
		i := 0
		for i < len(log) && i < len(want) && log[i] == want[i] {
			i++
		}
		return fmt.Errorf("not the eval log its runs' transcripts give (it differs at byte %d: its header, results or the order of its samples was edited)", i)
	}
	return nil
}

// inspectHeaderRuns reads the runs an eval log's header lists (eval.metadata.sealrun.runs: each
// run's id and the sealrun version that made its sample), the members before its samples only.
// ok is false where the header is not one sealrun writes: the caller then reads every sample.
func inspectHeaderRuns(r io.Reader) (ids, versions []string, ok bool) {
	d := json.NewDecoder(r)
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, false
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil, nil, false
		}
		if k == "samples" {
			break
		}
		if k != "eval" {
			var skip json.RawMessage
			if d.Decode(&skip) != nil {
				return nil, nil, false
			}
			continue
		}
		var eval struct {
			Metadata struct {
				Sealrun struct {
					Runs []struct {
						Run     string `json:"run"`
						Version string `json:"sealrun_version"`
					} `json:"runs"`
				} `json:"sealrun"`
			} `json:"metadata"`
		}
		if d.Decode(&eval) != nil {
			return nil, nil, false
		}
		for _, r := range eval.Metadata.Sealrun.Runs {
			if !attest.ValidRunID(r.Run) {
				return nil, nil, false
			}
			ids, versions = append(ids, r.Run), append(versions, r.Version)
		}
	}
	return ids, versions, len(ids) > 0
}

// inspectLogFor makes again the eval log of the runs ids, each sample as the sealrun version
// versions names made it.
func (c *checker) inspectLogFor(ids, versions []string) ([]byte, error) {
	runs, err := c.inspectRuns(ids, versions)
	if err != nil {
		return nil, err
	}
	return export.Inspect(runs)
}

// inspectLogDigest is the SHA-256 of inspectLogFor's log, made as it is written.
func (c *checker) inspectLogDigest(ids, versions []string) (string, error) {
	runs, err := c.inspectRuns(ids, versions)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if err := export.InspectTo(h, runs); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (c *checker) inspectRuns(ids, versions []string) ([]export.Run, error) {
	runs := make([]export.Run, len(ids))
	for i, id := range ids {
		tj, t, err := c.transcriptOf(id)
		if err != nil {
			return nil, err
		}
		runs[i] = export.Run{T: t, Src: export.SourceOf(tj, t, versions[i])}
	}
	return runs, nil
}

// inspectHeader reads the runs an eval log of the publication names in its header (from disk,
// only as far as its samples): a hint, which only the log's digest confirms.
func (c *checker) inspectHeader(rel string) (ids, versions []string, ok bool) {
	if !c.snap.has(rel) {
		return nil, nil, false
	}
	f, err := fileio.OpenRegular(filepath.Join(c.dir, filepath.FromSlash(rel)), "Inspect eval log")
	if err != nil {
		return nil, nil, false
	}
	defer f.Close()
	return inspectHeaderRuns(f)
}

// loaded is one run's transcript.json, read once for every export of it checked.
type loaded struct {
	once sync.Once
	tj   []byte
	t    *transcript.Transcript
	err  error
}

// transcriptOf loads the run's transcript.json once (export.Load), for its trajectory.json, its
// Inspect sample and the log that holds it.
func (c *checker) transcriptOf(id string) ([]byte, *transcript.Transcript, error) {
	c.mu.Lock()
	if c.loads == nil {
		c.loads = map[string]*loaded{}
	}
	l := c.loads[id]
	if l == nil {
		l = &loaded{}
		c.loads[id] = l
	}
	c.mu.Unlock()
	l.once.Do(func() { l.tj, l.t, l.err = export.Load(filepath.Join(c.dir, "runs", id)) })
	return l.tj, l.t, l.err
}

// seed gives the run's transcript.json as the transcript check read it (exactly what its log
// and bodies give), so that its exports are made from it without reading it again.
func (c *checker) seed(id string, tj []byte, t *transcript.Transcript) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loads == nil {
		c.loads = map[string]*loaded{}
	}
	if c.loads[id] == nil {
		l := &loaded{tj: tj, t: t}
		l.once.Do(func() {})
		c.loads[id] = l
	}
}
