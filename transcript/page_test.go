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

	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// hostile is model and tool output that tries to become markup or script, or to break the page.
const hostile = `HOSTILE-MARK </script><script>window.pwned=1;document.title="pwned"</script><img src=x onerror="window.pwned=2">` +
	`<a href="javascript:window.pwned=3">click</a><style>body{display:none}</style>` + "\x1b[31mred\x1b[0m \xff\xfe \u2028 {{.}} ${window.pwned=4}"

// pageState is what a page's script says of itself once it has drawn.
type pageState struct {
	Ready  string `json:"ready"`
	Pwned  int    `json:"pwned"`
	Title  string `json:"title"`
	Images int    `json:"images"`
	Rows   int    `json:"rows"`
	Shown  bool   `json:"shown"`
	Count  string `json:"count"`
}

const readState = `({ready: document.body.getAttribute('data-ready') || '', pwned: window.pwned || 0, title: document.title,
  images: document.images.length, rows: document.querySelectorAll('.row').length,
  shown: document.body.innerText.indexOf('<img src=x onerror') >= 0, count: document.getElementById('count').textContent})`

func writePage(t *testing.T, tr *transcript.Transcript) string {
	t.Helper()
	dir := t.TempDir()
	if err := transcript.Write(dir, tr); err != nil {
		t.Fatal(err)
	}
	return "file://" + filepath.Join(dir, "transcript.html")
}

