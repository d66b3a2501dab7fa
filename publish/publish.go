// Package publish writes a publication — one directory of sealed runs, their tracks, keys,
// ledgers, boards, VERIFY.md and SHA256SUMS that a reader checks offline — and checks one
// (Verify), as sealrun publish and sealrun verify-publication do.
package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"path"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/policy"
)

// A publication is a directory a reader checks offline (docs/READER.md, "Publishing results"):
//
//	runs/<run id>/     each run as gathered: result.att.json, report.json, track.toml, ...
//	                   with transcript.json, transcript.html and trajectory.json (ATIF),
//	                   and witnessed.json where the ledger carries a cosigned head it ended under
//	tracks/            the track files the runs were judged under
//	keys/              the public keys that signed them
//	ledgers/           the hosts' run ledgers (sealrun ledger export), when given
//	inspect/           the runs as Inspect eval logs, one per track and agent
//	leaderboard.{json,md,html}   the boards, built from the attestations above
//	publication.json   what the directory holds
//	VERIFY.md          the commands that check it
//	SHA256SUMS         every other file's sha256, as sha256sum prints them
const (
	Format   = "sealrun-publication/v1"
	SumsFile = digest.SumsFile
	// ManifestFile is SHA256SUMS signed (DSSE, attest.ManifestPayloadType) with the host's key:
	// a mirror cannot add, drop or swap a file unseen.
	ManifestFile = "SHA256SUMS.dsse.json"
	MetaFile     = "publication.json"
	// MaxFile bounds one file a publication may hold (a bundle is at most a track's
	// artifact cap; an audit log 64 MiB).
	MaxFile = 4 << 30
)

// Publication is publication.json: what a publication directory holds.
type Publication struct {
	Format  string   `json:"format"`
	Suite   string   `json:"suite"`
	Runs    []string `json:"runs"`
	Tracks  []string `json:"tracks"`
	Keys    []string `json:"keys"`
	Ledgers []string `json:"ledgers"`
	// HumanBaseline: the boards show every person's runs of a track as one row (publish
	// --human-baseline, leaderboard's HumanBaseline).
	HumanBaseline bool `json:"human_baseline,omitempty"`
	// Manifest names the signed list of files (ManifestFile) where publish signed it: a
	// publication that says so and lacks it had its signature stripped, and is not valid.
	Manifest string `json:"manifest,omitempty"`
}

// Options are what Write publishes.
type Options struct {
	Out    string   // the directory to create (must not exist)
	Suite  string   // leaderboard.SuiteExam (one board per exam track) or leaderboard.SuiteAIRS
	Keys   []string // the public keys that signed the runs (PEM files or directories of *.pub)
	Tracks []string // track files (default: each gathered run's own track.toml)
	// Ledgers are the hosts' exported run ledgers; with them, every run they hold must be
	// published and ended.
	Ledgers []string
	Inputs  []string  // results directories (sealrun results gather) or attestation files
	Log     io.Writer // each rejected attestation or unaccounted run, one per line (nil: discarded)
	// Redact withholds bodies: "all", "RUN", "RUN:gateway-N", "RUN:call-N", "RUN:terminal-N" (publish --redact).
	// Their hashes stay in the audit logs; the transcripts say they were withheld.
	Redact []string
	// Version is the sealrun writing it, as each run's trajectory.json names its maker.
	Version string
	// HumanBaseline makes every person's runs of a track one row on the boards.
	HumanBaseline bool
	// Signer signs the manifest (SHA256SUMS, as ManifestFile) with the host's key, whose
	// public half must be among Keys. Nil: the publication's manifest is unsigned, and the
	// reader's verdict says so.
	Signer signature.Signer
}

// Summary is what a written publication holds.
type Summary struct {
	Runs, Tracks, Keys, Ledgers, Files int
	Witnessed                          int  // runs with a witnessed.json
	Timestamped                        int  // ledgers with a timestamp of their head (.tsr)
	Signed                             bool // the manifest is signed (ManifestFile)
}

