package controller

// A human run's terminal session: the one shell of the run's controller (its terminal's master,
// held by sealrund), the person attached to it, the proctors watching, and the recording. The
// shell lives as long as the run: a person who detaches, or whose connection drops, leaves it
// and its processes running, and attaching again returns to it.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sealrun/sealrun/audit"
)

// What a human run's shell is.
const (
	HumanShell   = "/bin/sh"
	TerminalType = "xterm-256color"
)

// Session limits: an attachment that breaks one is ended with the reason, and the run goes on.
const (
	MaxWatchers     = 8                     // proctors watching one run at once
	MaxInputRate    = 64 << 10              // bytes a second a person may type (a paste included) ...
	MaxInputBurst   = 256 << 10             // ... with this much at once
	ResizeInterval  = 50 * time.Millisecond // resizes closer than this are coalesced
	attachmentQueue = 1024                  // output chunks an attachment may fall behind by
	historyBytes    = 64 << 10              // the output a new attachment is shown first
	typedQueue      = 256                   // writes typed and not yet read by the shell
)

// ErrTooManyWatchers refuses a watcher past MaxWatchers.
var ErrTooManyWatchers = fmt.Errorf("%d proctors already watch this run; one must leave first", MaxWatchers)

// Session is a human run's terminal.
type Session struct {
	now    func() time.Time
	notify func(event, user, reason string) // an attach or a detach, for the audit log

	mu      sync.Mutex
	console io.Writer
	resize  func(cols, rows int) error
	rec     *Recording
	history []byte
	// early: what a person typed once the shell had shown its prompt but before Bind (the
	// runtime hands the terminal over, and its output flows, before the container's start
	// returns): written to the shell, and recorded, at Bind.
	early    []byte
	person   *Attachment
	watchers map[*Attachment]bool
	attached chan struct{} // closed at the first attach of a person
	first    time.Time
	ended    string // why the session ended ("" while it lasts)
	cols     int
	rows     int
	// resizing: a coalesced resize is pending (applied at lastResize + ResizeInterval).
	resizing   bool
	lastResize time.Time
	// tokens: the input allowance (MaxInputRate, MaxInputBurst), the run's, not an
	// attachment's: attaching again does not fill it.
	tokens float64
	filled time.Time
	// typed: what was typed, on its way to the console, written by Bind's goroutine outside
	// the lock (a shell that does not read its input must not hold up its output, nor anyone
	// else's attach); closed when the session ends.
	typed chan []byte
	// queries reads the shell's output for the queries in it; pending counts those the person's
	// terminal was sent and has not answered yet (at most maxPending, forgotten after
	// answerWithin): their answers are passed to the shell but not recorded as typed.
	queries      *termFilter
	scratch      []byte
	pending      int
	pendingSince time.Time
}

// A terminal answers a query at once: queries not answered within answerWithin are forgotten, so
// that a key that looks like an answer (xterm's modified F3 is CSI 1 ; 5 R) is recorded as typed.
const (
	maxPending   = 64
	answerWithin = 5 * time.Second
)

// NewSession makes a run's session before its shell exists: people may attach at once (the
// first attach is what starts a human run's clock). notify is told of each attach and detach
// (event one of audit.AttachStart, AttachEnd, AttachWatch, AttachUnwatch).
func NewSession(notify func(event, user, reason string)) *Session {
	if notify == nil {
		notify = func(string, string, string) {}
	}
	return &Session{now: time.Now, notify: notify, watchers: map[*Attachment]bool{}, attached: make(chan struct{}), cols: 80, rows: 24, tokens: MaxInputBurst, filled: time.Now()}
}

// Attached is closed when a person first attaches; FirstAttach is then when.
func (s *Session) Attached() <-chan struct{} { return s.attached }

// FirstAttach is when a person first attached (zero if none has).
func (s *Session) FirstAttach() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// Size is the terminal's size: the last a person asked for, 80x24 before.
func (s *Session) Size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cols, s.rows
}

