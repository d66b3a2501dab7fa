package leaderboard

import (
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"github.com/sealrun/sealrun/ledger"
)

// RunAmendment is an amendment (sealrun amend) applied to a run: it verified with a trusted key
// and names the run's published attestation.
type RunAmendment struct {
	Action string    `json:"action"` // invalidate, legacy or note
	Reason string    `json:"reason"`
	Link   string    `json:"link,omitempty"`
	Time   time.Time `json:"time"`
	Digest string    `json:"amendment"` // SHA-256 (hex) of its signed statement: its ledger entry's
	Key    string    `json:"key"`       // the key file that verified it
	// Reviewer is the key id of the reviewer who signed it beside the host, where the run's
	// track names reviewers ([amendments] reviewers).
	Reviewer string `json:"reviewer,omitempty"`
	Path     string `json:"path"`
}

// Text is the amendment as a board line says it.
func (a RunAmendment) Text() string {
	what := map[string]string{ledger.ActionInvalidate: "invalidated", ledger.ActionLegacy: "legacy", ledger.ActionNote: "note"}[a.Action]
	s := fmt.Sprintf("%s %s: %s", what, a.Time.UTC().Format(time.DateOnly), a.Reason)
	if a.Link != "" {
		s += " (" + a.Link + ")"
	}
	return s
}

// AmendRule is the rule added when a board has amendments.
const AmendRule = "Amendments (sealrun amend: signed by the host, each an entry of its ledger) apply when they verify with a trusted key, carry a reviewer's signature too where the run's track names reviewers, and name the run's published attestation, which never changes: an invalidated run leaves the mean and is listed with its reason and link, and its rerun, as an invalid run is; a legacy run is labelled and stays in the mean; a note is shown with the row's runs. A run takes one invalidation or legacy label: two that conflict are both rejected. With --ledger, an amendment a ledger holds and the board lacks leaves the row not accounted for, as a withheld run does."

// amendmentsByRun applies Amendments to the board: those that apply by run id, the others
// rejected, the rule added.
func (b *Board) amendmentsByRun(in *Inputs) map[string][]RunAmendment {
	if len(in.Amendments) == 0 {
		return nil
	}
	out, rejected, skipped := Amendments(in)
	b.Rejected = append(b.Rejected, rejected...)
	b.Skipped = append(b.Skipped, skipped...)
	b.Rules = append(append([]string(nil), b.Rules...), AmendRule)
	return out
}

// Amendments checks the verified amendments against the published attestations and returns
// those that apply, by run id; the others are rejected with the reason, and a second copy of
// one skipped.
func Amendments(in *Inputs) (byRunOut map[string][]RunAmendment, rejected, skipped []Rejection) {
	b := &Board{}
	published := map[string]*Entry{}
	for i := range in.Entries {
		published[in.Entries[i].Predicate.Run.ID] = &in.Entries[i]
	}
	ams := append([]Amended(nil), in.Amendments...)
	sort.SliceStable(ams, func(i, j int) bool {
		ti, tj := ams[i].Statement.Predicate.Time, ams[j].Statement.Predicate.Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		if ams[i].Digest != ams[j].Digest {
			return ams[i].Digest < ams[j].Digest
		}
		return ams[i].Path < ams[j].Path
	})
	seen := map[string]string{} // digest -> the path counted
	byRun := map[string][]Amended{}
	var runs []string
	for _, a := range ams {
		p := a.Statement.Predicate
		if first, dup := seen[string(a.Digest)]; dup {
			b.Skipped = append(b.Skipped, Rejection{a.Path, fmt.Sprintf("the same amendment of run %s as %s; counted once", p.Run, first)})
			continue
		}
		seen[string(a.Digest)] = a.Path
		e, ok := published[p.Run]
		switch {
		case !ok:
			b.Rejected = append(b.Rejected, Rejection{a.Path, fmt.Sprintf("an amendment (%s) of run %s, which has no verified attestation here: not applied", p.Action, p.Run)})
			continue
		case hex.EncodeToString(e.StatementSHA256[:]) != string(a.Statement.Amended()):
			b.Rejected = append(b.Rejected, Rejection{a.Path, fmt.Sprintf("an amendment (%s) naming attestation %s… of run %s; the attestation here is %s…: not applied", p.Action, a.Statement.Amended()[:12], p.Run, hex.EncodeToString(e.StatementSHA256[:6]))})
			continue
		case p.Track.ID != e.Predicate.Track.ID:
			b.Rejected = append(b.Rejected, Rejection{a.Path, fmt.Sprintf("an amendment of run %s naming track %s, not its track: not applied", p.Run, shortID(p.Track.ID))})
			continue
		}
		if _, ok := byRun[p.Run]; !ok {
			runs = append(runs, p.Run)
		}
		byRun[p.Run] = append(byRun[p.Run], a)
	}
	out := map[string][]RunAmendment{}
	for _, run := range runs {
		var status []Amended
		notes := 0
		for _, a := range byRun[run] {
			switch a.Statement.Predicate.Action {
			case ledger.ActionNote:
				if notes == ledger.MaxNotes {
					b.Rejected = append(b.Rejected, Rejection{a.Path, fmt.Sprintf("a note of run %s beyond the %d a run takes: not applied", run, ledger.MaxNotes)})
					continue
				}
				notes++
			default:
				status = append(status, a)
				continue
			}
			out[run] = append(out[run], runAmendment(a))
		}
		switch len(status) {
		case 0:
		case 1:
			out[run] = append(out[run], runAmendment(status[0]))
		default:
			for _, a := range status {
				b.Rejected = append(b.Rejected, Rejection{a.Path, fmt.Sprintf("run %s has %d amendments that invalidate it or label it legacy; a run takes one: none is applied", run, len(status))})
			}
		}
		sort.SliceStable(out[run], func(i, j int) bool { return out[run][i].Time.Before(out[run][j].Time) })
	}
	return out, b.Rejected, b.Skipped
}

func runAmendment(a Amended) RunAmendment {
	p := a.Statement.Predicate
	return RunAmendment{Action: p.Action, Reason: p.Reason, Link: p.Link, Time: p.Time.UTC(), Digest: string(a.Digest), Key: a.Key, Reviewer: a.Reviewer, Path: a.Path}
}

// amendedStatus says what run's amendments make of it: invalidated, legacy, or neither.
func amendedStatus(as []RunAmendment) (invalidated, legacy *RunAmendment) {
	for i := range as {
		switch as[i].Action {
		case ledger.ActionInvalidate:
			invalidated = &as[i]
		case ledger.ActionLegacy:
			legacy = &as[i]
		}
	}
	return
}
