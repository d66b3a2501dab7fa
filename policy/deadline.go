package policy

import (
	"sync"
	"time"
)

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

// RunClock is a schedule read against a clock: what the daemon consults for every call. A run
// may be paused (a human run, by its operator, where the track allows it): while paused the
// clock stands still (phase, time left and call limits are what they were when the pause began),
// and when it ends the deadline and the reserve window move later by the pause's length. Its
// methods are safe to call from several goroutines.
type RunClock struct {
	now Clock

	mu       sync.Mutex
	s        Schedule
	pausedAt time.Time     // zero unless paused
	paused   time.Duration // the pauses ended so far, in all
	changed  chan struct{} // closed (and replaced) when a pause begins or ends
}

// Start anchors the budget at now() and returns the run's clock.
func (b Budget) Start(now Clock) *RunClock {
	return &RunClock{s: b.Schedule(now()), now: now, changed: make(chan struct{})}
}

// Now is the clock's reading (monotonic where the clock is time.Now).
func (c *RunClock) Now() time.Time { return c.now() }

// Schedule is the run's schedule now: its deadline and reserve window moved by the pauses ended
// so far.
func (c *RunClock) Schedule() Schedule {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// Started is when the clock started.
func (c *RunClock) Started() time.Time { return c.Schedule().Start }

// at is the schedule and the time to read it at: now, or the pause's start while paused.
func (c *RunClock) at() (Schedule, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.IsZero() {
		return c.s, c.pausedAt
	}
	return c.s, c.now()
}

// Elapsed is the time since the start, on the wall (pauses included).
func (c *RunClock) Elapsed() time.Duration { return c.now().Sub(c.Started()) }

// Phase is the phase now.
func (c *RunClock) Phase() Phase { s, t := c.at(); return s.Phase(t) }

// CallLimit is the limit of a call started now.
func (c *RunClock) CallLimit() time.Duration { s, t := c.at(); return s.CallLimitAt(t) }

// TimeLeft is the time until the deadline now (while paused, what was left when it began).
func (c *RunClock) TimeLeft() time.Duration { s, t := c.at(); return s.TimeLeft(t) }

// UntilReserve is the time until the reserve window starts (while paused, as when it began).
func (c *RunClock) UntilReserve() time.Duration { s, t := c.at(); return s.ReserveStart.Sub(t) }

// Pause stops the clock now. It reports false if it was already paused.
func (c *RunClock) Pause() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.IsZero() {
		return c.pausedAt, false
	}
	c.pausedAt = c.now()
	c.signal()
	return c.pausedAt, true
}

// Resume starts the clock again: the deadline and the reserve window move later by the pause's
// length, which it returns (zero if the clock was not paused).
func (c *RunClock) Resume() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pausedAt.IsZero() {
		return 0
	}
	d := max(0, c.now().Sub(c.pausedAt))
	c.s.Deadline, c.s.ReserveStart = c.s.Deadline.Add(d), c.s.ReserveStart.Add(d)
	c.paused += d
	c.pausedAt = time.Time{}
	c.signal()
	return d
}

func (c *RunClock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Paused reports whether the clock is paused, and since when.
func (c *RunClock) Paused() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pausedAt, !c.pausedAt.IsZero()
}

// PausedFor is the pauses' length in all: those ended, and the one under way.
func (c *RunClock) PausedFor() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.paused
	if !c.pausedAt.IsZero() {
		d += max(0, c.now().Sub(c.pausedAt))
	}
	return d
}

// Changed is closed when the clock is next paused or resumed: a timer set from the schedule is
// set again then.
func (c *RunClock) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Due returns when something set for from on the clock is due on the wall: from plus the
// pauses ended since mark (PausedFor when it was set), and false while the clock is paused (it
// is not due until the pause ends).
func (c *RunClock) Due(from time.Time, mark time.Duration) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pausedAt.IsZero() {
		return time.Time{}, false
	}
	return from.Add(c.paused - mark), true
}