// Write verifies every attestation of the inputs with the keys and writes the publication
// directory: the runs' files as gathered, the tracks, the keys, the ledgers, the boards built
// from those attestations alone, publication.json, VERIFY.md and SHA256SUMS. The directory
// appears whole, by rename, or not at all. An error of the caller's input or of a file is an
// *Error (its Kind says which); any other says why the inputs cannot be published.
func Write(o Options) (*Summary, error) {
	switch {
	case o.Out == "":
		return nil, usageErr(opt.New("publish.Options", "Out", "none given: give the publication directory to create"))
	case len(o.Keys) == 0:
		return nil, usageErr(opt.New("publish.Options", "Keys", "none given: give the public key(s) that signed the runs (a PEM file or a directory of *.pub files)"))
	case o.Suite != leaderboard.SuiteExam && o.Suite != leaderboard.SuiteAIRS:
		return nil, usageErr(fmt.Errorf("suite %q: use exam or airs", o.Suite))
	}
	var s Summary
	if err := write(o, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

func write(o Options, s *Summary) error {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	in, trackFile, err := load(o, log)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, e := range in.Entries {
		ids[e.Predicate.Run.ID] = true
	}
	red, err := parseRedactions(o.Redact, ids)
	if err != nil {
		return usageErr(err)
	}
	parent := filepath.Dir(filepath.Clean(o.Out))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(o.Out)+".tmp-")
	if err != nil {
		return ioErr(fmt.Errorf("create the publication beside %s: %w", o.Out, err))
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	os.Chmod(tmp, 0o755)
	meta := Publication{Format: Format, Suite: o.Suite, Runs: []string{}, Tracks: []string{}, Keys: []string{}, Ledgers: []string{}, HumanBaseline: o.HumanBaseline}
	if o.Signer != nil {
		meta.Manifest = ManifestFile
	}
	if err := copyRuns(tmp, in, trackFile, red, &meta, o.Version); err != nil {
		return err
	}
	if err := writeInspectLogs(tmp, meta, o.Version); err != nil {
		return err
	}
	if err := copyTracks(tmp, in, trackFile, &meta); err != nil {
		return err
	}
	if err := copyKeysAndLedgers(tmp, o.Keys, o.Ledgers, &meta); err != nil {
		return err
	}
	proved, err := proveRuns(tmp, in, meta, log)
	if err != nil {
		return err
	}
	if err := signerAmongKeys(o.Signer, o.Keys); err != nil {
		return err
	}
	n, err := seal(tmp, meta, in, o.Signer, log)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, o.Out); err != nil {
		return ioErr(fmt.Errorf("move the publication into place at %s: %w", o.Out, err))
	}
	done = true
	fileio.SyncDir(parent)
	*s = Summary{Runs: len(meta.Runs), Tracks: len(meta.Tracks), Keys: len(meta.Keys), Ledgers: len(meta.Ledgers), Witnessed: proved, Files: n + 1, Signed: o.Signer != nil}
	if o.Signer != nil {
		s.Files++
	}
	for _, l := range meta.Ledgers {
		if _, err := os.Stat(filepath.Join(o.Out, filepath.FromSlash(l)) + ".tsr"); err == nil {
			s.Timestamped++
		}
	}
	return nil
}

// load verifies every attestation of the inputs with the keys, and returns them with the track
// files given (track id -> file).
func load(o Options, log io.Writer) (*leaderboard.Inputs, map[string]string, error) {
	out, keyPaths, trackPaths, inputs := o.Out, o.Keys, o.Tracks, o.Inputs
	if _, err := os.Lstat(out); err == nil {
		return nil, nil, usageErr(opt.New("publish.Options", "Out", fmt.Sprintf("%s exists; a publication is written once: choose a new directory", out)))
	}
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return nil, nil, ioErr(err)
	}
	var ts []*policy.Track
	trackFile := map[string]string{} // track id -> file
	for _, p := range trackPaths {
		t, err := policy.Load(p)
		if err != nil {
			return nil, nil, ioErr(opt.Wrap("publish.Options", "Tracks", err))
		}
		ts = append(ts, t)
		trackFile[t.ID] = p
	}
	in, err := leaderboard.Load(inputs, ks, ts)
	if err != nil {
		return nil, nil, ioErr(err)
	}
	if len(in.Rejected) > 0 {
		for _, r := range in.Rejected {
			fmt.Fprintf(log, "  %s: %s\n", r.Path, r.Reason)
		}
		return nil, nil, fmt.Errorf("%d attestation(s) did not verify (listed); a publication holds only what verifies: remove them from the inputs, or give the key that signed them", len(in.Rejected))
	}
	if len(in.Entries) == 0 {
		return nil, nil, fmt.Errorf("no attestation found under %s; gather runs first (sealrun results gather RUN DIR)", strings.Join(inputs, ", "))
	}
	if _, rejected, _ := leaderboard.Amendments(in); len(rejected) > 0 {
		for _, r := range rejected {
			fmt.Fprintf(log, "  %s: %s\n", r.Path, r.Reason)
		}
		return nil, nil, fmt.Errorf("%d amendment(s) do not apply to the runs given (listed); a publication holds only what its boards apply: give the run each amends, or remove it", len(rejected))
	}
	return in, trackFile, nil
}

