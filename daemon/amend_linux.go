package daemon

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

// AmendmentsDir is where a run's signed amendments are kept, in its run directory: one file per
// amendment, named by the SHA-256 of its statement (its ledger entry's amendment).
const AmendmentsDir = "amendments"

// errAmendConflict is an amendment the ledger's rules refuse (a second invalidation, a run
// ended invalid): 409, where a malformed request is 400.
var errAmendConflict = errors.New("conflict")

func (d *Daemon) amendRun(w http.ResponseWriter, r *http.Request) {
	var req api.AmendRequest
	if !decodeRequest(w, r, &req, `an amend request (JSON with action, reason and optionally link and rerun)`) {
		return
	}
	out, err := d.Amend(r.Context(), r.PathValue("id"), req)
	switch {
	case errors.Is(err, errNoRun):
		writeErr(w, http.StatusNotFound, "%v", err)
	case errors.Is(err, errAmendConflict):
		writeErr(w, http.StatusConflict, "%v", err)
	case errors.Is(err, ErrRefused):
		a := api.APIError{Error: strings.TrimPrefix(err.Error(), "refused: "), Code: api.CodeOf(http.StatusBadRequest)}
		var oe *opt.Error
		if errors.As(err, &oe) && oe.Where == "" {
			a.Option, a.Needs = oe.Option, oe.Needs
		}
		writeJSON(w, http.StatusBadRequest, a)
	case err != nil:
		writeErr(w, http.StatusInternalServerError, "%v", err)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}

var errNoRun = errors.New("no such run")

// MaxDraftAge is how long a drafted amendment may wait for its reviewer: the statement says when
// it was drafted, and a reader should not find it weeks older than its ledger entry.
const MaxDraftAge = 14 * 24 * time.Hour

// Amend signs an amendment of run id with the host key and appends its ledger entry: the
// amendment's file and its entry both, or neither (the file is written first, atomically, and
// removed when the entry cannot be appended; one left by a crash in between names no entry and
// is removed at start). With req.Rerun, an invalidated run is then rerun, rerun_of it.
func (d *Daemon) Amend(ctx context.Context, id string, req api.AmendRequest) (*api.Amended, error) {
	d.amendMu.Lock()
	defer d.amendMu.Unlock()
	refuse := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %w", ErrRefused, opt.Field(field, fmt.Sprintf(format, a...)))
	}
	d.mu.Lock()
	rec, known := d.runs[id]
	var spec RunSpec
	if known {
		spec = d.spec[id]
	}
	d.mu.Unlock()
	switch {
	case !known:
		return nil, fmt.Errorf("%w: no run %s on this host (sealrun ps -a lists them): a host amends only runs it ran", errNoRun, id)
	case !rec.Final():
		return nil, fmt.Errorf("%w: run %s has not ended (%s): cancel it, or amend it once it has", errAmendConflict, id, rec.State)
	case d.ledger == nil || d.x.Signer == nil:
		return nil, fmt.Errorf("%w: this host keeps no ledger (no signing key): an amendment is a signed ledger entry", errAmendConflict)
	}
	var drafted *attest.AmendmentStatement
	var reviewSigs []attest.AmendmentSignature
	if len(req.Reviewed) > 0 {
		if req.Draft {
			return nil, refuse("draft", "a reviewed amendment is not drafted again: send it (reviewed) alone")
		}
		st, _, sigs, err := attest.ReadAmendmentEnvelope(req.Reviewed)
		if err != nil {
			return nil, refuse("reviewed", "not a reviewed amendment: %v", err)
		}
		if len(sigs) != 1 {
			return nil, refuse("reviewed", "has %d signatures; a reviewed draft has the reviewer's only (sealrun amend review FILE --key KEY signs the draft sealrun amend --draft wrote)", len(sigs))
		}
		p := st.Predicate
		for _, f := range []struct{ name, given, drafted string }{{"action", req.Action, p.Action}, {"reason", req.Reason, p.Reason}, {"link", req.Link, p.Link}} {
			if f.given != "" && f.given != f.drafted {
				return nil, refuse(f.name, "%q, and the reviewed draft says %q: the reviewer signed the draft's; give none, or the same", f.given, f.drafted)
			}
		}
		if p.Run != id {
			return nil, refuse("reviewed", "is a draft of an amendment of run %s, not of %s", p.Run, id)
		}
		now := time.Now()
		if p.Time.After(now.Add(time.Minute)) || p.Time.Before(now.Add(-MaxDraftAge)) {
			return nil, refuse("reviewed", "was drafted at %s; a draft is sent within %s of it (draft it again, and have it reviewed again)", p.Time.Format(time.RFC3339), MaxDraftAge)
		}
		req.Action, req.Reason, req.Link = p.Action, p.Reason, p.Link
		drafted, reviewSigs = st, sigs
	}
	switch req.Action {
	case ledger.ActionInvalidate, ledger.ActionLegacy, ledger.ActionNote:
	default:
		return nil, refuse("action", "%q: give invalidate, legacy or note", req.Action)
	}
	if req.Rerun && req.Action != ledger.ActionInvalidate {
		return nil, refuse("rerun", "only an invalidated run is rerun; a %s amendment leaves the run in the mean", req.Action)
	}
	if req.Rerun && req.Draft {
		return nil, refuse("rerun", "a draft queues nothing: give --rerun when you send the reviewed amendment")
	}
	ended, ok := d.ledger.EndOf(id)
	if !ok || ended.Attestation == "" {
		return nil, fmt.Errorf("%w: run %s has no attestation in the ledger (it ended invalid before it could be attested): there is nothing to amend; it was rerun", errAmendConflict, id)
	}
	// The run's attestation, checked with this host's key and against its ledger entry.
	env, err := fileio.ReadLimited(filepath.Join(rec.Dir, "result.att.json"), "attestation", attest.MaxEnvelopeBytes)
	if err != nil {
		return nil, err
	}
	pub, err := d.x.Signer.PublicKey()
	if err != nil {
		return nil, err
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	run, err := attest.Verify(env, v)
	if err != nil {
		return nil, fmt.Errorf("run %s's attestation does not verify with this host's key: %w", id, err)
	}
	if sum := digest.SumHex(run.Payload); sum != ended.Attestation {
		return nil, fmt.Errorf("run %s's attestation (%s) is not the one its ledger entry names (%s): the run directory was changed", id, sum, ended.Attestation)
	}
	// The run's track, whose [amendments] says whose signatures an amendment needs: the track
	// file the run ran under, by the id its attestation names.
	track, err := policy.Parse("track.toml", mustTrackBytes(rec.Dir))
	if err != nil || track.ID != run.Statement.Predicate.Track.ID {
		return nil, fmt.Errorf("run %s's track.toml is not the track its attestation names (%s): the run directory was changed (%v)", id, run.Statement.Predicate.Track.ID, err)
	}
	if track.Status == policy.StatusWithdrawn || run.Statement.Predicate.Track.Status == string(policy.StatusWithdrawn) {
		return nil, fmt.Errorf("%w: run %s is of a withdrawn track: its results are unranked already", errAmendConflict, id)
	}
	reviewed := track.Amendments != nil
	switch {
	case reviewed && !req.Draft && drafted == nil:
		return nil, fmt.Errorf("%w: track %s (%s) asks for a reviewer's signature on an amendment beside the host's ([amendments] reviewers): draft it with --draft FILE, have a reviewer sign it (sealrun amend review FILE --key THEIR.key), and send it with sealrun amend %s --reviewed FILE", ErrRefused, track.Name, track.ID[:12], id)
	case !reviewed && (req.Draft || drafted != nil):
		return nil, refuse("draft", "track %s (%s) names no reviewer: the host's signature alone makes its amendments; amend without --draft or --reviewed", track.Name, track.ID[:12])
	}
	at := time.Now().UTC().Truncate(time.Second)
	if drafted != nil {
		at = drafted.Predicate.Time
	}
	st, err := attest.NewAmendment(run.Statement, ended.Attestation, attest.Amendment{Run: id, Action: req.Action, Reason: req.Reason, Link: req.Link, Time: at, Ledger: d.ledger.Origin()})
	if err != nil {
		field, problem, _ := strings.Cut(strings.TrimPrefix(err.Error(), "predicate."), ": ")
		return nil, refuse(field, "%s", problem)
	}
	if drafted != nil {
		// The reviewer signed what this host would say: the same statement, byte for byte.
		want, _ := st.Canonical()
		got, _ := drafted.Canonical()
		if string(want) != string(got) {
			return nil, refuse("reviewed", "is not the statement this host makes of run %s (another run's attestation, track, agent or ledger): draft it again with sealrun amend %s --draft", id, id)
		}
	}
	payload, err := st.Canonical()
	if err != nil {
		return nil, err
	}
	if err := d.ledger.CheckAmendment(st.Entry(digest.SumHex(payload))); err != nil {
		return nil, fmt.Errorf("%w: %v", errAmendConflict, err)
	}
	if req.Draft {
		draft, err := attest.AmendmentDraft(st)
		if err != nil {
			return nil, err
		}
		return &api.Amended{Run: id, Action: req.Action, Amendment: string(digest.SumHex(payload)), Draft: draft}, nil
	}
	signed, sum, err := attest.SignAmendment(ctx, st, d.x.Signer, reviewSigs...)
	if err != nil {
		return nil, err
	}
	va, err := attest.VerifyAmendment(signed, v)
	if err == nil {
		err = va.CheckReviewer(track)
	}
	if err != nil {
		return nil, refuse("reviewed", "%v", err)
	}
	dir := filepath.Join(rec.Dir, AmendmentsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, string(sum)+".att.json")
	if err := fileio.WriteFile(path, signed, 0o644); err != nil {
		return nil, err
	}
	i, err := d.ledger.Append(st.Entry(sum))
	if err != nil {
		// The rules were checked above, under amendMu: what fails now is the ledger's file, which
		// takes no more entries (as for a run's).
		os.Remove(path)
		fileio.SyncDir(dir)
		d.fail("ledger", err)
		return nil, err
	}
	d.log.Info("amended", "run", id, "action", req.Action, "amendment", sum, "ledger_entry", i, "reviewer", va.Reviewer)
	// The run's transcript and page say it (a reader rebuilds them from the same files).
	if err := writeTranscript(rec.Dir, run.Statement.Predicate); err != nil {
		d.log.Warn("rewrite the transcript of an amended run", "run", id, "err", err)
	}
	out := &api.Amended{Run: id, Action: req.Action, Amendment: string(sum), Path: path, Entry: i, Reviewer: va.Reviewer}
	if req.Rerun {
		r, err := d.submit(spec.Track, mustTrackBytes(rec.Dir), submitted{Agent: spec.Agent.String(), Seed: spec.Seed, User: "sealrund (rerun: amended: " + req.Reason + ")", RerunOf: id, Person: spec.Person, Proctors: spec.Proctors})
		if err != nil {
			return out, fmt.Errorf("the amendment is made (%s), but its rerun was not queued: %w; queue it with sealrun run --rerun-of %s", path, err, id)
		}
		out.Rerun = r.ID
	}
	return out, nil
}

// dropUnledgeredAmendments removes the amendment files a daemon killed between writing one and
// appending its ledger entry left: an amendment is made when its entry is in the ledger.
func (d *Daemon) dropUnledgeredAmendments() {
	if d.ledger == nil {
		return
	}
	for id, r := range d.runs {
		dir := filepath.Join(r.Dir, AmendmentsDir)
		names, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		in := map[string]bool{}
		for _, e := range d.ledger.AmendmentsOf(id) {
			in[string(e.Amendment)+".att.json"] = true
		}
		for _, n := range names {
			if !in[n.Name()] {
				d.log.Warn("an amendment never appended to the ledger is removed (a daemon stopped between the two)", "run", id, "file", n.Name())
				os.Remove(filepath.Join(dir, n.Name()))
			}
		}
	}
}
