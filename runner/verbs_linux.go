package runner

// The verbs besides compute calls: time-left, status, and those the grader judges (submit,
// validate, promote, finalize).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sealrun/sealrun/policy"
)

// timeLine is the first line of every response.
func (s *Service) timeLine() string {
	ph := s.o.clock.Phase()
	return TimeLine(s.o.clock.TimeLeft(), ph == policy.PhaseReserve, ph == policy.PhaseOver)
}

func (s *Service) handleTimeLeft(w http.ResponseWriter, r *http.Request) {
	st := s.begin(w, r)
	if st == nil {
		return
	}
	left := s.o.clock.TimeLeft()
	var line string
	switch s.o.clock.Phase() {
	case policy.PhaseRunning:
		line = fmt.Sprintf("%s left; reserve window starts in %s", FormatDuration(left), FormatDuration(s.o.clock.UntilReserve()))
	case policy.PhaseReserve:
		line = fmt.Sprintf("%s left; in the reserve window: submit, promote and finalize only", FormatDuration(left))
	default:
		line = "0s left; the run is over"
	}
	st.frame(FrameStdout, []byte(line+"\n"))
	st.exit(0)
}

func (s *Service) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := s.begin(w, r)
	if st == nil {
		return
	}
	s.mu.Lock()
	running, done, over := s.running, s.done, s.over
	s.mu.Unlock()
	var b strings.Builder
	phase := s.o.clock.Phase().String()
	if over {
		phase = "over"
	}
	fmt.Fprintf(&b, "phase:       %s\n", phase)
	fmt.Fprintf(&b, "time left:   %s (deadline in %s; call limit now %s)\n", FormatDuration(s.o.clock.TimeLeft()), FormatDuration(s.o.clock.TimeLeft()), FormatDuration(s.o.clock.CallLimit()))
	if running != nil {
		fmt.Fprintf(&b, "running:     call %d: %s (for %s, limit %s)\n", running.seq, shellQuote(running.argv), FormatDuration(s.o.clock.Now().Sub(running.start)), FormatDuration(running.limit))
	} else {
		fmt.Fprintf(&b, "running:     no call\n")
	}
	fmt.Fprintf(&b, "calls done:  %d\n", done)
	if s.o.judge != nil && !over {
		if h, err := s.o.judge.History(r.Context()); err == nil {
			fmt.Fprintf(&b, "submissions:\n%s", indent(h))
		}
	}
	st.frame(FrameStdout, []byte(b.String()))
	st.exit(0)
}

func indent(s string) string {
	if s == "" {
		return "  none\n"
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}

// askJudge passes one judge verb to the Judge and returns its answer.
func (s *Service) askJudge(ctx context.Context, verb string, req ArgRequest) (out string, err error) {
	switch verb {
	case "submit":
		var dir string
		if dir, err = s.resolveDir(req.Arg, req.Cwd); err == nil {
			out, err = s.o.judge.Submit(ctx, dir)
		}
	case "promote":
		if req.Arg == "" {
			err = refusef("promote needs a candidate id (runner history lists them)")
		} else {
			out, err = s.o.judge.Promote(ctx, req.Arg)
		}
	case "finalize":
		out, err = s.o.judge.Finalize(ctx, req.Arg)
	case "history":
		out, err = s.o.judge.History(ctx)
	}
	return out, err
}

// judgeVerb serves submit, promote, finalize and history through the Judge.
func (s *Service) judgeVerb(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req ArgRequest
		if err := decode(r, &req); err != nil {
			s.badRequest(w, "%v", err)
			return
		}
		if strings.IndexByte(req.Arg, 0) >= 0 || len(req.Arg) > 4096 {
			s.badRequest(w, "the argument has a NUL byte or is over 4096 bytes")
			return
		}
		st := newStream(w)
		st.stderrf("%s", s.timeLine())
		s.mu.Lock()
		over := s.over
		s.mu.Unlock()
		if over || s.o.clock.Phase() == policy.PhaseOver {
			st.stderrf("refused: the run is over; nothing more can be submitted, promoted or finalized")
			st.exit(ExitRefused)
			return
		}
		if s.o.judge == nil {
			st.stderrf("refused: %s is not served in this run (no grader is configured)", verb)
			st.exit(ExitRefused)
			return
		}
		out, err := s.askJudge(r.Context(), verb, req)
		var ref *Refusal
		var reasoned interface{ RefusalReason() string }
		switch {
		case errors.As(err, &ref):
			st.stderrf("refused: %s", ref.Reason)
			st.exit(ExitRefused)
			return
		case errors.As(err, &reasoned):
			st.stderrf("refused: %s", reasoned.RefusalReason())
			st.exit(ExitRefused)
			return
		case err != nil:
			st.stderrf("sealrun: %s failed on the host side: %v", verb, err)
			st.exit(ExitRefused)
			return
		}
		st.frame(FrameStdout, []byte(out))
		st.exit(0)
		if s.o.answered != nil {
			s.o.answered(verb)
		}
	}
}
