package transcript_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// TestHumanRunTranscript: a human run's recording segments and attaches are events of its
// transcript, each segment's body checked like any (intact, altered, missing, withheld), the
// transcript valid against the schema, hostile terminal bytes data in the page.
func TestHumanRunTranscript(t *testing.T) {
	r := newRun(t)
	r.Record(audit.KindAttach, audit.Attach{Time: start.Add(time.Second), Offset: "0s", Event: "attach", User: "alice (uid 1000, pid 7)"})
	rec, err := controller.NewRecording(r.Dir, r.Log(), start, 80, 24, "r-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Input([]byte("ls\r"), start.Add(2*time.Second))
	hostile := "\x1b]52;c;ZXZpbA==\x07</script><script>alert(1)</script>\xff"
	rec.Output([]byte(hostile), start.Add(3*time.Second))
	rec.Flush()
	rec.Output([]byte("second segment\n"), start.Add(10*time.Second))
	if err := rec.Close(start.Add(11 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r.Record(audit.KindAttach, audit.Attach{Time: start.Add(12 * time.Second), Offset: "12s", Event: "detach", User: "alice (uid 1000, pid 7)", Reason: "detached"})

	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var segs []*transcript.Terminal
	for _, e := range tr.Events {
		kinds = append(kinds, e.Kind)
		if e.Terminal != nil {
			segs = append(segs, e.Terminal)
			if e.At != int64(e.Terminal.To*1000) {
				t.Errorf("segment %d at %d ms, its last event at %.3f s", e.Terminal.Segment, e.At, e.Terminal.To)
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "attach,terminal,terminal,attach" {
		t.Errorf("events %s", got)
	}
	if len(segs) != 2 || segs[0].Body.State != transcript.BodyIntact || segs[1].Body.State != transcript.BodyIntact || segs[0].InputBytes != 3 || tr.Bodies.Intact != 2 {
		t.Fatalf("segments %+v, bodies %+v", segs, tr.Bodies)
	}
	j, _ := transcript.Marshal(tr)
	c := jsonschema.NewCompiler()
	schema, err := c.Compile("transcript.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err := schema.Validate(inst); err != nil {
		t.Errorf("a human run's transcript does not validate: %v", err)
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, tr, transcript.PageOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(page.Bytes(), []byte("<script>alert(1)")) {
		t.Error("the page carries the recording's markup as markup")
	}
	if d := os.Getenv("SEALRUN_EXPORT_DIR"); d != "" { // for a look by hand
		os.WriteFile(filepath.Join(d, "human-transcript.html"), page.Bytes(), 0o644)
	}

	// A segment edited, one gone, one withheld: each named.
	seg1 := filepath.Join(r.Dir, audit.TerminalSegmentPath(1))
	os.WriteFile(seg1, []byte("not gzip"), 0o644)
	os.Remove(filepath.Join(r.Dir, audit.TerminalSegmentPath(2)))
	tr, err = transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Bodies.Altered != 1 || tr.Bodies.Missing != 1 {
		t.Errorf("an edited and a removed segment: bodies %+v", tr.Bodies)
	}
	tr, _ = transcript.Build(r.Dir, header(), transcript.Options{Withheld: map[string]bool{audit.TerminalSegmentPath(1): true, audit.TerminalSegmentPath(2): true}})
	if tr.Bodies.Withheld != 2 {
		t.Errorf("withheld segments: bodies %+v", tr.Bodies)
	}
	refs, err := transcript.BodyRefs(bytes.NewReader(mustReadFile(t, filepath.Join(r.Dir, "audit.jsonl"))))
	if err != nil || len(refs) != 2 || refs[1].APIName != "terminal-2" || refs[1].Path != audit.TerminalSegmentPath(2) {
		t.Errorf("body refs %+v, %v", refs, err)
	}
}

// TestPlayerInChromium: a human run's page plays its recording in a real browser, with the
// page's own terminal: text, colours, cursor movement, clearing and the alternate screen as a
// terminal shows them, at the time the reader picks (the slider, or a row of the run); hostile
// bytes (OSC 52 clipboard writes, titles, hyperlinks, DCS, markup, invalid UTF-8, a 1 MiB line)
// are data: nothing runs, loads or becomes an element. Screenshots are kept.
func TestPlayerInChromium(t *testing.T) {
	b := browsertest.New(t)
	r, rec := newRecording(t)
	out := func(s float64, text string) { rec.Output([]byte(text), at(s)) }
	rec.Marker("attach alice", at(0.5))
	out(1, "[sealrun] ~ $ ")
	rec.Input([]byte("ls\r"), at(2))
	out(2, "ls\r\n\x1b[1;34mdata\x1b[0m  \x1b[32mtrain.py\x1b[0m  BRIEF.md\r\n[sealrun] ~ $ ")
	out(3, "\x1b]52;c;cm0gLXJmIC8=\x07\x1b]0;pwned title\x07\x1b]8;;http://evil.example/\x1b\\a link\x1b]8;;\x1b\\ \x1bP+q544e\x1b\\<img src=x onerror=\"window.pwned=1\"></script><script>window.pwned=2</script> bad\xff\xfe bytes\r\n")
	out(4, strings.Repeat("L", 1<<20)+"\r\n") // a 1 MiB line
	out(5, "\x1b[?1049h\x1b[2J\x1b[HFULLSCREEN EDITOR\x1b[5;10Hline five")
	out(6, "\x1b[?1049l[sealrun] ~ $ echo after\r\nafter\r\n[sealrun] ~ $ ")
	rec.Marker("detach alice", at(7))
	// A pause the operator granted, its reason hostile too: rows of the run like any.
	r.Log().Append(audit.KindPause, audit.Pause{Time: at(7.2), Event: audit.PauseStart, By: "root", Reason: "fire alarm <script>window.pwned=3</script>", For: "10m0s", Left: "5m0s"})
	r.Log().Append(audit.KindPause, audit.Pause{Time: at(7.6), Event: audit.PauseEnd, By: "sealrund", Reason: "resumed by the operator", Length: "400ms", Deadline: at(3600.4), Left: "9m59.6s"})
	if err := rec.Close(at(8)); err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Do(60*time.Second, chromedp.Navigate(writePage(t, tr)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	rows, err := browsertest.Eval[string](b, `Array.from(document.querySelectorAll('.row')).map(function(r){return r.textContent}).join('\n')`)
	if err != nil || !strings.Contains(rows, "paused by root for at most 10m0s: fire alarm <script>window.pwned=3</script>") || !strings.Contains(rows, "resumed after 400ms") {
		t.Errorf("the page's rows have no pause (as text): %v\n%s", err, rows)
	}
	browsertest.Eval[bool](b, `(function(){var r=Array.from(document.querySelectorAll('.row')).find(function(r){return r.textContent.indexOf('paused by')>=0});r.scrollIntoView();return true})()`)
	b.Screenshot("player-pause-rows")
	browsertest.Eval[bool](b, `(window.scrollTo(0,0),true)`)
	screenAt := func(sec float64) string {
		t.Helper()
		s, err := browsertest.Eval[string](b, fmt.Sprintf(`(function(){var p=document.getElementById('tpos');p.value=String(Math.round(%g*10));p.dispatchEvent(new Event('input'));return document.getElementById('tscreen').textContent;})()`, sec))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// As the recording left it first.
	end, err := browsertest.Eval[string](b, `document.getElementById('tscreen').textContent`)
	if err != nil || !strings.Contains(end, "after") || strings.Contains(end, "FULLSCREEN") {
		t.Errorf("the screen at first (the recording's end): %q, %v", end, err)
	}
	if s := screenAt(2.5); !strings.Contains(s, "train.py") || strings.Contains(s, "a link") {
		t.Errorf("the screen at 2.5 s: %q", s)
	}
	colored, _ := browsertest.Eval[int](b, `Array.from(document.querySelectorAll('#tscreen span')).filter(function(s){return s.style.color!==''}).length`)
	if colored < 2 {
		t.Errorf("%d coloured spans at 2.5 s; want the ls colours", colored)
	}
	b.Screenshot("player-ls")
	if s := screenAt(3.5); !strings.Contains(s, `<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script> bad`) || !strings.Contains(s, "a link") || strings.Contains(s, "pwned title") || strings.Contains(s, "544e") {
		t.Errorf("the screen at 3.5 s (hostile bytes as text, escape sequences dropped): %q", s)
	}
	b.Screenshot("player-hostile")
	if s := screenAt(5.5); !strings.Contains(s, "FULLSCREEN EDITOR") || !strings.Contains(s, "line five") || strings.Contains(s, "train.py") {
		t.Errorf("the alternate screen at 5.5 s: %q", s)
	}
	b.Screenshot("player-fullscreen")
	if s := screenAt(6.5); strings.Contains(s, "FULLSCREEN") || !strings.Contains(s, "after") {
		t.Errorf("back from the alternate screen at 6.5 s: %q", s)
	}
	// A row of the run takes the player to its time.
	if err := b.Do(20*time.Second, chromedp.Click(chromedp.CSS(`.row.k-sub`))); err != nil {
		t.Fatal(err)
	}
	tm, _ := browsertest.Eval[string](b, `document.getElementById('ttime').textContent`)
	if !strings.HasPrefix(tm, "+0:0") {
		t.Errorf("after clicking a row the player shows %q", tm)
	}
	st, err := browsertest.Eval[struct {
		Pwned  int    `json:"pwned"`
		Images int    `json:"images"`
		Title  string `json:"title"`
	}](b, `({pwned: window.pwned || 0, images: document.images.length, title: document.title})`)
	if err != nil || st.Pwned != 0 || st.Images != 0 || st.Title != "r-test — sealrun transcript" {
		t.Errorf("page state %+v, %v: want nothing run, no image, the title kept", st, err)
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// A hostile hour: a person's shell writes, every second for an hour, insertions and deletions of
// 9,999 characters and lines (CSI 9999@, L, M), 50,400 of each. The page's player does each at
// most once a column or line (it did each 9,999 times: minutes of a frozen tab); the page opens,
// plays to the end, and its screen is what the sequences leave. The time it takes is logged (a
// figure for the closing note, not an assertion).
func TestPlayerHostileHour(t *testing.T) {
	b := browsertest.New(t)
	r, rec := newRecording(t)
	rec.Marker("attach mallory", at(0.5))
	chunk := strings.Repeat("\x1b[9999@\x1b[9999L\x1b[9999M", 14) + "x"
	for sec := 1; sec <= 3600; sec++ {
		rec.Output([]byte(chunk), at(float64(sec)))
	}
	rec.Output([]byte("\x1b[H\x1b[2Jthe end\r\n"), at(3601))
	if err := rec.Close(at(3602)); err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	page := writePage(t, tr)
	t0 := time.Now()
	if err := b.Do(120*time.Second, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	opened := time.Since(t0)
	t1 := time.Now()
	mid, err := browsertest.Eval[string](b, `(function(){var p=document.getElementById('tpos');p.value=String(Math.round(1800*10));p.dispatchEvent(new Event('input'));return document.getElementById('tscreen').textContent;})()`)
	seek := time.Since(t1)
	end, err2 := browsertest.Eval[string](b, `(function(){var p=document.getElementById('tpos');p.value=p.max;p.dispatchEvent(new Event('input'));return document.getElementById('tscreen').textContent;})()`)
	if err != nil || err2 != nil || !strings.Contains(mid, "x") || !strings.Contains(end, "the end") {
		t.Errorf("the hostile hour's screen: at 30 min %q (%v), at the end %q (%v)", mid, err, end, err2)
	}
	b.Screenshot("player-hostile-hour")
	t.Logf("a hostile hour (%d bytes of output): the page opened in %s, a seek to its middle took %s", 3600*len(chunk), opened.Round(time.Millisecond), seek.Round(time.Millisecond))
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// A 100 MB line of output (no newline until its end) in a person's terminal: the recording keeps
// it whole, hashed segment by segment; the transcript inlines what fits its 16 MiB for the page
// and says where it cut; the page opens, plays what it has and stays responsive.
func TestRecordingOfA100MBLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	b := browsertest.New(t)
	r, rec := newRecording(t)
	rec.Output([]byte("[sealrun] ~ $ "), at(1))
	rec.Input([]byte("runner python3 big.py\r"), at(2))
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB, as a pty hands it over
	const total = 100 << 20
	for n := 0; n < total; n += len(chunk) {
		rec.Output(chunk, at(3+float64(n)/total*60))
	}
	rec.Output([]byte("\r\nBIG-LINE-END\r\n[sealrun] ~ $ "), at(64))
	if err := rec.Close(at(65)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(t0)
	var segs, cut, inline int
	var shown int64
	for _, e := range tr.Events {
		if tm := e.Terminal; tm != nil {
			segs++
			shown += tm.OutputBytes
			inline += len(tm.Cast)
			if tm.CastCut {
				cut++
			}
			if tm.Body.State != transcript.BodyIntact {
				t.Errorf("segment %d: %s", tm.Segment, tm.Body.State)
			}
		}
	}
	if shown < total || cut == 0 || inline > transcript.MaxInlineCast {
		t.Errorf("%d segments, %d bytes shown, %d cut, %d inline", segs, shown, cut, inline)
	}
	t.Logf("a 100 MB line: %d segments, built in %s, %d MiB inline", segs, built.Round(time.Millisecond), inline>>20)
	t0 = time.Now()
	if err := b.Do(120*time.Second, chromedp.Navigate(writePage(t, tr)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	t.Logf("the page opened in %s", time.Since(t0).Round(time.Millisecond))
	note, err := browsertest.Eval[string](b, `document.body.textContent`)
	if err != nil || !strings.Contains(note, "0123456789abcdef") {
		t.Errorf("the page does not show the line: %v", err)
	}
	b.Screenshot("player-100mb-line")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// newRecording is a run with a human run's recording of a 100x20 terminal begun at start.
func newRecording(t *testing.T) (*transcripttest.Run, *controller.Recording) {
	t.Helper()
	r := newRun(t)
	rec, err := controller.NewRecording(r.Dir, r.Log(), start, 100, 20, "r-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	return r, rec
}

// at is start plus s seconds.
func at(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