// The page opened from a file:// URL in a real browser: hostile text from the model and from a
// call is on screen as text; nothing of it runs, loads or becomes an element; search finds it;
// the next-failure button goes to the failed call. A screenshot is kept.
func TestPageInChromium(t *testing.T) {
	b := browsertest.New(t)
	r := newRun(t)
	transcripttest.Conversation(r, 5, 3000, 400, func(i int) string {
		if i == 3 {
			return hostile
		}
		return ""
	})
	resp := `{"choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString(hostile) + `,"tool_calls":[{"id":"x","type":"function","function":{"name":` + jsonString(hostile) + `,"arguments":"{\"command\":\"echo hi\"}"}}]},"finish_reason":"stop"}]}`
	r.Exchange("/v1/chat/completions", []byte(`{"messages":[{"role":"user","content":`+jsonString(hostile)+`}]}`), []byte(resp), false, 200)
	r.Call([]string{"sh", "-c", "exit 3"}, []byte("Traceback: boom\n"), 3)
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Do(60*time.Second, chromedp.Navigate(writePage(t, tr)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	st, err := browsertest.Eval[pageState](b, readState)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pwned != 0 || st.Title != "r-test — sealrun transcript" || st.Images != 0 || st.Rows == 0 {
		t.Errorf("page state %+v: want no script run, the title kept, no image element, rows drawn", st)
	}
	// Search finds the marker in the model's answer and in the call's output.
	if err := b.Do(20*time.Second, chromedp.SendKeys(chromedp.CSS("#q"), "hostile-mark\r"), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if st, err = browsertest.Eval[pageState](b, readState); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(st.Count, "1 of ") || st.Count == "1 of 1" || !st.Shown || st.Pwned != 0 || st.Images != 0 {
		t.Errorf("search: %+v; want the first of several matches on screen, as text", st)
	}
	b.Screenshot("transcript-search")
	if err := b.Do(20*time.Second, chromedp.Click(chromedp.CSS("#fail")), chromedp.Sleep(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	current, err := browsertest.Eval[string](b, `document.querySelector('.row.current .hd').textContent`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(current, "exit 3") {
		t.Errorf("next failure went to %q; want the call that exited 3", current)
	}
	if st, err := browsertest.Eval[pageState](b, readState); err != nil || st.Pwned != 0 {
		t.Errorf("after searching and jumping: pwned %d (%v)", st.Pwned, err)
	}
	b.Screenshot("transcript-hostile")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

// The page's Content-Security-Policy is a wall of its own: even markup that got into the page
// (as if the escaping had a hole) does not run, and the browser says it refused it.
func TestPageCSPRefusesInjectedScript(t *testing.T) {
	b := browsertest.New(t)
	r := newRun(t)
	transcripttest.Conversation(r, 2, 100, 50, nil)
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	transcript.Render(&page, tr, transcript.PageOptions{})
	injected := strings.Replace(page.String(), "<body>", `<body><script>window.pwned=1</script><img src=x onerror="window.pwned=2"><iframe src="https://example.com/"></iframe>`, 1)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "t.html"), []byte(injected), 0o644)
	if err := b.Do(60*time.Second, chromedp.Navigate("file://"+filepath.Join(dir, "t.html")), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)), chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	st, err := browsertest.Eval[pageState](b, readState)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pwned != 0 {
		t.Errorf("injected script ran (pwned %d)", st.Pwned)
	}
	refused := false
	for _, e := range b.Errors() {
		refused = refused || strings.Contains(e, "Content Security Policy")
	}
	if !refused {
		t.Logf("console: %q", b.Errors())
	}
}

// Large runs draw only what is on screen: 50,000 events, texts of every size, open and scroll
// to the end with a few dozen rows in the document at any time.
func TestPageRendersOnlyWhatIsOnScreen(t *testing.T) {
	b := browsertest.New(t)
	tr := &transcript.Transcript{Format: transcript.Format, Run: header(), Events: make([]transcript.Event, 0, 50000)}
	for i := 1; i <= 50000; i++ {
		at := int64(i) * 70
		ev := transcript.Event{Seq: i, Kind: transcript.KindModel, At: at, Time: start.Add(time.Duration(at) * time.Millisecond), Text: "x"}
		ev.Model = &transcript.Exchange{N: i, Method: "POST", Path: "/v1/chat/completions", Status: 200, LatencyMS: 50, Messages: i,
			Added:  []transcript.Message{{Role: "tool", Parts: []transcript.Part{{Type: transcript.PartToolResult, ID: fmt.Sprint(i), Text: strings.Repeat(fmt.Sprintf("line %d of turn %d\n", i%40, i), 1+i%40)}}}},
			Output: []transcript.Message{{Role: "assistant", Parts: []transcript.Part{{Type: transcript.PartText, Text: fmt.Sprintf("turn %d", i)}}}}}
		tr.Events = append(tr.Events, ev)
	}
	tr.Totals.Exchanges = 50000
	if err := b.Do(120*time.Second, chromedp.Navigate(writePage(t, tr)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	st, err := browsertest.Eval[pageState](b, readState)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ { // row heights settle as rows are measured: scroll to the end again
		if err := b.Do(20*time.Second, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.body.scrollHeight)`), chromedp.Sleep(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	rowsAtEnd, err := browsertest.Eval[int](b, `document.querySelectorAll('.row').length`)
	if err != nil {
		t.Fatal(err)
	}
	lastSeen, err := browsertest.Eval[bool](b, `document.body.innerText.indexOf('model #50000') >= 0`)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows == 0 || st.Rows > 120 || rowsAtEnd == 0 || rowsAtEnd > 120 || !lastSeen {
		t.Errorf("%d rows at the top, %d at the end (last event on screen: %v); want a few dozen, and the end reachable", st.Rows, rowsAtEnd, lastSeen)
	}
	b.Screenshot("transcript-50000-end")
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
}

func jsonString(s string) string {
	var b bytes.Buffer
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return `"` + b.String() + `"`
}

// The page embeds transcript.json's very bytes: Check renders the page from what it marshalled
// (renderMarshaled), so the two must be one encoding, HTML escaped, a hostile text included.
func TestPageEmbedsMarshalBytes(t *testing.T) {
	tr := &transcript.Transcript{Format: transcript.Format, Run: transcript.Run{ID: "r-1", Reason: "</script><script>alert(1)</script> & \u2028"}, Events: []transcript.Event{}}
	j, err := transcript.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := transcript.Render(&page, tr, transcript.PageOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `<script type="application/json" id="transcript">` + strings.TrimSuffix(string(j), "\n") + `</script>`
	if !strings.Contains(page.String(), want) {
		t.Errorf("the page does not embed Marshal's bytes %s", j)
	}
	if strings.Count(page.String(), "</script>") != 2 {
		t.Errorf("a text closed the page's script element")
	}
}
