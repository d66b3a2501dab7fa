package publish

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verify checks a publication offline: every file against SHA256SUMS, publication.json against
// the directory, every attestation with the trusted keys (keyPaths; none: the publication's own
// keys/, whose key ids it prints) and the files it binds, the tracks, the ledgers' accounting, and
// that the boards are exactly what the attestations give. It writes what it checked and what a
// reader may conclude to w. A publication that does not check is an *Error of Kind Invalid.
func Verify(dir string, keyPaths []string, w io.Writer) error {
	return VerifyWitnessed(dir, keyPaths, nil, 0, w)
}

// VerifyWitnessed is Verify that also requires of each published ledger a head cosigned by
// quorum of the witnesses ws (none: no such requirement), naming who cosigned it.
func VerifyWitnessed(dir string, keyPaths []string, ws []*witness.Verifier, quorum int, w io.Writer) error {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return ioErr(fmt.Errorf("publication %s: not a directory (%v)", dir, err))
	}
	c := &checker{dir: dir, w: w}
	if err := c.files(); err != nil {
		return err
	}
	meta, onDisk, ok := c.meta()
	if !ok {
		return publicationVerdict(w, c.problems)
	}
	if len(keyPaths) == 0 {
		keyPaths = []string{filepath.Join(dir, "keys")}
		fmt.Fprintf(w, "keys: no --key given, so the publication's own keys/ are trusted; compare these key ids with the operator's:\n")
	} else {
		fmt.Fprintf(w, "keys: trusted as given:\n")
	}
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return ioErr(err)
	}
	for _, k := range ks {
		fmt.Fprintf(w, "  %s  key id %s\n", k.Name, k.KeyID)
	}
	c.runs(onDisk, keyPaths)
	c.transcripts(onDisk)
	c.inspectLogs()
	boards, ok := c.boards(meta, keyPaths)
	if len(ws) > 0 {
		c.witnessed(meta, ks, ws, quorum)
		c.witnessedRuns(meta, ks, ws, quorum)
	}
	if ok && len(c.problems) == 0 {
		summarisePublication(w, dir, boards["leaderboard.json"], meta)
	}
	return publicationVerdict(w, c.problems)
}

// checker gathers the problems of a publication, each a line naming the file.
type checker struct {
	dir      string
	w        io.Writer
	problems []string
	verified map[string]*attest.Verified // run id -> its attestation, as runs verified it
}

func (c *checker) bad(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// files checks that the publication holds exactly the files SHA256SUMS lists, each with its sum.
func (c *checker) files() error {
	dir, w := c.dir, c.w
	sums, err := readSums(filepath.Join(dir, publicationSums))
	if err != nil {
		return &Error{Kind: Invalid, Err: fmt.Errorf("publication %s: %w; it is not a publication sealrun publish wrote, or its list was damaged", dir, err)}
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() || rel == publicationSums:
		case !d.Type().IsRegular():
			c.bad("%s: not a regular file (%s); a publication holds only files", rel, d.Type())
		default:
			want, ok := sums[rel]
			if !ok {
				c.bad("%s: added: not in SHA256SUMS", rel)
				return nil
			}
			seen[rel] = true
			got, err := fileio.SHA256(p)
			if err != nil {
				return err
			}
			if got != want {
				c.bad("%s: edited: sha256 %s, SHA256SUMS says %s", rel, got, want)
			}
		}
		return nil
	})
	if err != nil {
		return ioErr(err)
	}
	var missing []string
	for p := range sums {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		c.bad("%s: removed: SHA256SUMS lists it", p)
	}
	fmt.Fprintf(w, "files: %d listed in SHA256SUMS, %d present and equal\n", len(sums), len(seen)-countEdited(c.problems))
	return nil
}

// meta reads publication.json and checks its runs against runs/; ok is false when it cannot be
// read (nothing further can be checked).
func (c *checker) meta() (meta Publication, onDisk []string, ok bool) {
	dir := c.dir
	mb, err := os.ReadFile(filepath.Join(dir, publicationMeta))
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(mb))
		d.DisallowUnknownFields()
		err = d.Decode(&meta)
	}
	if err != nil || meta.Format != publicationFormat {
		c.bad("%s: unreadable or not %s (%v)", publicationMeta, publicationFormat, err)
		return meta, nil, false
	}
	runDirs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	for _, r := range runDirs {
		onDisk = append(onDisk, filepath.Base(r))
	}
	sort.Strings(onDisk)
	if strings.Join(onDisk, ",") != strings.Join(meta.Runs, ",") {
		c.bad("runs/: holds %s; %s lists %s", listOrNone(onDisk), publicationMeta, listOrNone(meta.Runs))
	}
	return meta, onDisk, true
}

