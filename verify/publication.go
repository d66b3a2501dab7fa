package verify

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	dg "github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/transcript"
)

// Options are what a reader trusts and allows.
type Options struct {
	// Keys are the operator's public keys (PEM files or directories of *.pub / *.pem); none: a
	// publication's own keys/ (whose key ids Log shows, to compare with the operator's).
	Keys []string
	// Witnesses (and Quorum of them) must have cosigned each ledger's head and each run's proof
	// (witnessed.json); none: those proofs stay unchecked.
	Witnesses []*witness.Verifier
	Quorum    int
	// TSAChain is the certificate chain of the timestamp authority (PEM); with it, each
	// ledger's .tsr and each run's timestamp (in result.sigstore.json) must check. Without it
	// they stay unchecked.
	TSAChain string
	// AllowUnchecked are patterns (path.Match, on the publication's slash paths, e.g.
	// "runs/*/witnessed.json" or "ledgers/*.tsr") of files that may stay unchecked: the verdict
	// is then "VALID, N file(s) unchecked" and lists them. Any other file no check covers makes
	// the publication not valid.
	AllowUnchecked []string
	// RequireSignedManifest refuses a publication whose SHA256SUMS is not signed (no
	// SHA256SUMS.dsse.json): a mirror that strips the signature cannot pass for an older
	// publication.
	RequireSignedManifest bool
	// Log receives what each check looked at, a line at a time, as it goes (nil: nothing).
	Log io.Writer
	// TPM is the host's TPM enrollment and its maker's CAs: every run must carry a TPM quote
	// (result.tpm.json) that checks against them. Without it, each result.tpm.json stays
	// unchecked.
	TPM TPMOptions
	// MaxMemory bounds the bytes of files kept in memory between the files check, which reads
	// and hashes each, and the checks that read them again (0: DefaultMaxMemory; below 0:
	// none, every check reads its files from disk again). A file beyond it is read again.
	MaxMemory int64
}

// DefaultMaxMemory is Options.MaxMemory's default: a publication of 1,000 runs keeps about
// 55 MB (its pages and Inspect logs are compared by their digests, not kept).
const DefaultMaxMemory = snapTotalMax

