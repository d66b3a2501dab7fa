package leaderboard

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	dg "github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

// Key is one trusted signer: its name (the key file's) and verifier.
type Key struct {
	Name     string // the file's base name
	Path     string // the file
	KeyID    string
	Verifier signature.Verifier
}

// LoadKeys loads public keys (PEM files, or every *.pub / *.pem file of a directory).
func LoadKeys(paths []string) ([]Key, error) {
	var keys []Key
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", p, err)
		}
		files := []string{p}
		if st.IsDir() {
			files = nil
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, fmt.Errorf("keys directory %s: %w", p, err)
			}
			for _, e := range entries {
				if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".pub") || strings.HasSuffix(n, ".pem")) {
					files = append(files, filepath.Join(p, n))
				}
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("keys directory %s has no *.pub or *.pem file", p)
			}
		}
		for _, f := range files {
			v, pub, err := attest.LoadVerifier(f)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", f, err)
			}
			id, err := attest.KeyID(pub)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", f, err)
			}
			keys = append(keys, Key{Name: filepath.Base(f), Path: f, KeyID: id, Verifier: v})
		}
	}
	if len(keys) == 0 {
		return nil, opt.New("leaderboard.LoadKeys", "Keys", "none given: every row must come from a verified attestation (a PEM file or a directory of *.pub files)")
	}
	return keys, nil
}

// Entry is one attestation that verified.
type Entry struct {
	Path      string
	Key       string // the name of the key that verified it
	KeyID     string
	Predicate *attest.Predicate
	// StatementSHA256 is the SHA-256 of the signed statement (the payload): it tells duplicates
	// from conflicts and matches what a ledger's ended entry names. Not the payload itself: a
	// board of ten thousand runs keeps 32 bytes a run, not 4 KB.
	StatementSHA256 [32]byte
	Warnings        []string
}

// Amended is one amendment that verified (attest.VerifyAmendment): applied to its run's row by
// Build when it names the run's published attestation.
type Amended struct {
	Path      string
	Key       string
	KeyID     string
	Statement *attest.AmendmentStatement
	Digest    dg.Hex // SHA-256 of its signed statement: what its ledger entry names
	Reviewer  string // the key id of the reviewer who signed it too, where its track asks for one
}

// Rejection is an input that contributes nothing, with the reason.
type Rejection struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// MaxFileBytes bounds one input file.
const MaxFileBytes = attest.MaxEnvelopeBytes + 64<<10

// Inputs are what Load found.
type Inputs struct {
	Entries []Entry
	// Amendments are the amendments that verified (sealrun amend), in path order.
	Amendments []Amended
	Rejected   []Rejection
	Skipped    []Rejection // files in a directory that are not attestations (report.json, ...)
	// Ledgers are published run ledgers (LoadLedgers) to account for every run against.
	Ledgers []*ledger.Ledger
	// HumanBaseline makes every person's runs of a track one row, "human · baseline: HANDLES",
	// instead of a row each (sealrun leaderboard --human-baseline).
	HumanBaseline bool
}

// Load reads every path (an attestation file, or a directory searched recursively for *.json
// files) and verifies each attestation with the keys (the first that verifies it) and, when
// tracks are given, against the track with its id (an attestation under any other track is
// rejected). A file named on the command line that is not a valid attestation is rejected; a
// file in a directory that is not an attestation at all (no DSSE envelope) is skipped and
// listed, so that a results directory with reports and audit logs beside the attestations reads
// cleanly. Verification runs on every CPU.
func Load(paths []string, keys []Key, tracks []*policy.Track) (*Inputs, error) {
	return LoadWith(paths, keys, tracks, LoadOptions{})
}

// LoadOptions change where Load reads the files and what it verifies again.
type LoadOptions struct {
	// ReadFile reads a file found or given (nil: from disk), whole: one over MaxFileBytes is
	// not an attestation.
	ReadFile func(path string) ([]byte, error)
	// Verified gives what the caller verified already of the attestation at path with exactly
	// these bytes, and the id of the key that verified it (nil: verify it here). It must have
	// been verified with the track of its id pinned (attest.WithTrack): the track Load pins
	// then holds the same data (the id is its hash), and only the key's being one of Load's is
	// checked again. A reader of a publication verifies each run once, not once a check.
	Verified func(path string, data []byte) (v *attest.Verified, keyID string)

	heads *ledger.Heads // LoadWithLedgers': each ledger head an attestation carries
}

