package leaderboard

import (
	"fmt"
	"io"

	"github.com/sealrun/sealrun/airs"
)

// SuiteExam is the --suite of exam runs (the default): one table per exam track.
const SuiteExam = "exam"

// Suite is the board of one suite as `sealrun leaderboard` and a publication build it: the
// exam suite's (Build) or the AIRS suite's (BuildAIRS), with what both report of it.
type Suite struct {
	Board interface {
		Render(w io.Writer, format string) error
	}
	Tables   int // the exam suite's tables (one per track), or the AIRS suite's tasks
	Rejected int // inputs that did not verify
	// Rejections are those inputs, each with its reason (the board lists them too).
	Rejections []Rejection
	// Unaccounted names each row the run ledgers do not account for ("track, agent: why") and
	// each run they hold that was withheld ("withheld: ..."); the exam suite with ledgers only.
	Unaccounted []string
}

// BuildSuite builds suite's board (SuiteExam or SuiteAIRS) from in; o is the AIRS suite's.
func BuildSuite(suite string, in *Inputs, keys []Key, o airs.Options) (*Suite, error) {
	switch suite {
	case SuiteAIRS:
		b, err := BuildAIRS(in, keys, o)
		if err != nil {
			return nil, err
		}
		return &Suite{Board: b, Tables: len(b.Tasks), Rejected: len(b.Rejected), Rejections: b.Rejected}, nil
	case SuiteExam:
		b := Build(in, keys)
		s := &Suite{Board: b, Tables: len(b.Tables), Rejected: len(b.Rejected), Rejections: b.Rejected}
		for _, t := range b.Tables {
			for _, r := range t.Rows {
				if r.Ledger != nil && !r.Ledger.Accounted {
					s.Unaccounted = append(s.Unaccounted, fmt.Sprintf("%s, %s: %s", t.Track.Name, r.Agent.Name(), r.Ledger.Text()))
				}
			}
		}
		for _, u := range b.Unpublished {
			s.Unaccounted = append(s.Unaccounted, "withheld: "+u)
		}
		return s, nil
	}
	return nil, fmt.Errorf("suite %q: use %s or %s", suite, SuiteExam, SuiteAIRS)
}