// Publication checks a publication offline: every file against SHA256SUMS and SHA256SUMS
// against its signature (SHA256SUMS.dsse.json), publication.json against the directory, every
// attestation with the trusted keys and the files it binds, each run's audit log, the bodies it
// hashes and the transcript, page, report and exports they give, the tracks, the ledgers'
// accounting, the boards and VERIFY.md against what they are made from, and (as the options ask)
// the witnesses' cosignatures and the timestamps. Strict: VALID means every file the publication
// holds was checked against something signed, or is byte for byte what is regenerated from
// signed inputs; any other file is a failure naming it and why, unless o.AllowUnchecked names it.
//
// A publication that does not check is a Result that is not Valid, with a nil error; an error
// is for what stopped the check itself (a directory that is not there, a pattern that is not one:
// an *Error of Kind Usage or IO).
func Publication(dir string, o Options) (*Result, error) {
	w := o.Log
	if w == nil {
		w = io.Discard
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, ioErr(fmt.Errorf("publication %s: not a directory (%v)", dir, err))
	}
	for _, p := range o.AllowUnchecked {
		if _, err := path.Match(p, ""); err != nil {
			return nil, usageErr(opt.New("verify.Options", "AllowUnchecked", fmt.Sprintf("%q is not a pattern (%v); give a path in the publication, with * for any name, e.g. runs/*/witnessed.json", p, err)))
		}
	}
	host, enrollFail, err := openTPM(o.TPM)
	if err != nil {
		return nil, err
	}
	r := &Result{Kind: "publication", Path: dir, Publication: &PublicationDetails{}}
	c := &checker{dir: dir, w: w, claimed: map[string]bool{}, why: map[string]string{}, r: r, heads: &ledger.Heads{}, maxMemory: o.MaxMemory, pinnedBy: map[string]string{}}
	if o.TSAChain != "" {
		if c.chain, err = attest.LoadTSAChain(o.TSAChain); err != nil {
			return nil, usageErr(opt.Wrap("verify.Options", "TSAChain", err))
		}
	}
	c.begin("files")
	listed, err := c.files()
	if err != nil {
		return nil, err
	}
	c.end("")
	if !listed {
		r.Manifest = "unsigned"
		return r.finish(), nil
	}
	c.begin("publication.json")
	meta, onDisk, ok := c.meta()
	c.end("")
	if !ok {
		c.account(o.AllowUnchecked)
		return r.finish(), nil
	}
	keyPaths := o.Keys
	if len(keyPaths) == 0 {
		keyPaths = []string{filepath.Join(dir, "keys")}
		fmt.Fprintf(w, "keys: no --key given, so the publication's own keys/ are trusted; compare these key ids with the operator's:\n")
	} else {
		fmt.Fprintf(w, "keys: trusted as given:\n")
	}
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return nil, ioErr(err)
	}
	for _, k := range ks {
		fmt.Fprintf(w, "  %s  key id %s\n", k.Name, k.KeyID)
		r.Publication.Keys = append(r.Publication.Keys, k.KeyID)
	}
	c.begin("manifest")
	c.end(c.manifest(meta, ks, o.RequireSignedManifest))
	c.begin("attestations")
	c.runs(onDisk, ks)
	c.end("")
	// The boards are made again meanwhile (from the runs' verifications and the files as they
	// were read: nothing the checks below write), on what CPU the trajectories leave.
	made := make(chan madeBoards, 1)
	go func() {
		var m madeBoards
		m.boards, m.acct, m.err = publicationBoardsWith(dir, meta, keyPaths, c.boardInputs())
		made <- m
	}()
	c.begin("trajectories")
	c.transcripts(onDisk)
	c.end("")
	c.begin("inspect")
	c.inspectLogs(onDisk)
	c.end("")
	c.begin("boards")
	boards, ok := c.boards(meta, made)
	c.end("")
	c.begin("sigstore bundles")
	c.sigstoreBundles(onDisk)
	c.end("")
	c.begin("ledger timestamps")
	c.ledgerTimestamps(meta, ks)
	c.end(naUnless(c.chain != nil, "no timestamp authority's chain given (--tsa-chain): a ledger's .tsr stays unchecked"))
	c.begin("witnesses")
	if len(o.Witnesses) > 0 {
		c.witnessed(meta, ks, o.Witnesses, o.Quorum)
		c.witnessedRuns(meta, ks, o.Witnesses, o.Quorum)
	}
	c.end(naUnless(len(o.Witnesses) > 0, "no witness's key given (--witness): each run's witnessed.json stays unchecked"))
	c.begin("tpm")
	if enrollFail != nil {
		c.bad("%s: %s", o.TPM.Enrollment, enrollFail.Detail)
	} else if host != nil {
		c.tpmRuns(meta, host)
	}
	c.end(naUnless(host != nil || enrollFail != nil, "no TPM enrollment given (--tpm): each run's result.tpm.json stays unchecked"))
	c.account(o.AllowUnchecked)
	r.Publication.Runs = len(meta.Runs)
	r.Publication.Files = len(c.present)
	r.finish()
	if r.Valid && r.Manifest == "unsigned" {
		r.Verdict += ", manifest unsigned"
	}
	if ok && r.Valid {
		summarisePublication(w, dir, boards["leaderboard.json"], meta, host != nil)
	}
	return r, nil
}

// PublicationDetails is what a publication's check counted.
type PublicationDetails struct {
	Files int      `json:"files"` // files present, SHA256SUMS and its signature aside
	Runs  int      `json:"runs"`
	Keys  []string `json:"keys"` // the trusted keys' ids
}

func naUnless(applies bool, why string) string {
	if applies {
		return ""
	}
	return why
}

// WritePublicationVerdict writes a publication's verdict: "publication: VALID", or its unchecked
// files, or every problem, one a line.
func WritePublicationVerdict(w io.Writer, r *Result) {
	switch {
	case r.Valid && len(r.Unchecked) == 0:
		fmt.Fprintf(w, "publication: %s\n", r.Verdict)
	case r.Valid:
		fmt.Fprintf(w, "publication: %s (allowed with --allow-unchecked):\n", r.Verdict)
		for _, u := range r.Unchecked {
			fmt.Fprintf(w, "  %s: %s\n", u.File, u.Why)
		}
	default:
		ps := r.Problems()
		fmt.Fprintf(w, "publication: NOT VALID (%d problem(s)):\n", len(ps))
		for _, c := range r.Checks {
			for _, p := range c.Problems {
				fmt.Fprintf(w, "  %s  [%s]\n", p, c.Name)
			}
		}
	}
}