// runs checks that every run's attestation verifies with a trusted key, names its run, and binds
// the run's files (the runs on every CPU, their findings in order).
func (c *checker) runs(onDisk, keyPaths []string) {
	dir := c.dir
	found := make([]finding, len(onDisk))
	leaderboard.EachParallel(len(onDisk), func(i int) {
		id, out := onDisk[i], &found[i]
		d := filepath.Join(dir, "runs", id)
		att := filepath.Join(d, "result.att.json")
		if _, err := os.Stat(att); err != nil {
			out.bad("runs/%s: no result.att.json", id)
			return
		}
		var lastErr error
		for _, kp := range keyFiles(keyPaths) {
			f := attest.Files{Key: kp}
			for _, o := range []struct {
				file string
				dst  *string
			}{{"report.json", &f.Report}, {"bundle.tar.gz", &f.Bundle}, {"audit.jsonl", &f.Audit}, {"track.toml", &f.Track}} {
				if _, err := os.Stat(filepath.Join(d, o.file)); err == nil {
					*o.dst = filepath.Join(d, o.file)
				}
			}
			v, err := attest.VerifyFile(att, f)
			if err != nil {
				lastErr = err
				continue
			}
			if v.Statement.Predicate.Run.ID != id {
				out.bad("runs/%s: its attestation is of run %s", id, v.Statement.Predicate.Run.ID)
			} else {
				out.verified = v
			}
			return
		}
		out.bad("runs/%s: the attestation or a file it binds does not verify with a trusted key: %v", id, lastErr)
	})
	for i, f := range found {
		c.replay(f)
		if f.verified != nil {
			c.keep(onDisk[i], f.verified)
		}
	}
}

// finding is what the check of one run (or sample) found, kept to be replayed in order.
type finding struct {
	lines, problems []string
	verified        *attest.Verified
	ok              bool
	bodies          transcript.Counts
}

func (f *finding) bad(format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

func (f *finding) say(format string, args ...any) {
	f.lines = append(f.lines, fmt.Sprintf(format, args...))
}

// replay writes a finding's lines and records its problems, as the check would have one by one.
func (c *checker) replay(f finding) {
	for _, l := range f.lines {
		fmt.Fprintln(c.w, l)
	}
	c.problems = append(c.problems, f.problems...)
}

// boards rebuilds the boards from the publication's own files, with the ledgers' accounting, and
// checks the published ones are exactly those; ok is false when they cannot be rebuilt.
func (c *checker) boards(meta Publication, keyPaths []string) (map[string][]byte, bool) {
	dir := c.dir
	boards, acct, err := publicationBoardsWith(dir, meta, keyPaths)
	if err != nil {
		c.bad("leaderboard: cannot be rebuilt: %v", err)
		return nil, false
	}
	for _, a := range acct {
		c.bad("%s", a)
	}
	names := make([]string, 0, len(boards))
	for n := range boards {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		have, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			c.bad("%s: missing (%v)", n, errors.Unwrap(err))
			continue
		}
		if !bytes.Equal(have, boards[n]) {
			c.bad("%s: not what the attestations give (rebuild it with the command in VERIFY.md and compare)", n)
		}
	}
	return boards, true
}

// keyFiles lists the key files of --key paths (files, or directories of *.pub / *.pem).
func keyFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			a, _ := filepath.Glob(filepath.Join(p, "*.pub"))
			b, _ := filepath.Glob(filepath.Join(p, "*.pem"))
			out = append(out, append(a, b...)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func countEdited(problems []string) int {
	n := 0
	for _, p := range problems {
		if strings.Contains(p, ": edited: ") {
			n++
		}
	}
	return n
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// publicationBoardsWith rebuilds the boards with the reader's keys; the published boards were
// built with the publication's keys, whose names the board carries, so the reader's keys must
// be the same files by name for the bytes to agree: they are loaded from keys/ when they verify
// the same (key ids equal), else from the reader's files.
func publicationBoardsWith(dir string, meta Publication, keyPaths []string) (map[string][]byte, []string, error) {
	own, err := leaderboard.LoadKeys([]string{filepath.Join(dir, "keys")})
	if err != nil {
		return nil, nil, err
	}
	given, err := leaderboard.LoadKeys(absPaths(keyPaths))
	if err != nil {
		return nil, nil, err
	}
	trusted := map[string]bool{}
	for _, k := range given {
		trusted[k.KeyID] = true
	}
	for _, k := range own {
		if !trusted[k.KeyID] {
			return nil, []string{fmt.Sprintf("keys/%s (key id %s) is not among the trusted keys; a run it signed would count on the published board", k.Name, k.KeyID)}, nil
		}
	}
	return publicationBoards(dir, meta)
}

func absPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if a, err := filepath.Abs(p); err == nil {
			out[i] = a
		} else {
			out[i] = p
		}
	}
	return out
}

