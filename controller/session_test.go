package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// readRecording reads a run directory's recording back from its audit log (each segment checked
// against its entry).
func readRecording(t *testing.T, dir string) ([]byte, []audit.Terminal) {
	t.Helper()
	cast, segs, _, err := transcripttest.Recording(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cast, segs
}

func newTestRecording(t *testing.T, cap int64) (*Recording, string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	log, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	start := time.Unix(1_800_000_000, 0)
	r, err := NewRecording(dir, log, start, 100, 30, "run r1", cap)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir, start
}

// TestRecordingIsAsciicast: the recording is an asciicast v2 stream (a header, then events in
// time order) whatever the terminal wrote: a character split between reads is whole, invalid
// bytes are U+FFFD, escape sequences and markup are data; it is kept in segments, each hashed
// in the audit log as it was written.
func TestRecordingIsAsciicast(t *testing.T) {
	r, dir, start := newTestRecording(t, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	euro := []byte("€") // 3 bytes, split over two reads
	r.Input([]byte("ls\r"), at(100))
	r.Output(append([]byte("price "), euro[:2]...), at(150))
	r.Output(append(euro[2:], '\n'), at(160))
	r.Output([]byte("bad \xff\xfe bytes\n"), at(200))
	hostile := "\x1b]52;c;ZXZpbA==\x07\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\x1bP+q\x1b\\</script><img src=x onerror=alert(1)>"
	r.Output([]byte(hostile), at(300))
	r.Resize(132, 43, at(400))
	r.Marker("detach alice", at(500))
	r.Output([]byte{0xe2, 0x82}, at(600)) // an incomplete character at the end
	if err := r.Close(at(700)); err != nil {
		t.Fatal(err)
	}
	cast, recs := readRecording(t, dir)
	lines := strings.Split(strings.TrimSuffix(string(cast), "\n"), "\n")
	var h CastHeader
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.Version != 2 || h.Width != 100 || h.Height != 30 || h.Timestamp != start.Unix() {
		t.Fatalf("header %q: %+v, %v", lines[0], h, err)
	}
	var got [][3]any
	last := 0.0
	for _, l := range lines[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event line %q: %v", l, err)
		}
		if ev[0].(float64) < last {
			t.Errorf("event %q goes back in time", l)
		}
		last = ev[0].(float64)
		if !utf8.ValidString(ev[2].(string)) {
			t.Errorf("event %q is not UTF-8", l)
		}
		if strings.ContainsAny(l, "<>\x1b\x07") {
			t.Errorf("event line %q carries raw markup or control bytes", l)
		}
		got = append(got, [3]any{ev[0], ev[1], ev[2]})
	}
	want := [][3]any{{0.1, "i", "ls\r"}, {0.15, "o", "price "}, {0.16, "o", "€\n"}, {0.2, "o", "bad \uFFFD bytes\n"}, {0.3, "o", hostile},
		{0.4, "r", "132x43"}, {0.5, "m", "detach alice"}, {0.7, "o", "\uFFFD"}}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
	if len(recs) != 1 || recs[0].Events != 8 || recs[0].InputBytes != 3 || recs[0].OutputBytes != int64(6+3+1+13+len(hostile)+2) || recs[0].To != 0.7 {
		t.Errorf("entries %+v", recs)
	}
}

// TestRecordingSegmentsAndCap: a long session is kept in segments of about SegmentBytes, each
// its own audit entry; past the cap the output is counted, not kept, and the recording says so.
func TestRecordingSegmentsAndCap(t *testing.T) {
	r, dir, start := newTestRecording(t, 3<<20)
	line := bytes.Repeat([]byte("x"), 32<<10)
	for i := range 200 { // 6.4 MiB shown, 3 MiB kept
		r.Output(line, start.Add(time.Duration(i)*time.Millisecond))
	}
	r.Input([]byte("exit\r"), start.Add(time.Second))
	if err := r.Close(start.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cast, recs := readRecording(t, dir)
	if len(recs) < 10 || int64(len(cast)) > 3<<20+SegmentBytes {
		t.Errorf("%d segments, %d bytes", len(recs), len(cast))
	}
	var notRecorded, out int64
	for _, rec := range recs {
		notRecorded += rec.NotRecorded
		out += rec.OutputBytes
		if rec.Bytes > SegmentBytes+64<<10 {
			t.Errorf("segment %d is %d bytes", rec.Segment, rec.Bytes)
		}
	}
	if out+notRecorded != 200*32<<10 || notRecorded == 0 {
		t.Errorf("output %d + not recorded %d, want %d", out, notRecorded, 200*32<<10)
	}
	if !bytes.Contains(cast, []byte(`"m", "sealrun: the recording keeps its first`)) || !bytes.Contains(cast, []byte(`"i", "exit\r"`)) {
		t.Error("the recording does not say where it stopped keeping output, or lost the input after")
	}
}

// chanWriter is a shell's console in the session tests: what the person typed.
type chanWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	grew chan struct{} // a write came (typed input reaches the shell on a goroutine of its own)
}

func (w *chanWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.grew == nil {
		w.grew = make(chan struct{}, 1)
	}
	select {
	case w.grew <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

// waitFor waits until the shell has been written exactly want, each write it gets waking it.
func (w *chanWriter) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		w.mu.Lock()
		got := w.buf.String()
		if w.grew == nil {
			w.grew = make(chan struct{}, 1)
		}
		grew := w.grew
		w.mu.Unlock()
		if got == want {
			return
		}
		if !strings.HasPrefix(want, got) {
			t.Fatalf("the shell got %q, want %q", got, want)
		}
		select {
		case <-grew:
		case <-deadline:
			t.Fatalf("the shell got %q, want %q", got, want)
		}
	}
}

func (w *chanWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func next(t *testing.T, a *Attachment) string {
	t.Helper()
	select {
	case b := <-a.Output():
		return string(b)
	case <-time.After(5 * time.Second):
		t.Fatal("no output")
	}
	return ""
}

// TestSessionAttach: the first attach is noted (it starts a human run's clock); a person types,
// a proctor only watches; a second attach takes the terminal from the first, which is told; a
// new attachment is first shown the shell's last output; the session's end tells everyone.
func TestSessionAttach(t *testing.T) {
	var mu sync.Mutex
	var events []string
	s := NewSession(func(event, user, reason string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, event+" "+user)
	})
	select {
	case <-s.Attached():
		t.Fatal("attached before anyone attached")
	default:
	}
	alice, err := s.Attach("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	<-s.Attached()
	if s.FirstAttach().IsZero() {
		t.Error("no first attach time")
	}
	if err := alice.Input([]byte("ls\r")); err == nil || !strings.Contains(err.Error(), "not started yet") {
		t.Errorf("input before the shell runs: %v", err)
	}
	console := &chanWriter{}
	r, _, _ := newTestRecording(t, 0)
	var sizes []string
	s.Bind(console, func(c, r int) error { sizes = append(sizes, strconv.Itoa(c)+"x"+strconv.Itoa(r)); return nil }, r)
	s.Write([]byte("$ "))
	if got := next(t, alice); got != "$ " {
		t.Errorf("alice saw %q", got)
	}
	if len(sizes) != 1 || sizes[0] != "80x24" {
		t.Errorf("the shell was sized %v on binding, want 80x24", sizes)
	}
	if err := alice.Input([]byte("echo hi\r")); err != nil {
		t.Errorf("typed: %v", err)
	}
	console.waitFor(t, "echo hi\r")
	proctor, err := s.Attach("proctor", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, proctor); got != "$ " {
		t.Errorf("the proctor was first shown %q, want the last output", got)
	}
	if err := proctor.Input([]byte("rm -rf /\r")); err == nil {
		t.Errorf("a proctor typed: %v", err)
	}
	alice.Input([]byte("\r")) // what reaches the shell after: nothing of the proctor's before it
	console.waitFor(t, "echo hi\r\r")
	// The person's hostile output: their own terminal gets it as written; a proctor's gets no
	// clipboard, title, query, DCS or window operation; a later attach's history has no query.
	hostile := "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[6n\x1bP$qm\x1b\\\x1b[8;1;1t\x1b[1mhi\x1b[0m"
	s.Write([]byte(hostile))
	if got := next(t, alice); got != hostile {
		t.Errorf("the person's own terminal got %q, want what the shell wrote", got)
	}
	if got := next(t, proctor); got != "\x1b[1mhi\x1b[0m" {
		t.Errorf("the proctor's terminal got %q", got)
	}
	bob, err := s.Attach("bob", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, bob); strings.Contains(got, "\x1b[6n") || strings.Contains(got, "\x1bP$q") || !strings.Contains(got, "\x1b]0;pwned\x07") {
		t.Errorf("a later attach was shown %q: queries kept, or the person's title lost", got)
	}
	<-alice.Done()
	if !strings.Contains(alice.Reason(), "another attach took the terminal (bob)") {
		t.Errorf("alice's end: %q", alice.Reason())
	}
	if err := alice.Input([]byte("x")); err == nil {
		t.Error("a detached person typed")
	}
	s.End("the run ended: finalize")
	for _, a := range []*Attachment{bob, proctor} {
		<-a.Done()
		if a.Reason() != "the run ended: finalize" {
			t.Errorf("%s's end: %q", a.User, a.Reason())
		}
	}
	if _, err := s.Attach("carol", false); err == nil || !strings.Contains(err.Error(), "the run ended") {
		t.Errorf("attach after the end: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(events, ","); got != "attach alice,watch proctor,detach alice,attach bob,detach bob,unwatch proctor" {
		t.Errorf("events %s", got)
	}
}

// TestSessionBounds: a flood of input, a storm of resizes, too many proctors and an attachment
// that reads nothing each meet a clear refusal, and the session (the run) goes on.
func TestSessionBounds(t *testing.T) {
	s := NewSession(nil)
	console := &chanWriter{}
	r, _, _ := newTestRecording(t, 0)
	var mu sync.Mutex
	var resizes [][2]int
	s.Bind(console, func(c, rw int) error { mu.Lock(); resizes = append(resizes, [2]int{c, rw}); mu.Unlock(); return nil }, r)

	flood, _ := s.Attach("flood", false)
	err := flood.Input(bytes.Repeat([]byte("y"), MaxInputBurst+1))
	if err == nil || !strings.Contains(err.Error(), "input over") || !strings.Contains(flood.Reason(), "input over") {
		t.Errorf("a flood: %v, %q", err, flood.Reason())
	}

	p, _ := s.Attach("p", false)
	p.Input([]byte("ok\r")) // the first the shell gets: nothing of the refused flood came before
	console.waitFor(t, "ok\r")
	for i := 1; i <= 1000; i++ {
		if err := p.Resize(10+i%100, 5+i%50); err != nil {
			t.Fatal(err)
		}
	}
	p.Resize(120, 40)
	if err := p.Resize(0, 40); err == nil {
		t.Error("a 0-column window was taken")
	}
	if err := p.Resize(5000, 40); err == nil {
		t.Error("a 5000-column window was taken")
	}
	// The storm's last size is applied once its interval is up: wait for it, not for a time.
	var n int
	var lastSize [2]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(ResizeInterval / 4) {
		mu.Lock()
		if n = len(resizes); n > 0 {
			lastSize = resizes[n-1]
		}
		mu.Unlock()
		if lastSize == [2]int{120, 40} || time.Now().After(deadline) {
			break
		}
	}
	if n > 5 || lastSize != [2]int{120, 40} {
		t.Errorf("a storm of 1000 resizes made %d, the last %v; want a few, the last 120x40", n, lastSize)
	}

	var watchers []*Attachment
	for range MaxWatchers {
		w, err := s.Attach("w", true)
		if err != nil {
			t.Fatal(err)
		}
		watchers = append(watchers, w)
	}
	if _, err := s.Attach("one too many", true); err != ErrTooManyWatchers {
		t.Errorf("watcher %d: %v", MaxWatchers+1, err)
	}
	// The watchers read nothing: each is ended once it falls behind, and the shell never waits.
	done := make(chan struct{})
	go func() {
		for range attachmentQueue + 10 {
			s.Write([]byte("output\n"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the shell's output waited for an attachment that reads nothing")
	}
	for _, w := range watchers {
		<-w.Done()
		if !strings.Contains(w.Reason(), "fell behind") {
			t.Errorf("a stuck watcher's end: %q", w.Reason())
		}
	}
	if err := p.Input([]byte("still here\r")); err == nil {
		t.Error("the person reading nothing was kept") // they fell behind too
	}
	if _, err := s.Attach("back", false); err != nil {
		t.Errorf("attaching again after all that: %v", err)
	}
}

// TestSessionInputBeforeBind: the shell's prompt can reach a person before its console is
// bound (the runtime hands the terminal over, and its output flows, before the container's
// start returns). What they type at it then reaches the shell at the bind, in order, and is
// recorded with what the shell showed; nothing typed before any output is taken.
func TestSessionInputBeforeBind(t *testing.T) {
	s := NewSession(nil)
	alice, err := s.Attach("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Input([]byte("early\r")); err == nil || !strings.Contains(err.Error(), "not started yet") {
		t.Errorf("input before the shell showed anything: %v", err)
	}
	s.Write([]byte("[sealrun] ~ $ "))
	if got := next(t, alice); got != "[sealrun] ~ $ " {
		t.Errorf("alice saw %q", got)
	}
	for _, p := range []string{"echo before-", "bind\r"} {
		if err := alice.Input([]byte(p)); err != nil {
			t.Fatalf("input at the prompt before the bind: %v", err)
		}
	}
	if err := alice.Input(bytes.Repeat([]byte("y"), MaxInputBurst)); err == nil {
		t.Error("a burst held for the bind past MaxInputBurst was taken")
	}
	alice, _ = s.Attach("alice", false) // the burst ended the first
	console := &chanWriter{}
	r, dir, start := newTestRecording(t, 0)
	s.now = func() time.Time { return start.Add(time.Second) }
	s.Bind(console, func(int, int) error { return nil }, r)
	console.waitFor(t, "echo before-bind\r")
	alice.Input([]byte("after\r"))
	console.waitFor(t, "echo before-bind\rafter\r")
	if err := r.Close(start.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cast, _ := readRecording(t, dir)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(cast)), "\n")[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event line %q: %v", l, err)
		}
		got = append(got, ev[1].(string)+" "+ev[2].(string))
	}
	if want := []string{"r 80x24", "o [sealrun] ~ $ ", "i echo before-bind\r", "i after\r"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the recording's events %q; want %q", got, want)
	}
}

// The input allowance is the run's: a person who has typed a burst cannot type another by
// attaching again (each attach used to start with a full one).
func TestSessionInputAllowanceOutlivesAnAttach(t *testing.T) {
	s := NewSession(nil)
	clock := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return clock }
	s.filled = clock
	s.Bind(&chanWriter{}, func(int, int) error { return nil }, nil)
	s.Write([]byte("$ "))
	paste := bytes.Repeat([]byte("y"), MaxInputBurst*3/4)
	a, err := s.Attach("p", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Input(paste); err != nil {
		t.Fatalf("a paste within the burst: %v", err)
	}
	a.Detach("detached")
	b, err := s.Attach("p", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Input(paste); err == nil || !strings.Contains(err.Error(), "input over") {
		t.Fatalf("a second burst after attaching again: %v", err)
	}
	clock = clock.Add(time.Second) // the allowance refills with time, not with attaches
	c, err := s.Attach("p", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Input(paste[:MaxInputRate/2]); err != nil {
		t.Fatalf("typing a second later: %v", err)
	}
}

// What is typed is kept up to the input cap (even past the recording's own cap), then counted
// and not kept, the recording saying so once.
func TestRecordingInputCap(t *testing.T) {
	r, dir, start := newTestRecording(t, 0)
	r.inCap = 1 << 10
	key := bytes.Repeat([]byte("k"), 100)
	for i := range 30 { // 3,000 bytes typed, 1,000 (ten keys) kept
		r.Input(key, start.Add(time.Duration(i)*time.Millisecond))
	}
	r.Output([]byte("$ "), start.Add(time.Second))
	if err := r.Close(start.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cast, recs := readRecording(t, dir)
	var in, notIn int64
	for _, rec := range recs {
		in += rec.InputBytes
		notIn += rec.NotRecordedInput
	}
	if in != 1100 || in+notIn != 3000 {
		t.Errorf("input kept %d, not kept %d; want 1,100 of 3,000 (the key that crossed the cap is kept)", in, notIn)
	}
	if n := bytes.Count(cast, []byte(`"m", "sealrun: the recording keeps the first 1024 bytes typed`)); n != 1 {
		t.Errorf("the input cap's marker is in the recording %d times", n)
	}
	if !bytes.Contains(cast, []byte(`"o", "$ "`)) {
		t.Error("output after the input cap was not kept")
	}
}

// blockedShell is a shell that reads nothing typed until released.
type blockedShell struct {
	release chan struct{}
	chanWriter
}

func (b *blockedShell) Write(p []byte) (int, error) {
	<-b.release
	return b.chanWriter.Write(p)
}

// A shell that stops reading what is typed holds up nothing but the typing: its output still
// reaches everyone, others still attach, and once the queue of typed writes is full the person
// is told so; what was queued reaches the shell in order once it reads again.
func TestSessionShellNotReading(t *testing.T) {
	s := NewSession(nil)
	shell := &blockedShell{release: make(chan struct{})}
	s.Bind(shell, func(int, int) error { return nil }, nil)
	s.Write([]byte("$ "))
	a, err := s.Attach("p", false)
	if err != nil {
		t.Fatal(err)
	}
	next(t, a)
	var want strings.Builder
	var refused error
	for i := 0; i < typedQueue+10 && refused == nil; i++ {
		k := fmt.Sprintf("%d ", i)
		if refused = a.Input([]byte(k)); refused == nil {
			want.WriteString(k)
		}
	}
	if refused == nil || !strings.Contains(refused.Error(), "the shell is not reading what is typed") {
		t.Fatalf("typing into a shell that reads nothing: %v", refused)
	}
	done := make(chan struct{})
	go func() { // the shell's output and a proctor's attach go on while the shell's input waits
		defer close(done)
		s.Write([]byte("still here"))
		w, err := s.Attach("proctor", true)
		if err != nil {
			t.Error(err)
			return
		}
		w.Detach("detached")
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the session's output or an attach waited on a shell that reads nothing typed")
	}
	if got := next(t, a); got != "still here" {
		t.Errorf("the person saw %q", got)
	}
	close(shell.release)
	shell.waitFor(t, want.String())
	s.End("the run ended")
	if err := a.Input([]byte("x")); err == nil {
		t.Error("typed after the end")
	}
}

// TestSessionAnswersNotTyped: the person's terminal answers the shell's queries (busybox asks
// where the cursor is at each prompt; a program asks the colours, the device, a setting); the
// answers reach the shell, but the recording's input is what the person typed, nothing else. A
// key that looks like an answer, with no query waiting, is typed.
func TestSessionAnswersNotTyped(t *testing.T) {
	s := NewSession(nil)
	bob, err := s.Attach("bob", false)
	if err != nil {
		t.Fatal(err)
	}
	console := &chanWriter{}
	r, dir, _ := newTestRecording(t, 0)
	s.Bind(console, func(int, int) error { return nil }, r)
	var shell strings.Builder
	for _, c := range []struct{ query, answer, typed string }{
		{"$ \x1b[6n", "\x1b[12;3R", "ls\r"},                                  // busybox's prompt
		{"\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000\x1b\\", "x"},           // the background colour
		{"\x1b[c", "\x1b[?62;22c", "\x1b[A"},                                 // the device, then an arrow key
		{"\x1bP$qm\x1b\\", "\x1bP1$r0m\x1b\\", "y\r"},                        // a setting (DECRQSS)
		{"\x1b[?2026$p\x1b[18t", "\x1b[?2026;2$y\x1b[8;24;80t", "\x1b[1;5R"}, // two at once; then modified F3: no query left
	} {
		s.Write([]byte(c.query))
		if got := next(t, bob); got != c.query {
			t.Fatalf("the person's terminal was sent %q, want the query %q whole", got, c.query)
		}
		if err := bob.Input([]byte(c.answer + c.typed)); err != nil {
			t.Fatal(err)
		}
		shell.WriteString(c.answer + c.typed)
		console.waitFor(t, shell.String())
	}
	r.Close(time.Unix(1_800_000_100, 0))
	cast, _ := readRecording(t, dir)
	var typed strings.Builder
	for _, l := range strings.Split(string(cast), "\n")[1:] {
		var ev []any
		if json.Unmarshal([]byte(l), &ev) == nil && len(ev) == 3 && ev[1] == "i" {
			typed.WriteString(ev[2].(string))
		}
	}
	if want := "ls\rx\x1b[Ay\r\x1b[1;5R"; typed.String() != want {
		t.Errorf("recorded as typed %q, want %q", typed.String(), want)
	}
}

// TestSplitAnswers: answers are taken only while queries wait, one each, and only whole.
func TestSplitAnswers(t *testing.T) {
	for _, c := range []struct {
		in      string
		pending int
		typed   string
		left    int
	}{
		{"\x1b[5;1R", 0, "\x1b[5;1R", 0},                                         // nothing asked: typed
		{"\x1b[5;1R\x1b[5;1R", 1, "\x1b[5;1R", 0},                                // one asked: one answer
		{"a\x1b[5;1Rb", 2, "ab", 1},                                              // within typing
		{"\x1b[5;1", 1, "\x1b[5;1", 1},                                           // cut: typed
		{"\x1b]11;rgb:0/0/0", 1, "\x1b]11;rgb:0/0/0", 1},                         // an OSC not ended
		{"\x1b[2~\x1b[15;2~\x1b[<0;3;4M", 3, "\x1b[2~\x1b[15;2~\x1b[<0;3;4M", 3}, // keys and the mouse
		{"\x1b[?1u\x1b[>1;2m\x1b[?1;0;256S\x1b[0n", 4, "", 0},
		{"\x1b[c", 1, "\x1b[c", 1}, // a query typed is not an answer
	} {
		p := c.pending
		typed, _ := splitAnswers([]byte(c.in), &p)
		if string(typed) != c.typed || p != c.left {
			t.Errorf("%q with %d waiting: typed %q, %d left; want %q, %d", c.in, c.pending, typed, p, c.typed, c.left)
		}
	}
}

// FuzzSplitAnswers: whatever comes, what is typed is the input less some whole sequences, in
// order, and no more answers are taken than were waiting.
func FuzzSplitAnswers(f *testing.F) {
	f.Add([]byte("\x1b[12;3Rls\r\x1b]11;rgb:0/0/0\x07"), uint8(2))
	f.Add([]byte("\x1b\x1b[\x1b]\x1bP\x1b\\"), uint8(5))
	f.Fuzz(func(t *testing.T, in []byte, pending uint8) {
		p := int(pending % 8)
		typed, answered := splitAnswers(in, &p)
		if len(typed)+answered != len(in) || p < 0 || int(pending%8)-p > answered {
			t.Fatalf("%q: typed %d + answered %d of %d, %d left", in, len(typed), answered, len(in), p)
		}
		// typed is a subsequence of in
		j := 0
		for i := 0; i < len(in) && j < len(typed); i++ {
			if in[i] == typed[j] {
				j++
			}
		}
		if j != len(typed) {
			t.Fatalf("%q: typed %q is not what remains of it", in, typed)
		}
	})
}
