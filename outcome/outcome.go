// Package outcome is how a sealed run ended: the one definition of the three ends a run has,
// which the grader's report, the daemon's records, the run ledger, the attestation and the
// board all carry. It imports nothing of sealrun's.
package outcome

import "fmt"

// Outcome is how a run ended.
type Outcome string

// The three ends of a run. Whose fault an end is decides what it counts for: a failed run is
// the agent's and counts in its mean (often as 0); an invalid run is the host's, counts for
// nothing and is rerun.
const (
	Graded  Outcome = "graded"  // the promoted candidate was graded
	Failed  Outcome = "failed"  // the agent's fault: it counts as its score
	Invalid Outcome = "invalid" // the host's fault: excluded from means and rerun
)

// All are the outcomes, in the order readers list them.
var All = []Outcome{Graded, Failed, Invalid}

// Known says whether o is one of the three.
func (o Outcome) Known() bool { return o == Graded || o == Failed || o == Invalid }

// Parse reads s as an outcome; anything else is an error naming it and the three there are.
func Parse(s string) (Outcome, error) {
	if o := Outcome(s); o.Known() {
		return o, nil
	}
	return "", fmt.Errorf("%q is not a run's outcome: graded, failed or invalid", s)
}