// copyRuns copies each run: a gathered run's directory whole (its files, and the bodies its
// audit log hashes but those withheld, with a transcript made from them), else the attestation
// alone; a run's own track.toml is taken for its track when none was given.
func copyRuns(tmp string, in *leaderboard.Inputs, trackFile map[string]string, red *redactions, meta *Publication, version string) error {
	for _, e := range in.Entries {
		id := e.Predicate.Run.ID
		if !attest.ValidRunID(id) {
			return fmt.Errorf("%s: run id %q cannot name a directory", e.Path, id)
		}
		dst := filepath.Join(tmp, "runs", id)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return ioErr(err)
		}
		// Its amendments first: its transcript, made below, says what they say.
		if err := copyAmendments(in, id, dst); err != nil {
			return err
		}
		src := filepath.Dir(e.Path)
		if a := e.Predicate.Audit; a.Entries > 0 {
			if _, err := os.Stat(filepath.Join(src, "audit.jsonl")); err != nil || filepath.Base(src) != id {
				// A reader could not check what the agent did: Verify would refuse it.
				return fmt.Errorf("%s: run %s's attestation names an audit log of %d entries, and none is beside it: give the run's directory as sealrun results gather lays it out (sealrun results gather %s DIR)", e.Path, id, a.Entries, id)
			}
		}
		if filepath.Base(src) == id {
			if err := copyRegularFiles(src, dst); err != nil {
				return err
			}
			// The host's own records: neither signed nor made again from what is, so a reader
			// could not check them (Verify would name them unchecked).
			for _, name := range unpublished {
				os.Remove(filepath.Join(dst, name))
			}
			os.Remove(filepath.Join(dst, TrajectoryFile)) // a copy's is not this publication's: made again below
			if _, err := os.Stat(filepath.Join(src, "audit.jsonl")); err == nil {
				if err := copyTrajectory(src, dst, e.Predicate, red, version); err != nil {
					return err
				}
			}
		} else if err := copyFile(e.Path, filepath.Join(dst, "result.att.json")); err != nil {
			return err
		}
		meta.Runs = append(meta.Runs, id)
		tid := e.Predicate.Track.ID
		if _, ok := trackFile[tid]; !ok {
			own := filepath.Join(src, "track.toml")
			if t, err := policy.Load(own); err == nil && t.ID == tid {
				trackFile[tid] = own
			}
		}
	}
	sort.Strings(meta.Runs)
	return nil
}

// copyAmendments copies the verified amendments of run id into dst/amendments, each named by the
// SHA-256 of its statement (as sealrund keeps them).
func copyAmendments(in *leaderboard.Inputs, id, dst string) error {
	for _, a := range in.Amendments {
		if a.Statement.Predicate.Run != id {
			continue
		}
		dir := filepath.Join(dst, AmendmentsDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return ioErr(err)
		}
		if err := copyFile(a.Path, filepath.Join(dir, string(a.Digest)+".att.json")); err != nil {
			return err
		}
	}
	return nil
}

// AmendmentsDir holds a published run's amendments (sealrun amend), each
// <sha256 of its statement>.att.json.
const AmendmentsDir = "amendments"

