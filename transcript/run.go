package transcript

import (
	"fmt"
	"time"

	"github.com/sealrun/sealrun/attest"
)

// RunFromPredicate is what an ended run's attestation says of it: the transcript's header, the
// same wherever the run's files are (the run directory, a gathered run, a publication).
func RunFromPredicate(p *attest.Predicate) Run {
	r := Run{
		ID: p.Run.ID, Track: p.Track.Name, TrackVersion: p.Track.Version, TrackID: p.Track.ID,
		Agent: p.LedgerAgent(), Scaffold: p.LedgerScaffold(), Seed: p.Seed,
		State: string(p.Result.Status), Reason: p.Result.Reason,
		Started: p.Timeline.Started.UTC(), Deadline: p.Timeline.Deadline.UTC(), Finished: p.Timeline.Finished.UTC(),
		Wall: p.Budget.Wall, CallLimit: p.Budget.CallLimit, Reserve: p.Budget.Reserve,
		MaxTokens: p.Budget.MaxTokens, MaxCost: p.Budget.MaxCost,
	}
	if p.Usage != nil && p.Usage.Cost != nil {
		price := p.Usage.Cost.Price
		r.Price = &price
	}
	if d, err := time.ParseDuration(p.Budget.Reserve); err == nil && !r.Deadline.IsZero() {
		r.ReserveAt = r.Deadline.Add(-d)
	}
	switch res := p.Result; {
	case p.Task != nil:
		r.Result = p.MetricText()
	case res.Questions > 0:
		r.Result = fmt.Sprintf("%d/%d passed (%.1f%%)", res.Passed, res.Questions, res.Score)
	}
	return r
}
