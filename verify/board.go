package verify

import (
	"fmt"
	"io"
	"strings"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/policy"
)

// BoardOptions is what a board's verification takes (sealrun leaderboard's flags).
type BoardOptions struct {
	Keys   []leaderboard.Key // trusted keys: an attestation counts only if one verifies it
	Tracks []*policy.Track   // when given, an attestation under any other track is rejected
	// Ledgers are each host's published run ledger (the exam suite only): each is verified with
	// the keys and against the heads the attestations carry, and every row is accounted for.
	Ledgers []string
	// Witnesses and Quorum: each ledger's largest head at least Quorum of them cosigned.
	Witnesses []*witness.Verifier
	Quorum    int
	// Suite is leaderboard.SuiteExam ("" too) or leaderboard.SuiteAIRS; AIRS is the latter's.
	Suite         string
	AIRS          airs.Options
	HumanBaseline bool // one row for every person's runs of a track
}

// BoardDetails is what a board's verification found beside its checks.
type BoardDetails struct {
	Suite        string        `json:"suite"`
	Attestations int           `json:"attestations"` // verified, on the board
	Rejected     int           `json:"rejected"`     // did not verify: the attestations check names each
	Skipped      int           `json:"skipped"`      // files in a directory that are not attestations
	Tables       int           `json:"tables"`       // the exam suite's tracks, or the AIRS suite's tasks
	Ledgers      []BoardLedger `json:"ledgers,omitempty"`
}

// BoardLedger is one run ledger a board was checked against.
type BoardLedger struct {
	Name      string           `json:"name"`
	Origin    string           `json:"origin"`
	Size      uint64           `json:"size"`
	Witnessed *LedgerWitnessed `json:"witnessed,omitempty"`
}

// Board verifies the attestations at paths (files, or directories searched for *.json) and
// builds their board. Its checks, in order: ledgers (each verified, and consistent with every
// head an attestation carries), witnessed (each ledger's head cosigned by the quorum),
// attestations (each verifies with a trusted key, under a given track, once per run) and
// accounting (every run each ledger holds ended and is published, every published run is in a
// ledger). The board is nil when a ledger does not verify: nothing can be accounted for then.
// An input that does not verify fails the attestations check but is no error: the board is
// built from the rest, as a publisher may still want it (--allow-rejected).
func Board(paths []string, o BoardOptions) (*Result, *leaderboard.Suite, error) {
	suite := o.Suite
	if suite == "" {
		suite = leaderboard.SuiteExam
	}
	switch {
	case suite != leaderboard.SuiteExam && suite != leaderboard.SuiteAIRS:
		return nil, nil, usageErr(fmt.Errorf("suite %q: use %s or %s", suite, leaderboard.SuiteExam, leaderboard.SuiteAIRS))
	case len(o.Keys) == 0:
		return nil, nil, usageErr(opt.New("verify.BoardOptions", "Keys", "none given: every row comes from an attestation a trusted key verifies (a PEM file or a directory of *.pub files)"))
	case len(o.Ledgers) > 0 && suite == leaderboard.SuiteAIRS:
		return nil, nil, usageErr(opt.New("verify.BoardOptions", "Ledgers", "are for the exam suite's board for now"))
	case len(o.Witnesses) > 0 && len(o.Ledgers) == 0:
		return nil, nil, usageErr(opt.New("verify.BoardOptions", "Witnesses", "check the ledgers: each host's", "Ledgers"))
	}
	r := &Result{Kind: "board", Path: strings.Join(paths, " ")}
	in, lerr, err := leaderboard.LoadWithLedgers(paths, o.Keys, o.Tracks, o.Ledgers, leaderboard.LoadOptions{})
	if err != nil {
		return nil, nil, ioErr(err)
	}
	d := &BoardDetails{Suite: suite, Skipped: len(in.Skipped)}
	r.Board = d

	switch {
	case len(o.Ledgers) == 0:
		r.skip("ledgers", "no run ledger given (--ledger)")
	case lerr != nil:
		r.fail("ledgers", Problem{Reason: lerr.Error()})
	default:
		r.pass("ledgers")
	}
	for _, l := range in.Ledgers {
		d.Ledgers = append(d.Ledgers, BoardLedger{Name: l.Name, Origin: l.Origin, Size: l.Head.Size})
	}
	switch {
	case len(o.Witnesses) == 0:
		r.skip("witnessed", "no witness's key given (--witness)")
	case lerr != nil:
		r.skip("witnessed", "the ledgers did not verify")
	default:
		var ps []Problem
		for i, l := range in.Ledgers {
			if w, err := witness.CheckLedger(l, verifiersOf(o.Keys), o.Witnesses, o.Quorum); err != nil {
				ps = append(ps, Problem{File: l.Name, Reason: err.Error()})
			} else {
				d.Ledgers[i].Witnessed = &LedgerWitnessed{Size: w.Head.Size, By: w.By, NotBy: w.NotBy, EntriesAfter: w.After}
			}
		}
		r.record("witnessed", ps)
	}
	if lerr != nil {
		r.skip("attestations", "the ledgers did not verify: no board is built")
		r.skip("accounting", "the ledgers did not verify")
		return r.finish(), nil, nil
	}

	in.HumanBaseline = o.HumanBaseline
	s, err := leaderboard.BuildSuite(suite, in, o.Keys, o.AIRS)
	if err != nil {
		return nil, nil, ioErr(err)
	}
	d.Tables, d.Rejected, d.Attestations = s.Tables, s.Rejected, len(in.Entries)
	var ps []Problem
	for _, rj := range s.Rejections {
		ps = append(ps, Problem{File: rj.Path, Reason: rj.Reason})
	}
	r.record("attestations", ps)
	if len(o.Ledgers) == 0 {
		r.skip("accounting", "no run ledger given (--ledger)")
	} else {
		ps = nil
		for _, u := range s.Unaccounted {
			ps = append(ps, Problem{Reason: u})
		}
		r.record("accounting", ps)
	}
	return r.finish(), s, nil
}

// WriteBoardVerdict writes a board's checks and verdict, for a terminal.
func WriteBoardVerdict(w io.Writer, r *Result) {
	d := r.Board
	if d != nil {
		fmt.Fprintf(w, "board (%s suite): %d attestation(s) verified, %d rejected, %d file(s) skipped, %d table(s)\n", d.Suite, d.Attestations, d.Rejected, d.Skipped, d.Tables)
		for _, l := range d.Ledgers {
			if l.Witnessed != nil {
				fmt.Fprintf(w, "ledger %s: head of %d entries cosigned by %s; %d entries after it\n", l.Name, l.Witnessed.Size, strings.Join(l.Witnessed.By, ", "), l.Witnessed.EntriesAfter)
			}
		}
	}
	r.WriteChecks(w)
	for _, c := range r.Checks {
		for _, p := range c.Problems {
			fmt.Fprintf(w, "  %s: %s\n", c.Name, p)
		}
	}
	fmt.Fprintf(w, "board: %s\n", r.Verdict)
}