// unpublished are the files of a gathered run a publication leaves out: summary.txt (the
// daemon's summary, naming the host's paths) and run.json (its record of the run).
var unpublished = []string{"summary.txt", "run.json"}

// copyTracks copies the track file of every run's track, once.
func copyTracks(tmp string, in *leaderboard.Inputs, trackFile map[string]string, meta *Publication) error {
	for _, e := range in.Entries {
		tid := e.Predicate.Track.ID
		p, ok := trackFile[tid]
		if !ok {
			return opt.New("publish.Options", "Tracks", fmt.Sprintf("run %s was judged under track %s (%s), and no track file with that id was given: give it", e.Predicate.Run.ID, e.Predicate.Track.Name, tid))
		}
		name := fmt.Sprintf("%s-%s.toml", e.Predicate.Track.Name, tid[:12])
		dst := filepath.Join(tmp, "tracks", name)
		if _, err := os.Stat(dst); err == nil {
			continue
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := copyFile(p, dst); err != nil {
			return err
		}
		meta.Tracks = append(meta.Tracks, "tracks/"+name)
	}
	sort.Strings(meta.Tracks)
	return nil
}

// copyKeysAndLedgers copies the keys (PEM files, under their own names) and the ledgers.
func copyKeysAndLedgers(tmp string, keyPaths, ledgerPaths []string, meta *Publication) error {
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return usageErr(err)
	}
	for _, k := range ks {
		f := k.Path
		dst := filepath.Join(tmp, "keys", filepath.Base(f))
		if _, err := os.Stat(dst); err == nil {
			return usageErr(fmt.Errorf("two keys are named %s; give each key file its own name", filepath.Base(f)))
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := copyFile(f, dst); err != nil {
			return err
		}
		meta.Keys = append(meta.Keys, "keys/"+filepath.Base(f))
	}
	for _, p := range ledgerPaths {
		dst := filepath.Join(tmp, "ledgers", filepath.Base(p))
		if _, err := os.Stat(dst); err == nil {
			return usageErr(fmt.Errorf("two ledgers are named %s; give each host's ledger its own name (ledger-<host>.jsonl)", filepath.Base(p)))
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := copyFile(p, dst); err != nil {
			return err
		}
		if _, err := os.Stat(p + ".tsr"); err == nil { // its witnessed head's timestamp (ledger export --tsa)
			if err := copyFile(p+".tsr", dst+".tsr"); err != nil {
				return err
			}
		}
		meta.Ledgers = append(meta.Ledgers, "ledgers/"+filepath.Base(p))
	}
	sort.Strings(meta.Keys)
	sort.Strings(meta.Ledgers)
	return nil
}

// seal writes the boards (from the copies, with paths relative to the publication),
// publication.json, VERIFY.md and SHA256SUMS, and syncs the tree. It returns how many files
// SHA256SUMS lists.
func seal(tmp string, meta Publication, in *leaderboard.Inputs, signer signature.Signer, log io.Writer) (int, error) {
	boards, problems, err := Boards(tmp, meta, leaderboard.LoadOptions{})
	if err != nil {
		return 0, err
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(log, "  %s\n", p)
		}
		return 0, fmt.Errorf("the published runs are not all accounted for (%d problem(s), listed); publish every run the ledgers hold, or wait for runs to end", len(problems))
	}
	for name, b := range boards {
		if err := writeFileSync(filepath.Join(tmp, name), b); err != nil {
			return 0, err
		}
	}
	mj, _ := json.MarshalIndent(meta, "", "  ")
	if err := writeFileSync(filepath.Join(tmp, MetaFile), append(mj, '\n')); err != nil {
		return 0, err
	}
	// VERIFY.md is among the boards: made from the publication's own files, as the reader's
	// check makes it again.
	sums, n, err := SumTree(tmp)
	if err != nil {
		return 0, err
	}
	if err := writeFileSync(filepath.Join(tmp, SumsFile), sums); err != nil {
		return 0, err
	}
	if signer != nil {
		env, err := attest.SignManifest(context.Background(), sums, signer)
		if err != nil {
			return 0, err
		}
		if err := writeFileSync(filepath.Join(tmp, ManifestFile), env); err != nil {
			return 0, err
		}
	}
	if err := syncTree(tmp); err != nil {
		return 0, ioErr(err)
	}
	return n, nil
}

// Boards builds the boards of a publication directory from its own files, with paths
// relative to it, and what the ledgers (or, without them, the seed counts) say is missing.
// The runs' attestations are read and verified as o says (leaderboard.LoadWith: a reader who
// verified them already, from the bytes it hashed).
func Boards(dir string, meta Publication, o leaderboard.LoadOptions) (map[string][]byte, []string, error) {
	at := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	ks, err := leaderboard.LoadKeys([]string{at("keys")})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, "keys"), err)
	}
	var ts []*policy.Track
	for _, p := range meta.Tracks {
		t, err := policy.Load(at(p))
		if err != nil {
			return nil, nil, err
		}
		ts = append(ts, t)
	}
	var ledgerPaths []string
	for _, l := range meta.Ledgers {
		ledgerPaths = append(ledgerPaths, at(l))
	}
	in, ledgerErr, err := leaderboard.LoadWithLedgers([]string{at("runs")}, ks, ts, ledgerPaths, o)
	if err != nil {
		return nil, nil, err
	}
	in.HumanBaseline = meta.HumanBaseline
	rel := relativize(dir, in)
	var problems []string
	for _, r := range in.Rejected {
		problems = append(problems, fmt.Sprintf("%s: %s", r.Path, r.Reason))
	}
	if len(meta.Ledgers) > 0 {
		if ledgerErr != nil {
			return nil, append(problems, ledgerErr.Error()), nil
		}
		for _, l := range in.Ledgers {
			l.Name = rel(l.Name)
		}
	}
	name := leaderboard.SuiteExam
	if meta.Suite == leaderboard.SuiteAIRS {
		name = leaderboard.SuiteAIRS
	}
	suite, err := leaderboard.BuildSuite(name, in, ks, airs.Options{Transform: airs.MarchOf9s})
	if err != nil {
		return nil, nil, err
	}
	formats := map[string]string{"leaderboard.json": "json", "leaderboard.md": "markdown", "leaderboard.html": "html"}
	if name == leaderboard.SuiteAIRS {
		delete(formats, "leaderboard.html") // the AIRS board has no HTML form
	}
	if b, ok := suite.Board.(*leaderboard.Board); ok {
		b.Exports = true // each run's trajectory.json is beside it
	}
	boards := map[string][]byte{}
	for name, f := range formats {
		var b bytes.Buffer
		if err := suite.Board.Render(&b, f); err != nil {
			return nil, nil, err
		}
		boards[name] = b.Bytes()
	}
	problems = append(problems, suite.Unaccounted...)
	boards[VerifyFile] = verifyDoc(dir, meta, in)
	return boards, problems, nil
}

