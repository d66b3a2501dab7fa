package leaderboard

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
)

// MaxLedgerBytes bounds one ledger file (about 2 KB per run: a million runs).
const MaxLedgerBytes = 2 << 30

// LoadLedgers reads and verifies published run ledgers (sealrun ledger export) with the trusted
// keys: each must end with a head signed by one of them.
func LoadLedgers(paths []string, keys []Key) ([]*ledger.Ledger, error) {
	vs := make([]signature.Verifier, len(keys))
	for i, k := range keys {
		vs[i] = k.Verifier
	}
	var out []*ledger.Ledger
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, opt.Wrap("leaderboard.LoadLedgers", "Ledgers", err)
		}
		l, err := ledger.Read(io.LimitReader(f, MaxLedgerBytes), p, vs)
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// LoadWithLedgers is Load, and LoadLedgers of ledgerPaths (none: no ledger) on a goroutine of
// its own meanwhile, so that reading the ledgers (one pass each, on one CPU) overlaps the
// attestations' verification (on every CPU). in.Ledgers holds the ledgers when both succeed; a
// ledger that does not verify is ledgerErr, apart from err (Load's), as callers judge them apart.
// The attestations are read and verified as o says (LoadWith).
func LoadWithLedgers(paths []string, keys []Key, tracks []*policy.Track, ledgerPaths []string, o LoadOptions) (in *Inputs, ledgerErr, err error) {
	var ledgers []*ledger.Ledger
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(ledgerPaths) > 0 {
			ledgers, ledgerErr = LoadLedgers(ledgerPaths, keys)
		}
	}()
	// The heads the attestations carry are checked with the ledgers: one a verified ledger
	// holds needs no signature of its own (ledger.DeferredHeads), so the attestations are
	// checked while the ledgers are read, and each run's head costs no signature check.
	o.heads = ledger.DeferredHeads()
	in, err = LoadWith(paths, keys, tracks, o)
	<-done
	if err != nil {
		return nil, ledgerErr, err
	}
	if ledgerErr == nil {
		in.Ledgers = ledgers
	}
	rejectUnsettled(in, o.heads.Settle(in.Ledgers), len(keys))
	return in, ledgerErr, nil
}

// rejectUnsettled moves each entry whose ledger head failed (Heads.Settle) to the rejected,
// with the reason attest.Verify gives a head that does not open.
func rejectUnsettled(in *Inputs, failed map[string]error, keys int) {
	if len(failed) == 0 {
		return
	}
	kept := in.Entries[:0]
	for _, e := range in.Entries {
		err, bad := error(nil), false
		if e.Predicate.Ledger != nil {
			err, bad = failed[e.Predicate.Ledger.Checkpoint]
		}
		if !bad {
			kept = append(kept, e)
			continue
		}
		reason := keysReason(keys, &attest.VerificationFailure{Reason: attest.ReasonLedger, Detail: "ledger.checkpoint: " + err.Error()})
		in.Rejected = append(in.Rejected, Rejection{Path: e.Path, Reason: reason})
	}
	in.Entries = kept
}

// RowLedger is what the ledgers say of a row: every run of its track and agent that a ledger
// holds, and whether each is accounted for by a published attestation.
type RowLedger struct {
	// Accounted: every run of the row in the given ledgers ended and its attestation (graded,
	// failed or invalid) is in the published set, and every attestation of the row is in a
	// ledger.
	Accounted bool `json:"accounted"`
	Runs      int  `json:"runs"` // runs of the row in the ledgers
	// Missing names each run whose attestation was withheld, Pending each run not ended at the
	// ledger's head, NotInLedger each published run no given ledger holds, Reruns each invalid
	// run with the run that reran it.
	Missing     []string `json:"missing"`
	Pending     []string `json:"pending"`
	NotInLedger []string `json:"not_in_ledger"`
	Reruns      []string `json:"reruns"`
	Ledgers     []string `json:"ledgers"` // origins
}

