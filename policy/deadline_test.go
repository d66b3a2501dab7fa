package policy

import (
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	b := Budget{Wall: time.Hour, CallLimit: 20 * time.Minute, Reserve: 5 * time.Minute, Grading: 30 * time.Minute}
	s := b.Schedule(start)
	reserve := start.Add(55 * time.Minute)
	deadline := start.Add(time.Hour)
	if !s.Deadline.Equal(deadline) || !s.ReserveStart.Equal(reserve) {
		t.Fatalf("schedule = %+v", s)
	}
	tests := []struct {
		name     string
		at       time.Time
		phase    Phase
		limit    time.Duration
		timeLeft time.Duration
	}{
		{"before start", start.Add(-time.Minute), PhaseRunning, 20 * time.Minute, 61 * time.Minute},
		{"at start", start, PhaseRunning, 20 * time.Minute, time.Hour},
		{"limit starts shrinking", reserve.Add(-20 * time.Minute), PhaseRunning, 20 * time.Minute, 25 * time.Minute},
		{"limit shrunk", reserve.Add(-10 * time.Minute), PhaseRunning, 10 * time.Minute, 15 * time.Minute},
		{"1ns before reserve", reserve.Add(-time.Nanosecond), PhaseRunning, time.Nanosecond, 5*time.Minute + time.Nanosecond},
		{"at reserve start", reserve, PhaseReserve, 0, 5 * time.Minute},
		{"in reserve", reserve.Add(time.Minute), PhaseReserve, 0, 4 * time.Minute},
		{"1ns before deadline", deadline.Add(-time.Nanosecond), PhaseReserve, 0, time.Nanosecond},
		{"at deadline", deadline, PhaseOver, 0, 0},
		{"after deadline", deadline.Add(time.Hour), PhaseOver, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Phase(tc.at); got != tc.phase {
				t.Errorf("Phase = %v, want %v", got, tc.phase)
			}
			if got := s.CallLimitAt(tc.at); got != tc.limit {
				t.Errorf("CallLimitAt = %v, want %v", got, tc.limit)
			}
			if got := s.TimeLeft(tc.at); got != tc.timeLeft {
				t.Errorf("TimeLeft = %v, want %v", got, tc.timeLeft)
			}
		})
	}
}

func TestRunClockUsesInjectedClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	c := Budget{Wall: 10 * time.Minute, CallLimit: 3 * time.Minute, Reserve: 2 * time.Minute}.Start(clock)
	if c.Phase() != PhaseRunning || c.CallLimit() != 3*time.Minute || c.TimeLeft() != 10*time.Minute {
		t.Fatalf("at start: %v %v %v", c.Phase(), c.CallLimit(), c.TimeLeft())
	}
	now = now.Add(7 * time.Minute)
	if c.Phase() != PhaseRunning || c.CallLimit() != time.Minute || c.TimeLeft() != 3*time.Minute {
		t.Errorf("at 7m: %v %v %v", c.Phase(), c.CallLimit(), c.TimeLeft())
	}
	now = now.Add(time.Minute)
	if c.Phase() != PhaseReserve || c.CallLimit() != 0 {
		t.Errorf("at 8m: %v %v", c.Phase(), c.CallLimit())
	}
	now = now.Add(2 * time.Minute)
	if c.Phase() != PhaseOver || c.TimeLeft() != 0 {
		t.Errorf("at 10m: %v %v", c.Phase(), c.TimeLeft())
	}
	if PhaseReserve.String() != "reserve" || Phase(9).String() != "unknown" {
		t.Error("Phase.String")
	}
}

// A pause stops the clock where it is, and its end moves the deadline and the reserve window by
// its length; something due on the clock is not due while paused, and due later by the pause.
func TestRunClockPause(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	c := Budget{Wall: 10 * time.Minute, CallLimit: 3 * time.Minute, Reserve: 2 * time.Minute}.Start(func() time.Time { return now })
	now = now.Add(4 * time.Minute)
	mark := c.PausedFor()
	changed := c.Changed()
	if at, ok := c.Pause(); !ok || !at.Equal(now) {
		t.Fatalf("Pause = %v %v", at, ok)
	}
	select {
	case <-changed:
	default:
		t.Error("a pause did not signal Changed")
	}
	if _, ok := c.Pause(); ok {
		t.Error("a second Pause while paused was granted")
	}
	now = now.Add(30 * time.Minute) // long past the deadline, on the wall
	if c.Phase() != PhaseRunning || c.TimeLeft() != 6*time.Minute || c.CallLimit() != 3*time.Minute || c.UntilReserve() != 4*time.Minute {
		t.Errorf("paused: %v %v %v %v", c.Phase(), c.TimeLeft(), c.CallLimit(), c.UntilReserve())
	}
	if _, due := c.Due(start.Add(5*time.Minute), mark); due {
		t.Error("something was due while the clock was paused")
	}
	if c.PausedFor() != 30*time.Minute {
		t.Errorf("PausedFor = %v", c.PausedFor())
	}
	if d := c.Resume(); d != 30*time.Minute {
		t.Errorf("Resume = %v", d)
	}
	if c.Resume() != 0 {
		t.Error("Resume while running moved the clock")
	}
	s := c.Schedule()
	if !s.Deadline.Equal(start.Add(40*time.Minute)) || !s.ReserveStart.Equal(start.Add(38*time.Minute)) || !s.Start.Equal(start) {
		t.Errorf("after the pause: %+v", s)
	}
	if c.TimeLeft() != 6*time.Minute || c.Phase() != PhaseRunning {
		t.Errorf("resumed: %v %v", c.TimeLeft(), c.Phase())
	}
	if due, ok := c.Due(start.Add(5*time.Minute), mark); !ok || !due.Equal(start.Add(35*time.Minute)) {
		t.Errorf("Due = %v %v", due, ok)
	}
}