// Bind connects the session to the shell once it runs: console is what input is written to,
// resize sets its size, rec records it.
func (s *Session) Bind(console io.Writer, resize func(cols, rows int) error, rec *Recording) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.console, s.resize, s.rec = console, resize, rec
	s.applyResize() // the size asked for while the shell started
	now := s.now()
	if rec != nil && len(s.history) > 0 {
		rec.Output(s.history, now) // what it showed before (its banner, its prompt)
	}
	if s.ended != "" {
		return // nothing is typed into an ended session
	}
	s.typed = make(chan []byte, typedQueue)
	go func(typed <-chan []byte) {
		for p := range typed {
			console.Write(p) // an error: the shell has gone, and the run ends for it
		}
	}(s.typed)
	if len(s.early) > 0 {
		if typed, _ := splitAnswers(s.early, &s.pending); rec != nil && len(typed) > 0 {
			rec.Input(typed, now)
		}
		s.typed <- s.early
		s.early = nil
	}
}

// Write is the shell's output: recorded, kept for the next attachment and sent to everyone
// attached. It never blocks on an attachment: one that falls behind is ended.
func (s *Session) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec != nil {
		s.rec.Output(p, s.now())
	}
	if s.queries == nil {
		s.queries = newTermFilter(false)
	}
	s.scratch = s.queries.Write(s.scratch[:0], p)
	if s.scratch = s.scratch[:0]; cap(s.scratch) > 64<<10 {
		s.scratch = nil
	}
	if q := s.queries.queries; q > 0 {
		s.queries.queries = 0
		if s.person != nil { // asked of the person's terminal, which answers
			s.pending = min(maxPending, s.pending+q)
			s.pendingSince = s.now()
		}
	}
	s.history = append(s.history, p...)
	if n := len(s.history) - historyBytes; n > 0 {
		s.history = append(s.history[:0], s.history[n:]...)
	}
	chunk := append([]byte(nil), p...)
	for _, a := range s.attachments() {
		out := chunk
		if a.filter != nil { // a proctor's: no string sequence, query or window operation
			if out = a.filter.Write(nil, chunk); len(out) == 0 {
				continue
			}
		}
		select {
		case a.out <- out:
		default:
			s.endLocked(a, "your terminal fell behind the shell's output (a slow connection); attach again")
		}
	}
	return len(p), nil
}

func (s *Session) attachments() []*Attachment {
	out := make([]*Attachment, 0, len(s.watchers)+1)
	if s.person != nil {
		out = append(out, s.person)
	}
	for a := range s.watchers {
		out = append(out, a)
	}
	return out
}

// Attach attaches user: a person (watch false) takes the terminal, and one attached before is
// detached; a proctor (watch true) watches it read-only. The attachment is first shown the
// shell's last output.
func (s *Session) Attach(user string, watch bool) (*Attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != "" {
		return nil, errors.New(s.ended)
	}
	if watch && len(s.watchers) >= MaxWatchers {
		return nil, ErrTooManyWatchers
	}
	a := &Attachment{s: s, User: user, Watch: watch, out: make(chan []byte, attachmentQueue), done: make(chan struct{})}
	// The shell's last output, without the queries in it (busybox's shell asks where the cursor
	// is at each prompt), which a terminal would answer again, as typed; a proctor's filtered
	// as everything it is sent (termFilter).
	if watch {
		a.filter = newTermFilter(true)
	}
	if len(s.history) > 0 {
		if a.filter != nil {
			if h := a.filter.Write(nil, s.history); len(h) > 0 {
				a.out <- h
			}
		} else {
			a.out <- filterQueries(s.history)
		}
	}
	event := audit.AttachStart
	if watch {
		event = audit.AttachWatch
		s.watchers[a] = true
	} else {
		if s.person != nil {
			s.endLocked(s.person, "another attach took the terminal ("+user+")")
		}
		s.person = a
		if s.first.IsZero() {
			s.first = s.now()
			close(s.attached)
		}
	}
	if s.rec != nil {
		s.rec.Marker(event+" "+user, s.now())
	}
	s.notify(event, user, "")
	return a, nil
}

// endLocked ends an attachment with its reason.
func (s *Session) endLocked(a *Attachment, reason string) {
	if a.reason != "" {
		return
	}
	a.reason = reason
	close(a.done)
	event := audit.AttachEnd
	if a.Watch {
		event = audit.AttachUnwatch
		delete(s.watchers, a)
	} else if s.person == a {
		s.person = nil
	}
	if s.rec != nil {
		s.rec.Marker(event+" "+a.User, s.now())
	}
	s.notify(event, a.User, reason)
}