// checker gathers the problems of a publication, each a line naming the file, and which files
// a check covered.
type checker struct {
	dir       string
	w         io.Writer
	problems  []string
	verified  map[string]*attest.Verified // run id -> its attestation, as runs verified it
	pinnedBy  map[string]string           // run id -> the key that verified it with its track pinned
	chain     []*x509.Certificate         // the timestamp authority's, when given
	present   []string                    // every file of the publication but SHA256SUMS, sorted
	claimed   map[string]bool             // files a check covered (against something signed, or regenerated)
	why       map[string]string           // files a check looked at and could not cover: why not
	r         *Result
	heads     *ledger.Heads     // each distinct ledger head verified once
	snap      *snapshot         // the files as the files check read them
	maxMemory int64             // Options.MaxMemory
	sums      map[string]string // their SHA-256, as it computed them
	tracks    sync.Map          // a track file's SHA-256 -> its trackOnce
	mu        sync.Mutex
	loads     map[string]*loaded // run id -> its transcript.json, read once
	stage     string             // the check under way
	from      int                // where its problems start in problems
}

// begin starts the check name; end records it: failed with the problems since begin, else not
// applicable when na says why, else passed.
func (c *checker) begin(name string) { c.stage, c.from = name, len(c.problems) }

func (c *checker) end(na string) {
	ps := c.problems[c.from:]
	switch {
	case len(ps) > 0:
		var out []Problem
		for _, p := range ps {
			out = append(out, problemOf(p))
		}
		c.r.fail(c.stage, out...)
	case na != "":
		c.r.skip(c.stage, na)
	default:
		c.r.pass(c.stage)
	}
	c.from = len(c.problems)
}

// problemOf splits "FILE: reason".
func problemOf(line string) Problem {
	if f, reason, ok := strings.Cut(line, ": "); ok && !strings.Contains(f, " ") {
		return Problem{File: f, Reason: reason}
	}
	return Problem{Reason: line}
}

func (c *checker) bad(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// claim marks files (slash paths in the publication) as covered by a check.
func (c *checker) claim(rels ...string) {
	for _, r := range rels {
		c.claimed[r] = true
	}
}

// account is the check "coverage": it names every file no check covered, a problem unless allow
// matches it; then it is listed in the result's Unchecked.
func (c *checker) account(allow []string) {
	c.begin("coverage")
	judged := map[string]bool{} // files a problem already names: no need to say it again
	for _, p := range c.problems {
		if f, _, ok := strings.Cut(p, ": "); ok {
			judged[f] = true
		}
	}
	for _, rel := range c.present {
		if c.claimed[rel] || judged[rel] {
			continue
		}
		why := c.why[rel]
		if why == "" {
			why = defaultWhy(rel)
		}
		if allowed(rel, allow) {
			c.r.Unchecked = append(c.r.Unchecked, Unchecked{File: rel, Why: why})
			continue
		}
		c.bad("%s: unchecked: %s; a reader who accepts that names it with --allow-unchecked %s", rel, why, rel)
	}
	c.end("")
}

func allowed(rel string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, rel); ok || p == rel {
			return true
		}
	}
	return false
}

// defaultWhy says why a file no check looked at is not covered.
func defaultWhy(rel string) string {
	base := path.Base(rel)
	switch {
	case strings.HasPrefix(rel, "runs/") && base == witness.RunProofFile:
		return "a witnessed proof, checked only against the witnesses' keys (--witness)"
	case strings.HasPrefix(rel, "runs/") && base == attest.TPMQuoteFile:
		return "a TPM quote, checked only against the host's TPM enrollment (--tpm)"
	case strings.HasPrefix(rel, "ledgers/") && strings.HasSuffix(rel, ".tsr"):
		return "the timestamp of a ledger's head, checked only with the authority's chain (--tsa-chain)"
	case strings.HasPrefix(rel, "runs/") && (base == "summary.txt" || base == "run.json" || base == "history.jsonl"):
		return "the host's own record, neither signed nor made again from what is (sealrun publish does not publish it)"
	}
	return "no check covers it: sealrun publish writes no such file"
}