// LoadWith is Load, reading and verifying as o says.
func LoadWith(paths []string, keys []Key, tracks []*policy.Track, o LoadOptions) (*Inputs, error) {
	jobs, err := loadJobs(paths)
	if err != nil {
		return nil, err
	}
	byTrack := map[string]*policy.Track{}
	for _, t := range tracks {
		byTrack[t.ID] = t
	}
	type result struct {
		entry   *Entry
		amended *Amended
		reject  *Rejection
		skipped bool
	}
	results := make([]result, len(jobs))
	EachParallel(len(jobs), func(i int) {
		e, am, reason, notAtt := verifyFile(jobs[i].path, keys, byTrack, len(tracks) > 0, o)
		switch {
		case e != nil:
			results[i].entry = e
		case am != nil:
			results[i].amended = am
		case notAtt && !jobs[i].explicit:
			results[i].skipped, results[i].reject = true, &Rejection{jobs[i].path, reason}
		default:
			results[i].reject = &Rejection{jobs[i].path, reason}
		}
	})
	in := &Inputs{}
	for _, r := range results {
		switch {
		case r.entry != nil:
			in.Entries = append(in.Entries, *r.entry)
		case r.amended != nil:
			in.Amendments = append(in.Amendments, *r.amended)
		case r.skipped:
			in.Skipped = append(in.Skipped, *r.reject)
		default:
			in.Rejected = append(in.Rejected, *r.reject)
		}
	}
	in.dedupe()
	sort.Slice(in.Rejected, func(i, j int) bool { return in.Rejected[i].Path < in.Rejected[j].Path })
	return in, nil
}

// EachParallel calls do(i) for each i below n on every CPU, and returns when all have returned.
// Each i is given once; do writes only its own i's results.
func EachParallel(n int, do func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int, 64)
	for range min(n, max(1, runtime.NumCPU())) {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// loadJob is a file Load reads; explicit: named on the command line, not found in a directory.
type loadJob struct {
	path     string
	explicit bool
}

// loadJobs lists the files Load reads: each file given, and the *.json files in each directory
// given (hidden ones left out: a gather in progress or cut short, an editor's file).
func loadJobs(paths []string) ([]loadJob, error) {
	var jobs []loadJob
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, fileio.Cause(err))
		}
		if !st.IsDir() {
			jobs = append(jobs, loadJob{p, true})
			continue
		}
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if q != p && strings.HasPrefix(d.Name(), ".") {
				// Hidden: a gather in progress or cut short (sealrun results gather), an editor's file.
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && strings.HasSuffix(d.Name(), ".json") {
				jobs = append(jobs, loadJob{q, false})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read directory %s: %w", p, err)
		}
	}
	return jobs, nil
}