// End ends the session (the run ended): everyone attached is told why, and no one may attach.
func (s *Session) End(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended != "" {
		return
	}
	s.ended = reason
	for _, a := range s.attachments() {
		s.endLocked(a, reason)
	}
	if s.typed != nil {
		close(s.typed)
	}
}

// Attachment is one person or proctor attached to a session.
type Attachment struct {
	s      *Session
	User   string
	Watch  bool
	out    chan []byte
	done   chan struct{}
	reason string // why it ended; set under s.mu before done is closed

	filter *termFilter // a proctor's: what reaches their terminal (termFilter)
}

// Output is the shell's output for this attachment, in order.
func (a *Attachment) Output() <-chan []byte { return a.out }

// Done is closed when the attachment has ended; Reason says why.
func (a *Attachment) Done() <-chan struct{} { return a.done }

// Reason is why the attachment ended ("" while it lasts).
func (a *Attachment) Reason() string {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.reason
}

// Detach ends the attachment; the shell goes on.
func (a *Attachment) Detach(reason string) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	a.s.endLocked(a, reason)
}

// Input types p into the shell. A proctor cannot type; a person typing faster than
// MaxInputRate is detached, their input refused (the shell gets none of it).
func (a *Attachment) Input(p []byte) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.reason != "":
		return errors.New(a.reason)
	case a.Watch:
		return errors.New("a proctor watches read-only: nothing typed reaches the shell")
	}
	now := s.now()
	s.tokens = min(MaxInputBurst, s.tokens+max(0, now.Sub(s.filled).Seconds())*MaxInputRate)
	s.filled = now
	if float64(len(p)) > s.tokens {
		reason := fmt.Sprintf("input over %d KiB a second (%d KiB at once): a terminal is typed into; put files in the workspace instead", MaxInputRate>>10, MaxInputBurst>>10)
		s.endLocked(a, reason)
		return errors.New(reason)
	}
	s.tokens -= float64(len(p))
	if s.console == nil {
		// The shell's output can come before its console is bound: what is typed at what it
		// showed waits for the bind (at most a burst of it).
		if len(s.history) == 0 || len(s.early)+len(p) > MaxInputBurst {
			return errors.New("the shell has not started yet; type once it shows its prompt")
		}
		s.early = append(s.early, p...)
		return nil
	}
	if s.ended != "" {
		return errors.New(s.ended)
	}
	q := append([]byte(nil), p...)
	select {
	case s.typed <- q:
	default:
		s.tokens += float64(len(p)) // not typed: not counted
		return fmt.Errorf("the shell is not reading what is typed (%d writes wait for it); wait for it, then type again", len(s.typed))
	}
	if s.rec != nil {
		if s.pending > 0 && now.Sub(s.pendingSince) > answerWithin {
			s.pending = 0
		}
		if typed, _ := splitAnswers(p, &s.pending); len(typed) > 0 {
			s.rec.Input(typed, now)
		}
	}
	return nil
}

// Resize sets the terminal's size (a person's only). Resizes closer than ResizeInterval are
// coalesced: the last is applied, the ones between are not.
func (a *Attachment) Resize(cols, rows int) error {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.reason != "":
		return errors.New(a.reason)
	case a.Watch:
		return nil // a proctor's window is theirs
	case cols < 1 || rows < 1 || cols > 4096 || rows > 4096:
		return fmt.Errorf("window size %dx%d: columns and rows are 1 to 4096", cols, rows)
	}
	s.cols, s.rows = cols, rows
	if s.resizing {
		return nil
	}
	wait := ResizeInterval - s.now().Sub(s.lastResize)
	if wait <= 0 {
		s.applyResize()
		return nil
	}
	s.resizing = true
	time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.resizing = false
		s.applyResize()
	})
	return nil
}

func (s *Session) applyResize() {
	s.lastResize = s.now()
	if s.resize == nil || s.ended != "" {
		return
	}
	if err := s.resize(s.cols, s.rows); err == nil && s.rec != nil {
		s.rec.Resize(s.cols, s.rows, s.now())
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