// files checks that the publication holds exactly the files SHA256SUMS lists, each with its sum.
func (c *checker) files() (bool, error) {
	dir, w := c.dir, c.w
	sums, err := publish.ReadSums(filepath.Join(dir, publish.SumsFile))
	if err != nil {
		c.bad("%s: %v; it is not a publication sealrun publish wrote, or its list was damaged", publish.SumsFile, err)
		return false, nil
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
		case !d.Type().IsRegular():
			c.bad("%s: not a regular file (%s); a publication holds only files", rel, d.Type())
		case rel == publish.SumsFile || rel == publish.ManifestFile: // the list, and its signature
		default:
			c.present = append(c.present, rel)
			if _, ok := sums[rel]; !ok {
				c.bad("%s: added: not in SHA256SUMS", rel)
				return nil
			}
			seen[rel] = true
		}
		return nil
	})
	if err != nil {
		return false, ioErr(err)
	}
	// Every file read and hashed once, on every CPU, and kept for the checks that follow (the
	// snapshot); the problems in the order of the walk.
	got := make([]string, len(c.present))
	kept := make([][]byte, len(c.present))
	errs := make([]error, len(c.present))
	var budget atomic.Int64
	switch {
	case c.maxMemory == 0:
		budget.Store(DefaultMaxMemory)
	case c.maxMemory > 0:
		budget.Store(c.maxMemory)
	}
	read, done, err := publicationReader(dir)
	if err != nil {
		return false, ioErr(err)
	}
	var none atomic.Int64 // the budget of a file not kept (keepBytes): hashed as it streams past
	leaderboard.EachParallel(len(c.present), func(i int) {
		b := &budget
		if !keepBytes(c.present[i]) {
			b = &none
		}
		got[i], kept[i], errs[i] = read(c.present[i], b)
	})
	done()
	c.sums = make(map[string]string, len(c.present))
	c.snap = &snapshot{dir: dir, kept: make(map[string][]byte, len(c.present)), files: make(map[string]bool, len(c.present)), sums: c.sums}
	for i, rel := range c.present {
		if errs[i] == nil {
			c.snap.files[rel], c.sums[rel] = true, got[i]
			if kept[i] != nil {
				c.snap.kept[rel] = kept[i]
			}
		}
	}
	for i, rel := range c.present {
		switch {
		case !seen[rel]:
		case errs[i] != nil:
			return false, ioErr(errs[i])
		case got[i] != sums[rel]:
			c.bad("%s: edited: sha256 %s, SHA256SUMS says %s", rel, got[i], sums[rel])
		}
	}
	sort.Strings(c.present)
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
	return true, nil
}

// meta reads publication.json and checks its runs against runs/; ok is false when it cannot be
// read (nothing further can be checked).
func (c *checker) meta() (meta publish.Publication, onDisk []string, ok bool) {
	dir := c.dir
	mb, _, err := c.snap.read(publish.MetaFile, "file", maxWhole)
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(mb))
		d.DisallowUnknownFields()
		err = d.Decode(&meta)
	}
	if err != nil || meta.Format != publish.Format {
		c.bad("%s: unreadable or not %s (%v)", publish.MetaFile, publish.Format, err)
		return meta, nil, false
	}
	// Every path it names is a file of its own folder, read from the publication and nowhere
	// else: no "..", no absolute path, no folder below, no link on the way.
	contained := true
	for _, l := range []struct {
		folder string
		paths  []string
	}{{"tracks", meta.Tracks}, {"keys", meta.Keys}, {"ledgers", meta.Ledgers}} {
		for _, p := range l.paths {
			if err := c.inside(l.folder, p); err != nil {
				c.bad("%s: %s %q: %v", publish.MetaFile, l.folder, p, err)
				contained = false
			}
		}
	}
	for _, id := range meta.Runs {
		if !attest.ValidRunID(id) {
			c.bad("%s: run %q cannot name a directory of runs/", publish.MetaFile, id)
			contained = false
		}
	}
	if !contained {
		return meta, nil, false
	}
	c.claim(publish.MetaFile)
	runDirs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	for _, r := range runDirs {
		if fi, err := os.Lstat(r); err == nil && fi.IsDir() { // a file here is no run (account names it)
			onDisk = append(onDisk, filepath.Base(r))
		}
	}
	sort.Strings(onDisk)
	if strings.Join(onDisk, ",") != strings.Join(meta.Runs, ",") {
		c.bad("runs/: holds %s; %s lists %s", listOrNone(onDisk), publish.MetaFile, listOrNone(meta.Runs))
	}
	return meta, onDisk, true
}