// verifyFile verifies one file, a run's attestation or an amendment; notAtt reports a file that
// is not an attestation at all.
func verifyFile(path string, keys []Key, tracks map[string]*policy.Track, pinTracks bool, o LoadOptions) (e *Entry, am *Amended, reason string, notAtt bool) {
	var data []byte
	if o.ReadFile != nil {
		var err error
		if data, err = o.ReadFile(path); err != nil {
			return nil, nil, "cannot read: " + fileio.Cause(err).Error(), false
		}
	} else {
		// The file's bytes are read into a buffer used again for the next file: nothing
		// verified keeps them (what an entry keeps is decoded from its payload, a copy).
		buf := readBuffers.Get().(*[]byte)
		var err error
		if data, err = readFileCapped(path, MaxFileBytes, *buf); err != nil {
			readBuffers.Put(buf)
			return nil, nil, err.Error(), false
		}
		defer func() { *buf = data[:0]; readBuffers.Put(buf) }()
	}
	if len(data) > MaxFileBytes {
		return nil, nil, fmt.Sprintf("over %d bytes; not an attestation", MaxFileBytes), true
	}
	if !looksLikeEnvelope(data) {
		return nil, nil, "not an attestation (no DSSE envelope)", true
	}
	if o.Verified != nil {
		if v, kid := o.Verified(path, data); v != nil {
			t := tracks[v.Statement.Predicate.Track.ID]
			for _, k := range keys {
				if k.KeyID == kid && (!pinTracks || t != nil) {
					return &Entry{Path: path, Key: k.Name, KeyID: k.KeyID, Predicate: v.Statement.Predicate, StatementSHA256: sha256.Sum256(v.Payload), Warnings: v.Warnings}, nil, "", false
				}
			}
		}
	}
	env, err := attest.EnvelopeOf(data)
	if err != nil {
		return nil, nil, err.Error(), false
	}
	opts := []attest.VerifyOption{attest.WithHeads(o.heads)}
	if pinTracks {
		var head struct {
			Payload string `json:"payload"`
		}
		json.Unmarshal(env, &head)
		id := trackIDOf(head.Payload)
		t, ok := tracks[id]
		if !ok {
			// (published in boards' rejections: kept word for word, so that a board regenerated
			// from its attestations is the bytes published)
			return nil, nil, fmt.Sprintf("made under track %s, which is not among the --track files", shortID(id)), false
		}
		opts = append(opts, attest.WithTrack(t))
	}
	var last error
	for _, k := range keys {
		v, err := attest.Verify(env, k.Verifier, opts...)
		if err == nil {
			return &Entry{Path: path, Key: k.Name, KeyID: k.KeyID, Predicate: v.Statement.Predicate, StatementSHA256: sha256.Sum256(v.Payload), Warnings: v.Warnings}, nil, "", false
		}
		last = err
		var vf *attest.VerificationFailure
		if errors.As(err, &vf) && vf.Reason != attest.ReasonSignature && vf.Reason != attest.ReasonSignatureCount {
			break // signed by this key but not valid: another key will not help
		}
	}
	// Not a run's attestation that verified: an amendment, perhaps (read only now, so that a run's
	// costs nothing more).
	if isAmendment(env) {
		am, reason := verifyAmendment(path, env, keys, tracks, pinTracks, o)
		return nil, am, reason, false
	}
	return nil, nil, keysReason(len(keys), last), false
}

// keysReason is why an attestation that failed with err under each of keys keys is rejected.
func keysReason(keys int, err error) string {
	if keys > 1 {
		return fmt.Sprintf("not valid with any of the %d keys: %v", keys, err)
	}
	return err.Error()
}

// isAmendment says whether an envelope's (unverified) payload is an amendment's statement, only
// to pick its verifier; the verification checks the type again from the signed bytes.
func isAmendment(env []byte) bool {
	var head struct {
		Payload string `json:"payload"`
	}
	json.Unmarshal(env, &head)
	raw, err := decodeB64(head.Payload)
	if err != nil {
		return false
	}
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	json.Unmarshal(raw, &st)
	return st.PredicateType == attest.PredicateTypeAmendmentV1
}

// verifyAmendment verifies an amendment with the first of keys that does, and its signatures
// beside the host's against what its run's track asks (attest.CheckReviewer): with tracks
// pinned, the track must be one of them; without, it is the run's own track.toml, in a gathered
// run's directory (RUN/amendments/AMENDMENT), where its id is the one the amendment names; with
// neither, the amendment cannot be judged (its track may ask for a reviewer) and is not applied.
func verifyAmendment(path string, env []byte, keys []Key, tracks map[string]*policy.Track, pinTracks bool, o LoadOptions) (*Amended, string) {
	var last error
	for _, k := range keys {
		v, err := attest.VerifyAmendment(env, k.Verifier)
		if err == nil {
			tid := v.Statement.Predicate.Track.ID
			t, ok := tracks[tid]
			if !ok && !pinTracks {
				t = ownTrack(path, tid, o)
				ok = t != nil
			}
			switch {
			case ok:
				if err := v.CheckReviewer(t); err != nil {
					return nil, "an amendment, not applied: " + err.Error()
				}
			case pinTracks:
				return nil, fmt.Sprintf("an amendment of a run made under track %s, which is not among the --track files", shortID(tid))
			default:
				return nil, fmt.Sprintf("an amendment, not applied: its run's track (%s) is neither given (--track) nor beside the run (RUN/track.toml), and only the track says whose signatures an amendment needs", shortID(tid))
			}
			return &Amended{Path: path, Key: k.Name, KeyID: k.KeyID, Statement: v.Statement, Digest: v.Digest, Reviewer: v.Reviewer}, ""
		}
		last = err
		var vf *attest.VerificationFailure
		if errors.As(err, &vf) && vf.Reason != attest.ReasonSignature && vf.Reason != attest.ReasonSignatureCount {
			break
		}
	}
	return nil, "an amendment, not applied: " + keysReason(len(keys), last)
}

