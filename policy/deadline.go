package policy

import "time"

// Phase is where a run stands in its budget.
type Phase int

// The phases of a run, in order.
const (
	// PhaseRunning: compute calls are accepted.
	PhaseRunning Phase = iota
	// PhaseReserve: the last Reserve of the budget. New compute is refused; submit, promote and
	// finalize still work.
	PhaseReserve
	// PhaseOver: the deadline has passed; the controller is frozen and the promoted candidate graded.
	PhaseOver
)

func (p Phase) String() string {
	switch p {
	case PhaseRunning:
		return "running"
	case PhaseReserve:
		return "reserve"
	case PhaseOver:
		return "over"
	}
	return "unknown"
}

// Schedule is a budget anchored at a start time. All methods take the current time explicitly;
// callers pass the reading of an injected clock (see Clock), never a time they computed.
// Times taken from time.Now carry a monotonic reading, so wall-clock steps do not move a run.
type Schedule struct {
	Start        time.Time
	Deadline     time.Time // Start + Wall
	ReserveStart time.Time // Deadline - Reserve
	CallLimit    time.Duration
}

// Schedule anchors the budget at start.
func (b Budget) Schedule(start time.Time) Schedule {
	deadline := start.Add(b.Wall)
	return Schedule{Start: start, Deadline: deadline, ReserveStart: deadline.Add(-b.Reserve), CallLimit: b.CallLimit}
}

// Phase reports the phase at t: running before the reserve start, reserve from the reserve start
// (inclusive) to the deadline (exclusive), over from the deadline on.
func (s Schedule) Phase(t time.Time) Phase {
	switch {
	case t.Before(s.ReserveStart):
		return PhaseRunning
	case t.Before(s.Deadline):
		return PhaseReserve
	}
	return PhaseOver
}

// CallLimitAt is how long a compute call started at t may run: min(call limit, reserve start - t),
// never negative. Zero means no new call may start.
func (s Schedule) CallLimitAt(t time.Time) time.Duration {
	left := s.ReserveStart.Sub(t)
	if left <= 0 {
		return 0
	}
	return min(s.CallLimit, left)
}

// TimeLeft is the time until the deadline at t, never negative.
func (s Schedule) TimeLeft(t time.Time) time.Duration {
	return max(0, s.Deadline.Sub(t))
}

// Clock is an injected source of time: time.Now in production, a fake in tests.
type Clock func() time.Time

// RunClock is a schedule read against a clock: what the daemon consults for every call.
type RunClock struct {
	Schedule
	now Clock
}

// Start anchors the budget at now() and returns the run's clock.
func (b Budget) Start(now Clock) *RunClock {
	return &RunClock{Schedule: b.Schedule(now()), now: now}
}

// Now is the clock's reading (monotonic where the clock is time.Now).
func (c *RunClock) Now() time.Time { return c.now() }

// Elapsed is the time since the start.
func (c *RunClock) Elapsed() time.Duration { return c.now().Sub(c.Start) }

// Phase is the phase now.
func (c *RunClock) Phase() Phase { return c.Schedule.Phase(c.now()) }

// CallLimit is the limit of a call started now.
func (c *RunClock) CallLimit() time.Duration { return c.CallLimitAt(c.now()) }

// TimeLeft is the time until the deadline now.
func (c *RunClock) TimeLeft() time.Duration { return c.Schedule.TimeLeft(c.now()) }