// inside checks that rel, a path publication.json names, is a regular file directly in folder
// of the publication, reached through no symbolic link.
func (c *checker) inside(folder, rel string) error {
	if rel != path.Clean(rel) || path.Dir(rel) != folder || strings.ContainsAny(rel, "\\:") {
		return fmt.Errorf("not a file directly in %s/ of the publication", folder)
	}
	for _, p := range []string{folder, rel} {
		fi, err := os.Lstat(filepath.Join(c.dir, filepath.FromSlash(p)))
		if err != nil {
			return fmt.Errorf("%s: %v", p, errors.Unwrap(err))
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link; a publication holds only files and folders", p)
		}
	}
	return nil
}

// runs checks that every run's attestation verifies with a trusted key, names its run, and binds
// the run's files (the runs on every CPU, their findings in order).
func (c *checker) runs(onDisk []string, ks []leaderboard.Key) {
	found := make([]finding, len(onDisk))
	leaderboard.EachParallel(len(onDisk), func(i int) {
		id, out := onDisk[i], &found[i]
		rel := "runs/" + id + "/"
		env, missing, err := c.snap.read(rel+"result.att.json", "attestation", attest.MaxEnvelopeBytes+64<<10)
		if missing {
			out.bad("runs/%s: no result.att.json", id)
			return
		}
		if err == nil {
			env, err = attest.EnvelopeOf(env)
		}
		if err != nil {
			out.bad("runs/%s/result.att.json: %v", id, err)
			return
		}
		// The files it binds, as the files check read them: the digests it computed, the audit
		// log's bytes, the track (parsed once for every run that carries the same one).
		var opts []attest.VerifyOption
		given := map[string]bool{}
		for _, b := range []struct {
			file string
			opt  func(string) attest.VerifyOption
		}{{"bundle.tar.gz", attest.WithBundleDigest}, {"report.json", attest.WithReportDigest}} {
			if sum, ok := c.sums[rel+b.file]; ok {
				opts, given[b.file] = append(opts, b.opt(sum)), true
			}
		}
		var track *policy.Track
		if c.snap.has(rel + "track.toml") {
			t, err := c.track(rel + "track.toml")
			track = t
			if err != nil {
				out.bad("runs/%s: the attestation or a file it binds does not verify with a trusted key: the track: %v", id, err)
				return
			}
			opts, given["track.toml"] = append(opts, attest.WithTrack(t)), true
		}
		var lastErr error
		for _, k := range ks {
			o := append(slices.Clip(opts), attest.WithHeads(c.heads))
			if c.snap.has(rel + "audit.jsonl") {
				f, err := c.snap.Open(rel + "audit.jsonl")
				if err != nil {
					out.bad("runs/%s/audit.jsonl: %v", id, err)
					return
				}
				defer f.Close()
				o, given["audit.jsonl"] = append(o, attest.WithAuditLog(f)), true
			}
			v, err := attest.Verify(env, k.Verifier, o...)
			if err != nil {
				lastErr = err
				continue
			}
			p := v.Statement.Predicate
			if p.Run.ID != id {
				out.bad("runs/%s: its attestation is of run %s", id, p.Run.ID)
				return
			}
			out.verified, out.keyID, out.pinned = v, k.KeyID, given["track.toml"]
			out.claims = append(out.claims, rel+"result.att.json")
			for _, file := range []string{"report.json", "bundle.tar.gz", "audit.jsonl", "track.toml"} {
				if given[file] {
					out.claims = append(out.claims, rel+file)
				}
			}
			if !given["audit.jsonl"] && (p.Audit.Entries > 0 || (p.Audit.Head != "" && p.Audit.Head != audit.ZeroHead)) {
				out.bad("runs/%s/audit.jsonl: missing: the attestation names an audit log of %d entries (head %s), and without it nothing the agent did can be checked", id, p.Audit.Entries, p.Audit.Head)
			}
			c.amendments(id, dg.SumHex(v.Payload), track, ks, out)
			return
		}
		out.bad("runs/%s: the attestation or a file it binds does not verify with a trusted key: %v", id, lastErr)
	})
	for i, f := range found {
		c.replay(f)
		if f.verified != nil {
			c.keep(onDisk[i], f.verified)
			if f.pinned {
				c.pinnedBy[onDisk[i]] = f.keyID
			}
		}
	}
}