// VerifyFile is a publication's VERIFY.md: the commands that check it.
const VerifyFile = "VERIFY.md"

// relativize rewrites the inputs' paths, and the directory's prefix in their reasons and
// warnings, as a reader in the directory names them (VERIFY.md's commands run there); it returns
// the function that does so for one path.
func relativize(dir string, in *leaderboard.Inputs) func(string) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
		return p
	}
	for i := range in.Entries {
		in.Entries[i].Path = rel(in.Entries[i].Path)
	}
	for i := range in.Amendments {
		in.Amendments[i].Path = rel(in.Amendments[i].Path)
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	for _, rs := range [][]leaderboard.Rejection{in.Rejected, in.Skipped} {
		for i := range rs {
			rs[i].Path = rel(rs[i].Path)
			rs[i].Reason = filepath.ToSlash(strings.ReplaceAll(rs[i].Reason, prefix, ""))
		}
	}
	for i := range in.Entries {
		for j, w := range in.Entries[i].Warnings {
			in.Entries[i].Warnings[j] = strings.ReplaceAll(w, prefix, "")
		}
	}
	return rel
}

// verifyDoc is VERIFY.md: what the publication holds and the commands that check it.
func verifyDoc(dir string, meta Publication, in *leaderboard.Inputs) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Checking this publication\n\n")
	fmt.Fprintf(&b, "This directory (%s) holds %d sealed runs, the %d track file(s) they were judged under, the public key(s) that signed them", Format, len(meta.Runs), len(meta.Tracks))
	if len(meta.Ledgers) > 0 {
		fmt.Fprintf(&b, ", %d host run ledger(s)", len(meta.Ledgers))
	}
	fmt.Fprintf(&b, ", and the leaderboard built from those attestations alone. Nothing here needs a network.\n\n")
	// What the one step needs to check every file: the witnesses' keys where runs carry a
	// witnessed proof, the authority's chain where a ledger carries a timestamp.
	oneStep := "sealrun verify-publication . --key OPERATOR.pub"
	for _, id := range meta.Runs {
		if _, err := os.Stat(filepath.Join(dir, "runs", id, witness.RunProofFile)); err == nil {
			oneStep += " --witness WITNESS_KEY"
			break
		}
	}
	for _, l := range meta.Ledgers {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(l)) + ".tsr"); err == nil {
			oneStep += " --tsa-chain TSA-CHAIN.pem"
			break
		}
	}
	var quoted []string
	for _, id := range meta.Runs {
		if _, err := os.Stat(filepath.Join(dir, "runs", id, attest.TPMQuoteFile)); err == nil {
			quoted = append(quoted, id)
		}
	}
	if len(quoted) > 0 {
		oneStep += " --tpm ENROLLMENT.json --ek-ca TPM-MAKER-CA.pem"
	}
	fmt.Fprintf(&b, "## In one step\n\n```sh\n%s\n```\n\n", oneStep)
	fmt.Fprintf(&b, "Give the operator's public key as you obtained it, not from this directory: without --key, the keys in keys/ are used and their key ids printed, to compare with what the operator publishes elsewhere. It checks every file against SHA256SUMS (nothing missing, added or edited), every attestation and the files it names, each run's audit log, the bodies it hashes and the transcript, page, report and exports they give, every track, the run ledgers (a withheld or unended run is named), and that the leaderboard files and this one are exactly what the attestations give. It is strict: a file it cannot check (a witnessed proof without the witness's key, a timestamp without the authority's chain, a file publish does not write) makes the publication not valid, by name, unless you accept it unchecked with --allow-unchecked PATH (patterns with *), and the verdict then lists it.\n\n")
	fmt.Fprintf(&b, "## By hand\n\n```sh\nsha256sum -c SHA256SUMS    # and: find . -type f ! -name 'SHA256SUMS*' | sort  (no file beyond the list)\n")
	byID := map[string]*attest.Predicate{}
	for _, e := range in.Entries {
		byID[e.Predicate.Run.ID] = e.Predicate
	}
	key := "keys/" + filepath.Base(firstOr(meta.Keys, "sealrun.pub"))
	for _, id := range meta.Runs {
		d := "runs/" + id
		line := fmt.Sprintf("sealrun verify %s/result.att.json --key %s", d, key)
		for _, f := range []struct{ flag, file string }{{"--report", "report.json"}, {"--bundle", "bundle.tar.gz"}, {"--track", "track.toml"}} {
			if _, err := os.Stat(filepath.Join(dir, d, f.file)); err == nil {
				line += fmt.Sprintf(" %s %s/%s", f.flag, d, f.file)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, d, "audit.jsonl")); err == nil {
			line += " --transcript " + d // the audit log, every body it hashes, the transcript
		}
		fmt.Fprintln(&b, line)
	}
	args := "--key keys/ --suite " + meta.Suite
	for _, l := range meta.Ledgers {
		args += " --ledger " + l
	}
	if meta.HumanBaseline {
		args += " --human-baseline"
	}
	fmt.Fprintf(&b, "sealrun leaderboard %s runs/ --format json | diff - leaderboard.json\n", args)
	for _, l := range meta.Ledgers {
		fmt.Fprintf(&b, "sealrun ledger verify %s --key %s", l, key)
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(l)) + ".tsr"); err == nil {
			fmt.Fprintf(&b, " --tsa-chain TSA-CHAIN.pem   # its witnessed head's timestamp, %s.tsr, with the authority's chain", l)
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "```\n\n")
	if meta.Manifest != "" {
		fmt.Fprintf(&b, "## The list of files, signed\n\n%s is SHA256SUMS in a DSSE envelope signed with the host's key, so that a mirror cannot add, drop or swap a file and write the list again unseen. Check it with jq, base64 and openssl (an ECDSA key: openssl dgst -sha256 -verify KEY -signature sig.bin pae.bin), then check the files against the list as above:\n\n```sh\n", meta.Manifest)
		fmt.Fprintf(&b, "env=%s\n", meta.Manifest)
		fmt.Fprintf(&b, "type=$(jq -r .payloadType \"$env\")    # must be %s\n", attest.ManifestPayloadType)
		fmt.Fprintf(&b, "jq -r .payload \"$env\" | base64 -d > signed-sums\n")
		fmt.Fprintf(&b, "jq -r '.signatures[0].sig' \"$env\" | base64 -d > sig.bin\n")
		fmt.Fprintf(&b, "{ printf 'DSSEv1 %%d %%s %%d ' \"${#type}\" \"$type\" \"$(stat -c %%s signed-sums)\"; cat signed-sums; } > pae.bin\n")
		fmt.Fprintf(&b, "openssl pkeyutl -verify -pubin -inkey %s -rawin -in pae.bin -sigfile sig.bin    # Signature Verified Successfully\n", key)
		fmt.Fprintf(&b, "cmp signed-sums SHA256SUMS && rm signed-sums sig.bin pae.bin    # the list here is the list signed\n```\n\n")
	}
	fmt.Fprintf(&b, "Each run's transcript.html opens in a browser from this directory (no network); transcript.json is the same as data (sealrun's docs/TRANSCRIPT.md), trajectory.json the same as an ATIF trajectory for other tools (recomputed from transcript.json by verify-publication, or by sealrun verify RUN/result.att.json --key KEY --transcript RUN --export RUN/trajectory.json), and each body the audit log hashes is beside it (gateway/, calls/) unless the transcript says it was withheld. docs/TRANSCRIPT.md shows how to check the bodies with gunzip, sha256sum and jq alone.\n\n")
	var proved []string
	for _, id := range meta.Runs {
		if _, err := os.Stat(filepath.Join(dir, "runs", id, witness.RunProofFile)); err == nil {
			proved = append(proved, id)
		}
	}
	if len(proved) > 0 {
		fmt.Fprintf(&b, "## Against witnesses\n\n%d of the %d runs carry %s: a head of their host's ledger that witnesses cosigned, and the run's queued and ended entries under it with their inclusion proofs. It shows that those witnesses saw a ledger in which the run ended with exactly this attestation; a host that showed another ledger to anyone they serve would have been refused. Take each witness's public key from the witness itself, not from here:\n\n```sh\n", len(proved), len(meta.Runs), witness.RunProofFile)
		fmt.Fprintf(&b, "sealrun verify-publication . --key %s --witness WITNESS_KEY --witnesses 1\n", key)
		fmt.Fprintf(&b, "sealrun verify runs/%s/result.att.json --key %s --witness WITNESS_KEY\n```\n\n", proved[0], key)
	}
	if len(quoted) > 0 {
		fmt.Fprintf(&b, "## Against the host's TPM\n\n%d of the %d runs carry %s: their host's TPM quoted each run's statement after it ended, with sealrund's event log of that boot (sealrund measured into a PCR at each start). Take the host's TPM enrollment (enrollment.json, what sealrun tpm enroll wrote) from the operator as you took the key, and the TPM maker's CA from the maker, not from here; the check says what it allows you to conclude, and what not. sealrun's attest/VERIFY.md shows the same with tpm2-tools' tpm2_checkquote.\n\n```sh\n", len(quoted), len(meta.Runs), attest.TPMQuoteFile)
		fmt.Fprintf(&b, "sealrun verify-publication . --key %s --tpm ENROLLMENT.json --ek-ca TPM-MAKER-CA.pem\n", key)
		fmt.Fprintf(&b, "sealrun verify runs/%s/result.att.json --key %s --tpm ENROLLMENT.json --ek-ca TPM-MAKER-CA.pem\n```\n\n", quoted[0], key)
	}
	fmt.Fprintf(&b, "## With cosign (offline)\n\nEach attestation is a DSSE envelope signed with the key above; cosign checks it against one subject file (sealrun's attest/VERIFY.md):\n\n```sh\n")
	for _, id := range meta.Runs {
		p := byID[id]
		typ := "https://sealrun.dev/attestation/sealed-run/v1"
		if p != nil {
			typ = p.Type()
		}
		fmt.Fprintf(&b, "cosign verify-blob-attestation --key %s --signature runs/%s/result.att.json --type %s --insecure-ignore-tlog=true runs/%s/report.json\n", key, id, typ, id)
	}
	fmt.Fprintf(&b, "```\n")
	return b.Bytes()
}