// LedgerInfo names a ledger the board was checked against.
type LedgerInfo struct {
	Name   string `json:"name"`
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
}

// checkLedgers checks the ledgers against each other and against the heads the attestations
// carry; a ledger that fails (a fork, a truncation, an edited entry) is rejected with the
// reason and accounts for nothing. It returns the good ledgers by origin.
func (b *Board) checkLedgers(in *Inputs) map[string]*ledger.Ledger {
	good := map[string]*ledger.Ledger{}
	bad := map[*ledger.Ledger]bool{}
	reject := func(l *ledger.Ledger, err error) {
		if !bad[l] {
			bad[l] = true
			b.Rejected = append(b.Rejected, Rejection{Path: l.Name, Reason: "ledger: " + err.Error()})
		}
	}
	for i, a := range in.Ledgers {
		for _, c := range in.Ledgers[i+1:] {
			if err := ledger.Same(a, c); err != nil {
				reject(a, err)
				reject(c, err)
			}
		}
	}
	// Of several consistent exports of one host, the longest speaks for it (an older export is a
	// prefix of it, not a truncation).
	for _, l := range in.Ledgers {
		if bad[l] {
			continue
		}
		if o := good[l.Origin]; o == nil || o.Head.Size < l.Head.Size {
			good[l.Origin] = l
		}
	}
	// Each attestation's reference is checked on every CPU (they only read the ledgers), and the
	// findings are taken in the attestations' order, so that the first reason per ledger is the
	// same on every machine.
	refErr := make([]error, len(in.Entries))
	refLedger := make([]*ledger.Ledger, len(in.Entries))
	EachParallel(len(in.Entries), func(i int) {
		e := &in.Entries[i]
		r := e.Predicate.Ledger
		if r == nil {
			return
		}
		body, _, _ := strings.Cut(r.Checkpoint, "\n\n")
		cp, err := ledger.ParseCheckpoint(body + "\n")
		if err != nil {
			return // attest.Verify checked it
		}
		if l := good[r.Origin]; l != nil {
			refLedger[i], refErr[i] = l, l.CheckRef(r, cp, "the attestation "+e.Path)
		}
	})
	for i, err := range refErr {
		if err != nil {
			reject(refLedger[i], err)
		}
	}
	for _, l := range in.Ledgers {
		if bad[l] {
			if good[l.Origin] == l {
				delete(good, l.Origin)
			}
			continue
		}
		b.Ledgers = append(b.Ledgers, LedgerInfo{Name: l.Name, Origin: l.Origin, Size: l.Head.Size})
	}
	return good
}