// amendments checks the amendments published beside run id, whose attestation's statement has
// the SHA-256 runDigest and whose track (its track.toml, verified with it) is track: each signed
// with a trusted key, and by one of the track's reviewers where it names them, named by its
// statement's SHA-256, of this run and its attestation. One that is not is a problem (the boards, rebuilt with the
// reader's keys, then apply it not); the ledgers and the boards check the rest (leaderboard).
func (c *checker) amendments(id string, runDigest dg.Hex, track *policy.Track, ks []leaderboard.Key, out *finding) {
	prefix := "runs/" + id + "/" + publish.AmendmentsDir + "/"
	for _, rel := range c.under(prefix) {
		env, _, err := c.snap.read(rel, "amendment", attest.MaxAmendmentBytes+64<<10)
		if err == nil {
			env, err = attest.EnvelopeOf(env)
		}
		if err != nil {
			out.bad("%s: %v", rel, err)
			continue
		}
		var v *attest.VerifiedAmendment
		for _, k := range ks {
			if v, err = attest.VerifyAmendment(env, k.Verifier); err == nil {
				break
			}
		}
		switch {
		case err != nil:
			out.bad("%s: an amendment that does not verify with a trusted key (%v): no board may apply it", rel, err)
		case path.Base(rel) != string(v.Digest)+".att.json":
			out.bad("%s: the amendment's statement has SHA-256 %s; a published amendment is named by it (the file was renamed)", rel, v.Digest)
		case v.Statement.Predicate.Run != id:
			out.bad("%s: an amendment of run %s, beside run %s", rel, v.Statement.Predicate.Run, id)
		case v.Statement.Amended() != runDigest:
			out.bad("%s: amends attestation %s… of run %s; the one published is %s…: re-pointed at another attestation", rel, v.Statement.Amended()[:12], id, runDigest[:12])
		case track == nil:
			out.bad("%s: cannot be checked: no track.toml beside run %s, and the track names who must sign its amendments beside the host", rel, id)
		default:
			if err := v.CheckReviewer(track); err != nil {
				out.bad("%s: %v: no board may apply it", rel, err)
				continue
			}
			out.claims = append(out.claims, rel)
		}
	}
}

// under lists the publication's files whose path starts with prefix.
func (c *checker) under(prefix string) []string {
	i := sort.SearchStrings(c.present, prefix)
	var out []string
	for ; i < len(c.present) && strings.HasPrefix(c.present[i], prefix); i++ {
		out = append(out, c.present[i])
	}
	return out
}

// trackOnce is one track file parsed, once for every run that carries it.
type trackOnce struct {
	once sync.Once
	t    *policy.Track
	err  error
}

// track parses the track file rel of the publication, once for all the runs whose track.toml
// has the same SHA-256.
func (c *checker) track(rel string) (*policy.Track, error) {
	v, _ := c.tracks.LoadOrStore(c.sums[rel], &trackOnce{})
	o := v.(*trackOnce)
	o.once.Do(func() {
		b, _, err := c.snap.read(rel, "track file", policy.MaxTrackBytes)
		if err != nil {
			o.err = err
			return
		}
		o.t, o.err = policy.Parse("track.toml", b)
	})
	return o.t, o.err
}

// finding is what the check of one run (or sample) found, kept to be replayed in order.
type finding struct {
	lines, problems []string
	verified        *attest.Verified
	keyID           string // the key that verified it
	pinned          bool   // verified with its track pinned (the run's track.toml)
	ok              bool
	bodies          transcript.Counts
	claims          []string          // files the check covered
	why             map[string]string // files it looked at and could not cover: why not
}

func (f *finding) cannot(rel, why string) {
	if f.why == nil {
		f.why = map[string]string{}
	}
	f.why[rel] = why
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
	c.claim(f.claims...)
	for rel, why := range f.why {
		c.why[rel] = why
	}
}