func firstOr(xs []string, d string) string {
	if len(xs) > 0 {
		return xs[0]
	}
	return d
}

// copyRegularFiles copies src's regular files (not its subdirectories, links or devices) to dst.
func copyRegularFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return ioErr(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copyFile copies a regular file of at most MaxFile bytes, synced.
func copyFile(src, dst string) error {
	in, err := fileio.OpenRegular(src, "file")
	if err != nil {
		return ioErr(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return ioErr(err)
	}
	n, err := io.Copy(out, io.LimitReader(in, MaxFile+1))
	if err == nil && n > MaxFile {
		err = fmt.Errorf("%s is over %d bytes; a publication holds runs' files, not data sets", src, int64(MaxFile))
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ioErr(fmt.Errorf("copy %s: %w", src, err))
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return ioErr(err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ioErr(fmt.Errorf("write %s: %w", path, err))
	}
	return nil
}

// SumTree is SHA256SUMS of dir: every regular file but SHA256SUMS and its signature, by path (bytewise), in the
// format sha256sum prints and checks.
func SumTree(dir string) ([]byte, int, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type().IsRegular() && rel != SumsFile && rel != ManifestFile {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, 0, ioErr(err)
	}
	sort.Strings(paths)
	sums := make([]digest.Sum, len(paths))
	for i, p := range paths {
		sum, err := fileio.SHA256(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return nil, 0, ioErr(err)
		}
		sums[i] = digest.Sum{Path: p, SHA256: digest.Hex(sum)}
	}
	return digest.FormatSums(sums), len(paths), nil
}

// syncTree fsyncs every directory under dir (the files were synced as written).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return fileio.SyncDir(p)
		}
		return nil
	})
}