// summarisePublication prints the boards' rows and what they mean.
func summarisePublication(w interface{ Write([]byte) (int, error) }, dir string, boardJSON []byte, meta Publication) {
	fmt.Fprintf(w, "runs: %d, every attestation verified with a trusted key, with the files it binds\n", len(meta.Runs))
	if meta.Suite == leaderboard.SuiteExam {
		var b leaderboard.Board
		if json.Unmarshal(boardJSON, &b) == nil {
			for _, t := range b.Tables {
				fmt.Fprintf(w, "track %s %s (%s, id %s): %d row(s)\n", t.Track.Name, t.Track.Version, t.Track.Status, t.Track.ID, len(t.Rows))
				for _, r := range t.Rows {
					kind := "official"
					if r.Provisional {
						kind = fmt.Sprintf("provisional: %d of %d seeds%s", r.N, r.Required, missingSeeds(r))
					}
					fmt.Fprintf(w, "  %s  %s ± %s  (%d valid seeds, %d failed, %d invalid; %s)\n", r.Agent.Name(), pctOrDash(r.MeanPct), pctOrDash(r.SEPct), r.N, r.Failed, len(r.Invalid), kind)
				}
			}
		}
	}
	if len(meta.Ledgers) > 0 {
		fmt.Fprintf(w, "ledgers: %s: every run they hold of these tracks ended and is published here, and every run here is in them\n", strings.Join(meta.Ledgers, ", "))
	} else {
		fmt.Fprintf(w, "ledgers: none published, so a run the operator withheld cannot be detected; the seeds each row needs are counted above\n")
	}
	fmt.Fprintf(w, `A reader may conclude: each run listed ran under the track file of its id, sealed as the track
pins it, and scored what its signed attestation says; the leaderboard files are exactly what those
attestations give. Not: that the signing host was honest (a signature says which key signed, not
what the hardware did) or that the model was the one named beyond what the gateway recorded.
`)
}

func missingSeeds(r leaderboard.Row) string {
	have := map[int64]bool{}
	for _, run := range r.Runs {
		have[run.Seed] = true
	}
	var miss []string
	for s := int64(1); s <= r.Required; s++ {
		if !have[s] {
			miss = append(miss, fmt.Sprint(s))
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return "; seeds missing: " + strings.Join(miss, ", ")
}

func publicationVerdict(w interface{ Write([]byte) (int, error) }, problems []string) error {
	if len(problems) == 0 {
		fmt.Fprintln(w, "publication: VALID")
		return nil
	}
	fmt.Fprintf(w, "publication: NOT VALID (%d problem(s)):\n", len(problems))
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	return &Error{Kind: Invalid, Err: fmt.Errorf("the publication does not check: %d problem(s), listed", len(problems)), Listed: true}
}

func pctOrDash(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *v)
}

// witnessed checks that each published ledger carries a head quorum of ws cosigned.
func (c *checker) witnessed(meta Publication, ks []leaderboard.Key, ws []*witness.Verifier, quorum int) {
	if len(meta.Ledgers) == 0 {
		c.bad("witnesses: --witness given, but the publication has no ledger to check against them")
		return
	}
	var paths []string
	for _, l := range meta.Ledgers {
		paths = append(paths, filepath.Join(c.dir, filepath.FromSlash(l)))
	}
	ls, err := leaderboard.LoadLedgers(paths, ks)
	if err != nil {
		return // boards named it
	}
	vs := make([]signature.Verifier, len(ks))
	for i, k := range ks {
		vs[i] = k.Verifier
	}
	for i, l := range ls {
		got, err := witness.CheckLedger(l, vs, ws, quorum)
		if err != nil {
			c.bad("%s: %v", meta.Ledgers[i], err)
			continue
		}
		fmt.Fprintf(c.w, "witnessed: %s: head of %d entries cosigned by %s", meta.Ledgers[i], got.Head.Size, strings.Join(got.By, ", "))
		if len(got.NotBy) > 0 {
			fmt.Fprintf(c.w, "; not by %s", strings.Join(got.NotBy, ", "))
		}
		fmt.Fprintf(c.w, "; %d entries after it\n", got.After)
	}
}