// boards rebuilds the boards from the publication's own files, with the ledgers' accounting, and
// checks the published ones are exactly those; ok is false when they cannot be rebuilt.
func (c *checker) boards(meta publish.Publication, made <-chan madeBoards) (map[string][]byte, bool) {
	dir := c.dir
	m := <-made
	boards, acct, err := m.boards, m.acct, m.err
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
		have, missing, err := c.snap.read(n, "file", maxWhole) // the bytes the files check hashed
		switch {
		case missing:
			c.bad("%s: missing (%v)", n, errors.Unwrap(err))
			continue
		case err != nil:
			c.bad("%s: %v", n, err)
			continue
		}
		switch {
		case bytes.Equal(have, boards[n]):
			c.claim(n)
		case n == publish.VerifyFile:
			c.bad("%s: not what sealrun publish writes for these files (the commands a reader runs were edited, or a file they name was added or taken away)", n)
		default:
			c.bad("%s: not what the attestations give (rebuild it with the command in VERIFY.md and compare)", n)
		}
	}
	if len(acct) == 0 {
		// The keys were each among the trusted ones, the ledgers read and verified with them. A
		// key counts only as a file keys/ loaded as a public key: anything else publication.json
		// lists among its keys (a note beside them) was never read as one.
		loaded := map[string]bool{}
		if own, err := leaderboard.LoadKeys([]string{filepath.Join(dir, "keys")}); err == nil {
			for _, k := range own {
				loaded["keys/"+k.Name] = true
			}
		}
		for _, k := range meta.Keys {
			if loaded[k] {
				c.claim(k)
			} else {
				c.bad("%s: listed among the keys in %s, but not a public key (sealrun publish copies only *.pub and *.pem key files)", k, publish.MetaFile)
			}
		}
		c.claim(meta.Ledgers...)
	}
	// A track file counts when it is the track of a run whose attestation verified.
	ids := map[string]bool{}
	for _, v := range c.verified {
		ids[v.Statement.Predicate.Track.ID] = true
	}
	for _, p := range meta.Tracks {
		t, err := policy.Load(filepath.Join(dir, filepath.FromSlash(p)))
		switch {
		case err != nil:
			c.bad("%s: %v", p, err)
		case !ids[t.ID]:
			c.bad("%s: track id %s is the track of no run here that verified", p, t.ID)
		default:
			c.claim(p)
		}
	}
	return boards, true
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
func publicationBoardsWith(dir string, meta publish.Publication, keyPaths []string, o leaderboard.LoadOptions) (map[string][]byte, []string, error) {
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
	return publish.Boards(dir, meta, o)
}

// madeBoards are the boards a publication's files give, and what is missing from them.
type madeBoards struct {
	boards map[string][]byte
	acct   []string
	err    error
}