// ReadSums reads a publication's SHA256SUMS (digest.ParseSums): each path relative, clean and
// inside the publication, listed once.
func ReadSums(path string) (map[string]string, error) {
	b, err := fileio.ReadLimited(path, "checksum list", maxSumsBytes)
	if err != nil {
		return nil, err
	}
	list, err := digest.ParseSums(b, digest.SumsRules{Path: publicationPath})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sums := make(map[string]string, len(list))
	for _, s := range list {
		sums[s.Path] = string(s.SHA256)
	}
	return sums, nil
}

// maxSumsBytes bounds a publication's SHA256SUMS.
const maxSumsBytes = 64 << 20

// publicationPath says what is wrong with a path SHA256SUMS lists ("" if nothing).
func publicationPath(p string) string {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsAny(p, "\\\x00") {
		return "is not a relative path inside the publication"
	}
	return ""
}

// signerAmongKeys checks that the manifest's signer is one of the keys the runs are verified
// with, so that a reader who trusts those keys checks the manifest too.
func signerAmongKeys(signer signature.Signer, keyPaths []string) error {
	if signer == nil {
		return nil
	}
	pub, err := signer.PublicKey()
	if err != nil {
		return usageErr(fmt.Errorf("the manifest's signing key: %w", err))
	}
	id, err := attest.KeyID(pub)
	if err != nil {
		return usageErr(fmt.Errorf("the manifest's signing key: %w", err))
	}
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return ioErr(err)
	}
	for _, k := range ks {
		if k.KeyID == id {
			return nil
		}
	}
	return usageErr(opt.New("publish.Options", "Signer", fmt.Sprintf("the manifest's signing key (key id %s) is not one of the keys that signed the runs; sign with the host's key whose public half the publication carries", id)))
}
