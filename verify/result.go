package verify

import (
	"fmt"
	"io"
	"strings"
)

// Schema names the JSON form of a Result (docs/VERIFY-JSON.md). A change that only adds a field
// keeps it; any other change is a new schema.
const Schema = "sealrun-verify/1"

// Outcome is what one check found.
type Outcome string

const (
	Passed        Outcome = "passed"         // it checked
	Failed        Outcome = "failed"         // it did not: Problems say which file and why
	NotApplicable Outcome = "not_applicable" // it was not made: Why says why (nothing to check, or the reader did not ask)
)

// Problem is one thing a check found wrong: the file (a path in the publication, or the file
// given) and the reason.
type Problem struct {
	File   string `json:"file,omitempty"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	if p.File == "" {
		return p.Reason
	}
	return p.File + ": " + p.Reason
}

// Check is one check and its outcome.
type Check struct {
	Name     string    `json:"name"`
	Outcome  Outcome   `json:"outcome"`
	Why      string    `json:"why,omitempty"`      // not applicable: why
	Problems []Problem `json:"problems,omitempty"` // failed: each file and reason
}

// Unchecked is a file no check covered that the reader allowed to stay so, and why it is not
// covered.
type Unchecked struct {
	File string `json:"file"`
	Why  string `json:"why"`
}

// Result is what a verification found: every check with its outcome, and the verdict. Valid is
// true only when no check failed; a file the reader allowed to stay unchecked is listed in
// Unchecked and named by the verdict.
type Result struct {
	Schema    string      `json:"schema"`
	Kind      string      `json:"kind"` // "run", "ledger", "publication" or "board"
	Path      string      `json:"path"` // what was verified, as given
	Valid     bool        `json:"valid"`
	Verdict   string      `json:"verdict"` // "VALID", "VALID, N file(s) unchecked" or "NOT VALID"
	Checks    []Check     `json:"checks"`
	Unchecked []Unchecked `json:"unchecked,omitempty"`
	// Manifest (a publication): "signed" (SHA256SUMS.dsse.json verified with a trusted key),
	// "unverified" (present, but no trusted key verifies it) or "unsigned" (a publication from
	// before publish signed its list; the list is then only as good as the files it names are
	// each checked).
	Manifest string `json:"manifest,omitempty"`
	// Reason and Detail are the first failed check's name and its problems, in one line: what
	// `sealrun verify` printed before the schema (and prints still).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`

	Run         *RunDetails         `json:"run,omitempty"`         // a run: what its attestation says, and what each check found
	Ledger      *LedgerDetails      `json:"ledger,omitempty"`      // a ledger
	Publication *PublicationDetails `json:"publication,omitempty"` // a publication
	Board       *BoardDetails       `json:"board,omitempty"`       // a board
}

// Failed lists every problem of every failed check, in order.
func (r *Result) Problems() []Problem {
	var out []Problem
	for _, c := range r.Checks {
		out = append(out, c.Problems...)
	}
	return out
}

// Check returns the check of that name, or nil.
func (r *Result) Check(name string) *Check {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// pass, fail and skip record one check.
func (r *Result) pass(name string) { r.Checks = append(r.Checks, Check{Name: name, Outcome: Passed}) }

func (r *Result) fail(name string, ps ...Problem) {
	r.Checks = append(r.Checks, Check{Name: name, Outcome: Failed, Problems: ps})
}

func (r *Result) skip(name, why string) {
	r.Checks = append(r.Checks, Check{Name: name, Outcome: NotApplicable, Why: why})
}

// finish sets the verdict from the checks.
func (r *Result) finish() *Result {
	r.Schema = Schema
	r.Valid = true
	for _, c := range r.Checks {
		if c.Outcome == Failed {
			if r.Valid {
				r.Reason = c.Name
				var ps []string
				for _, p := range c.Problems {
					ps = append(ps, p.String())
				}
				r.Detail = strings.Join(ps, "; ")
			}
			r.Valid = false
		}
	}
	switch {
	case !r.Valid:
		r.Verdict = "NOT VALID"
	case len(r.Unchecked) > 0:
		r.Verdict = fmt.Sprintf("VALID, %d file(s) unchecked", len(r.Unchecked))
	default:
		r.Verdict = "VALID"
	}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	return r
}

// WriteChecks writes one line a check: its name, its outcome, and why or what failed.
func (r *Result) WriteChecks(w io.Writer) {
	for _, c := range r.Checks {
		switch c.Outcome {
		case Passed:
			fmt.Fprintf(w, "  %-18s passed\n", c.Name)
		case NotApplicable:
			fmt.Fprintf(w, "  %-18s not applicable: %s\n", c.Name, c.Why)
		case Failed:
			fmt.Fprintf(w, "  %-18s FAILED (%d problem(s))\n", c.Name, len(c.Problems))
		}
	}
}