// boardInputs has the boards made from the files as the files check read them, each run's
// attestation as runs verified it (once, with its track pinned and the files it binds) rather
// than verified again.
func (c *checker) boardInputs() leaderboard.LoadOptions {
	relOf := func(p string) string {
		rel, err := filepath.Rel(c.dir, p)
		if err != nil {
			return ""
		}
		return filepath.ToSlash(rel)
	}
	return leaderboard.LoadOptions{
		ReadFile: func(p string) ([]byte, error) { return c.snap.readUpTo(relOf(p), leaderboard.MaxFileBytes+1) },
		Verified: func(p string, data []byte) (*attest.Verified, string) {
			rel := relOf(p)
			id, ok := strings.CutPrefix(rel, "runs/")
			if !ok {
				return nil, ""
			}
			if id, ok = strings.CutSuffix(id, "/result.att.json"); !ok {
				return nil, ""
			}
			kid, pinned := c.pinnedBy[id]
			if kept, in := c.snap.kept[rel]; !pinned || !in || !bytes.Equal(kept, data) {
				return nil, ""
			}
			return c.verified[id], kid
		},
	}
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

// summariseAmendments prints how many amendments the board applied, by action, and how many of
// them a reviewer signed too.
func summariseAmendments(w interface{ Write([]byte) (int, error) }, b *leaderboard.Board) {
	by := map[string]int{}
	n, reviewed := 0, 0
	for _, t := range b.Tables {
		for i := range t.Rows {
			for _, run := range t.Rows[i].AmendedRuns() {
				for _, a := range run.Amendments {
					n++
					by[a.Action]++
					if a.Reviewer != "" {
						reviewed++
					}
				}
			}
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "amendments: %d applied (%d invalidated, %d legacy, %d note(s); %d signed by a reviewer the track names too), each signed with a trusted key and naming its run's attestation\n",
		n, by[ledger.ActionInvalidate], by[ledger.ActionLegacy], by[ledger.ActionNote], reviewed)
}

// summarisePublication prints the boards' rows and what they mean.
func summarisePublication(w interface{ Write([]byte) (int, error) }, dir string, boardJSON []byte, meta publish.Publication, tpmChecked bool) {
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
			summariseAmendments(w, &b)
		}
	}
	if len(meta.Ledgers) > 0 {
		fmt.Fprintf(w, "ledgers: %s: every run they hold of these tracks ended and is published here, and every run here is in them\n", strings.Join(meta.Ledgers, ", "))
	} else {
		fmt.Fprintf(w, "ledgers: none published, so a run the operator withheld cannot be detected; the seeds each row needs are counted above\n")
	}
	if tpmChecked {
		fmt.Fprintf(w, `A reader may conclude: each run listed ran under the track file of its id, sealed as the track
pins it, and scored what its signed attestation says; the leaderboard files are exactly what those
attestations give; each was signed in the enrolled TPM and quoted by it after the run, the sealrund
it measured being the build the run records. Not: that the host was honest beyond what its TPM
measured (tpm, above), or that the model was the one named beyond what the gateway recorded.
`)
		return
	}
	fmt.Fprintf(w, `A reader may conclude: each run listed ran under the track file of its id, sealed as the track
pins it, and scored what its signed attestation says; the leaderboard files are exactly what those
attestations give. Not: that the signing host was honest (a signature says which key signed, not
what the hardware did; a host with a TPM lets --tpm check more) or that the model was the one
named beyond what the gateway recorded.
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

func pctOrDash(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *v)
}

// witnessed checks that each published ledger carries a head quorum of ws cosigned.
func (c *checker) witnessed(meta publish.Publication, ks []leaderboard.Key, ws []*witness.Verifier, quorum int) {
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

// manifest is the check "manifest": SHA256SUMS.dsse.json, where the publication carries it, is
// SHA256SUMS signed by a trusted key, byte for byte. Without it the manifest is "unsigned":
// every file is still checked against what it names, but a mirror could have rewritten the list
// for files no signature covers; require says a reader refuses that.
func (c *checker) manifest(meta publish.Publication, ks []leaderboard.Key, require bool) string {
	mp := filepath.Join(c.dir, publish.ManifestFile)
	_, err := os.Lstat(mp)
	if errors.Is(err, fs.ErrNotExist) {
		c.r.Manifest = "unsigned"
		fmt.Fprintf(c.w, "manifest: unsigned (no %s: a publication from before publish signed its list)\n", publish.ManifestFile)
		switch {
		case require:
			c.bad("%s: missing: the manifest is unsigned, and the reader requires it signed (--require-signed-manifest)", publish.ManifestFile)
		case meta.Manifest != "":
			c.bad("%s: missing: publication.json says publish signed the list of files (%q), and the signature is not here (stripped, or lost in a copy)", publish.ManifestFile, meta.Manifest)
		}
		return "no signed manifest (" + publish.ManifestFile + "): a publication from before publish signed its list"
	}
	env, err := fileio.ReadLimited(mp, "signed manifest", attest.MaxManifestBytes+1)
	if err != nil {
		c.bad("%s: %v", publish.ManifestFile, fileio.Cause(err))
		return ""
	}
	sums, err := fileio.ReadLimited(filepath.Join(c.dir, publish.SumsFile), "SHA256SUMS", attest.MaxManifestBytes)
	if err != nil {
		c.bad("%s: %v", publish.SumsFile, fileio.Cause(err))
		return ""
	}
	var last error
	for _, k := range ks {
		signed, id, err := attest.VerifyManifest(env, k.Verifier)
		if err != nil {
			last = err
			continue
		}
		if !bytes.Equal(signed, sums) {
			c.bad("%s: not the list key %s signed in %s (a file was added, dropped or swapped after publish, and the list rewritten)", publish.SumsFile, id, publish.ManifestFile)
			return ""
		}
		c.r.Manifest = "signed"
		c.claim(publish.ManifestFile)
		fmt.Fprintf(c.w, "manifest: SHA256SUMS is the list key id %s signed (%s)\n", id, publish.ManifestFile)
		return ""
	}
	c.r.Manifest = "unverified"
	c.bad("%s: does not verify with a trusted key: %v", publish.ManifestFile, last)
	return ""
}