// accountRows sets each row's RowLedger. It is long because it is the accounting rule (LedgerRule)
// in order: for each row, each run the ledgers hold of its track and agent, then each of its
// published runs; last, the runs of agents with no row (every attestation withheld).
func (b *Board) accountRows(in *Inputs, ledgers map[string]*ledger.Ledger, bad bool) {
	published := map[string]string{} // run -> sha256 of its signed statement
	for _, e := range in.Entries {
		published[e.Predicate.Run.ID] = hex.EncodeToString(e.StatementSHA256[:])
	}
	inLedger := map[string]bool{}
	// Amendments: those the board applied, and those the ledgers hold.
	applied := map[string]RunAmendment{}
	for _, t := range b.Tables {
		for _, r := range t.Rows {
			for _, run := range r.AmendedRuns() {
				for _, a := range run.Amendments {
					applied[a.Digest] = a
				}
			}
		}
	}
	ledgered := map[string]bool{}
	for _, l := range ledgers {
		for _, is := range l.Amended.ByRun {
			for _, i := range is {
				ledgered[string(l.Entries[i].Amendment)] = true
			}
		}
	}
	origins := make([]string, 0, len(ledgers))
	for o := range ledgers {
		origins = append(origins, o)
	}
	sort.Strings(origins)
	// Each ledger indexed once: a row then reads its own runs, not every entry (a board of a
	// hundred rows over a ledger of 20,000 entries compared two million names).
	index := map[string]*ledgerIndex{}
	for _, o := range origins {
		index[o] = indexLedger(ledgers[o])
	}
	for ti := range b.Tables {
		t := &b.Tables[ti]
		for ri := range t.Rows {
			row := &t.Rows[ri]
			agent := row.Agent.Model
			if row.Agent.Effort != "" {
				agent += "@" + row.Agent.Effort
			}
			scaffold := row.Agent.Scaffold + " " + row.Agent.ScaffoldVersion
			// The row's queued entries in each ledger, in the ledger's order: those of its
			// track, scaffold and agent, or, for the human baseline's row, of every person in it.
			// The index gives the candidates (a key holds every entry of its fields); each is
			// still matched field by field.
			match := func(a string) bool { return a == agent }
			key := rowKey(t.Track.ID, scaffold, agent)
			candidates := func(x *ledgerIndex) []int { return x.byRow[key] }
			if ps, ok := strings.CutPrefix(row.Agent.Model, "human/baseline: "); ok { // every person's runs (--human-baseline)
				people := strings.Split(ps, ", ")
				match = func(a string) bool { h, ok := strings.CutPrefix(a, "human/"); return ok && slices.Contains(people, h) }
				candidates = func(x *ledgerIndex) []int { // each person's, in the ledger's order
					var is []int
					for _, p := range people {
						is = append(is, x.byRow[rowKey(t.Track.ID, scaffold, "human/"+p)]...)
					}
					slices.Sort(is)
					return slices.Compact(is)
				}
			}
			rl := &RowLedger{Missing: []string{}, Pending: []string{}, NotInLedger: []string{}, Reruns: []string{}, Ledgers: []string{}}
			for _, o := range origins {
				x := index[o]
				l, rerunBy := x.l, x.rerunBy
				used := false
				for _, i := range candidates(x) {
					e := l.Entries[i]
					if e.Kind != ledger.KindQueued || e.Track != t.Track.ID || !match(e.Agent) || e.Scaffold != scaffold {
						continue
					}
					used = true
					rl.Runs++
					inLedger[e.Run] = true
					ei, ended := l.Ended[e.Run]
					if !ended {
						rl.Pending = append(rl.Pending, fmt.Sprintf("%s (seed %d, %s): not ended at the ledger's head", e.Run, e.Seed, o))
						continue
					}
					end := l.Entries[ei]
					if by := rerunBy[e.Run]; by != "" {
						rl.Reruns = append(rl.Reruns, e.Run+" → "+by)
					}
					got, ok := published[e.Run]
					switch {
					case end.Attestation == "":
						// Ended invalid without an attestation (the host could not sign): nothing
						// to publish; the ledger itself is the record.
					case !ok:
						rl.Missing = append(rl.Missing, fmt.Sprintf("%s (seed %d, %s on %s): its attestation is not in the published set", e.Run, e.Seed, end.State, o))
					case got != string(end.Attestation):
						rl.Missing = append(rl.Missing, fmt.Sprintf("%s (seed %d): the published attestation is not the one the ledger names", e.Run, e.Seed))
					}
					for _, ai := range l.Amended.ByRun[e.Run] {
						a := l.Entries[ai]
						got, ok := applied[string(a.Amendment)]
						switch {
						case !ok:
							rl.Missing = append(rl.Missing, fmt.Sprintf("%s (seed %d): its amendment (%s: %s; sha256 %s…) is not in the published set", e.Run, e.Seed, a.Action, a.Reason, a.Amendment[:12]))
						case got.Action != a.Action || got.Reason != a.Reason || got.Link != a.Link || !got.Time.Equal(a.Time):
							// The entry names the signed statement's digest but says something else.
							rl.Missing = append(rl.Missing, fmt.Sprintf("%s (seed %d): the ledger's entry of amendment sha256 %s… says %s: %q, the signed amendment %s: %q", e.Run, e.Seed, a.Amendment[:12], a.Action, a.Reason, got.Action, got.Reason))
						}
					}
				}
				if used {
					rl.Ledgers = append(rl.Ledgers, o)
				}
			}
			for _, r := range row.Runs {
				if !inLedger[r.ID] {
					rl.NotInLedger = append(rl.NotInLedger, r.ID)
				}
			}
			for _, r := range row.Invalid {
				if !inLedger[r.ID] {
					rl.NotInLedger = append(rl.NotInLedger, r.ID)
				}
			}
			for _, run := range row.AmendedRuns() {
				for _, a := range run.Amendments {
					if !ledgered[a.Digest] {
						rl.NotInLedger = append(rl.NotInLedger, fmt.Sprintf("the amendment of %s (%s, sha256 %s…)", run.ID, a.Action, a.Digest[:12]))
					}
				}
			}
			rl.Accounted = !bad && len(rl.Missing)+len(rl.Pending)+len(rl.NotInLedger) == 0
			row.Ledger = rl
		}
	}
	// Runs of a track on the board whose agent has no row: every attestation of that agent was
	// withheld.
	tracks := map[string]bool{}
	for _, t := range b.Tables {
		tracks[t.Track.ID] = true
	}
	b.Unpublished = []string{}
	for _, o := range origins {
		l := ledgers[o]
		for _, e := range l.Entries {
			if e.Kind != ledger.KindQueued || !tracks[e.Track] || inLedger[e.Run] {
				continue
			}
			state := "not ended"
			if ei, ok := l.Ended[e.Run]; ok {
				state = string(l.Entries[ei].State)
			}
			b.Unpublished = append(b.Unpublished, fmt.Sprintf("%s (%s · %s, seed %d, %s on %s)", e.Run, e.Scaffold, e.Agent, e.Seed, state, o))
		}
	}
}