// ownTrack is the track.toml of the gathered run whose amendment is at path
// (RUN/amendments/AMENDMENT), when it is track id; nil when there is none.
func ownTrack(path, id string, o LoadOptions) *policy.Track {
	if filepath.Base(filepath.Dir(path)) != "amendments" {
		return nil
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(path)), "track.toml")
	var b []byte
	var err error
	if o.ReadFile != nil {
		b, err = o.ReadFile(p)
	} else {
		b, err = fileio.ReadLimited(p, "track file", policy.MaxTrackBytes)
	}
	if err != nil {
		return nil
	}
	t, err := policy.Parse(p, b)
	if err != nil || t.ID != id {
		return nil
	}
	return t
}

// looksLikeEnvelope tells a broken attestation from some other JSON file.
func looksLikeEnvelope(data []byte) bool {
	return bytes.Contains(data, []byte(`"payloadType"`)) || bytes.Contains(data, []byte(`"dsseEnvelope"`))
}

// trackIDOf reads the track id from an (unverified) payload, only to pick the track file to
// verify against; the verification itself checks it again from the signed bytes.
func trackIDOf(payloadB64 string) string {
	raw, err := decodeB64(payloadB64)
	if err != nil {
		return ""
	}
	var st struct {
		Predicate struct {
			Track struct {
				ID string `json:"id"`
			} `json:"track"`
		} `json:"predicate"`
	}
	json.Unmarshal(raw, &st)
	return st.Predicate.Track.ID
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	if id == "" {
		return "(unreadable)"
	}
	return id
}

// dedupe keeps one entry per run id: the same signed statement twice (result.att.json and its
// Sigstore bundle, or a re-gathered copy) counts once; two different statements for one run
// are both rejected as a conflict.
func (in *Inputs) dedupe() {
	sort.SliceStable(in.Entries, func(i, j int) bool { return in.Entries[i].Path < in.Entries[j].Path })
	first := map[string]int{}
	conflict := map[string]bool{}
	var kept []Entry
	for _, e := range in.Entries {
		key := e.Predicate.Track.ID + "/" + e.Predicate.Run.ID
		if i, ok := first[key]; ok {
			if kept[i].StatementSHA256 != e.StatementSHA256 {
				conflict[key] = true
				in.Rejected = append(in.Rejected, Rejection{e.Path, fmt.Sprintf("run %s has another, different attestation (%s); both are rejected", e.Predicate.Run.ID, kept[i].Path)})
			} else {
				in.Skipped = append(in.Skipped, Rejection{e.Path, fmt.Sprintf("the same attestation of run %s as %s; counted once", e.Predicate.Run.ID, kept[i].Path)})
			}
			continue
		}
		first[key] = len(kept)
		kept = append(kept, e)
	}
	in.Entries = in.Entries[:0]
	for _, e := range kept {
		key := e.Predicate.Track.ID + "/" + e.Predicate.Run.ID
		if conflict[key] {
			in.Rejected = append(in.Rejected, Rejection{e.Path, fmt.Sprintf("run %s has another, different attestation; both are rejected", e.Predicate.Run.ID)})
			continue
		}
		in.Entries = append(in.Entries, e)
	}
}

// readBuffers keeps the buffers files are read into.
var readBuffers = sync.Pool{New: func() any { return new([]byte) }}

// readError is a file's read failure as a rejection says it: the step, then the cause alone
// (the path is the rejection's own).
func readError(step string, err error) error {
	return errors.New(step + ": " + fileio.Cause(err).Error())
}