// ledgerIndex is a ledger's queued entries by row, and its reruns.
type ledgerIndex struct {
	l       *ledger.Ledger
	byRow   map[string][]int  // rowKey(track, scaffold, agent) -> its queued entries, in order
	rerunBy map[string]string // run -> the run that reran it
}

func indexLedger(l *ledger.Ledger) *ledgerIndex {
	x := &ledgerIndex{l: l, byRow: map[string][]int{}, rerunBy: map[string]string{}}
	for i, e := range l.Entries {
		if e.Kind != ledger.KindQueued {
			continue
		}
		if e.RerunOf != "" {
			x.rerunBy[e.RerunOf] = e.Run
		}
		k := rowKey(e.Track, e.Scaffold, e.Agent)
		x.byRow[k] = append(x.byRow[k], i)
	}
	return x
}

// rowKey joins a row's track, scaffold and agent with a byte none of them holds.
func rowKey(track, scaffold, agent string) string { return track + "\x00" + scaffold + "\x00" + agent }

// Text is the row's ledger line.
func (rl *RowLedger) Text() string {
	if rl.Accounted {
		s := fmt.Sprintf("every run accounted for (%d in %s)", rl.Runs, strings.Join(rl.Ledgers, ", "))
		if len(rl.Reruns) > 0 {
			s += "; rerun: " + strings.Join(rl.Reruns, ", ")
		}
		return s
	}
	var parts []string
	if len(rl.Missing) > 0 {
		parts = append(parts, "MISSING "+strings.Join(rl.Missing, "; "))
	}
	if len(rl.Pending) > 0 {
		parts = append(parts, "pending "+strings.Join(rl.Pending, "; "))
	}
	if len(rl.NotInLedger) > 0 {
		parts = append(parts, "not in any given ledger: "+strings.Join(rl.NotInLedger, ", "))
	}
	if len(rl.Reruns) > 0 {
		parts = append(parts, "rerun: "+strings.Join(rl.Reruns, ", "))
	}
	if len(parts) == 0 {
		parts = append(parts, "a given ledger was rejected (see Rejected)")
	}
	return "NOT accounted for: " + strings.Join(parts, "; ")
}
