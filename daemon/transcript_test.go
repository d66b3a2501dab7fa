package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/view"
)

// liveAgent makes model requests through the gateway (busybox wget, a JSON body with a
// Content-Length) between compute calls, a second apart, then submits and finalizes.
const liveAgent = `set -u
for i in 1 2 3 4; do
  wget -q -O - --header 'Content-Type: application/json' --post-data "{\"messages\":[{\"role\":\"user\",\"content\":\"turn $i: what next?\"}]}" "$SEALRUN_GATEWAY/v1/chat/completions" || echo "wget failed"
  echo
  runner sh -c "echo call $i output; sleep 1"
done
mkdir -p b1 && cp sealrun-bundle.json predict.py b1/
out=$(runner submit b1); echo "$out"
id=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p')
runner finalize "$id"
`

// A running run's transcript, followed through the admin API as sealrun view follows it: each
// audit entry's event arrives (model exchanges read into messages, calls with their output) soon
// after it is written, the follower asking again from the last entry it has; the run's end
// answers with its transcript.json, which checks against the audit log and the bodies. The
// provider's key, in place for the run, is in no answer of the API and no file of the run.
func TestTranscriptFollowedLive(t *testing.T) {
	tb := newTestbed(t)
	const secret = "sk-sealrun-test-SECRET-7f3a9c2e41"
	os.WriteFile(tb.cfg.Providers["openai"].KeyFile, []byte(secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(liveAgent), 0o755)
	d := startDaemon(t, tb, tb.executor())
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(srv.URL + "/v1" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s %s", path, resp.Status, b)
		}
		return b
	}
	rec, err := d.Submit([]byte(tb.trackTOML), "demo-test.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	var answers bytes.Buffer // every answer the follower got, for the key search
	arrived := map[int]time.Time{}
	from, final := 0, false
	var last *transcript.Transcript
	for deadline := time.Now().Add(4 * time.Minute); !final && time.Now().Before(deadline); {
		b := get("/runs/" + rec.ID + "/transcript?from=" + strconv.Itoa(from) + "&wait=25")
		now := time.Now()
		answers.Write(b)
		var tr transcript.Transcript
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatalf("answer: %v\n%.300s", err, b)
		}
		for _, e := range tr.Events {
			if e.Seq <= from {
				t.Errorf("asked from %d, got entry %d again", from, e.Seq)
			}
			arrived[e.Seq] = now
		}
		from, final, last = tr.Through, !tr.Run.Live, &tr
	}
	if !final {
		t.Fatal("the run did not end within 4 minutes")
	}
	r := waitState(t, d, rec.ID, api.StateGraded)
	want, err := transcript.Read(filepath.Join(r.Dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	if last.Through != want.Through || len(arrived) != want.Through {
		t.Errorf("followed %d entries through %d; the run's transcript has %d", len(arrived), last.Through, want.Through)
	}
	// How soon each entry reached the follower after it was written (calls: at their end).
	var lags []time.Duration
	models, calls := 0, 0
	for _, e := range want.Events {
		written := e.Time
		switch {
		case e.Model != nil:
			models++
			written = e.Time.Add(time.Duration(e.Model.LatencyMS) * time.Millisecond)
			if e.Model.API != transcript.APIChat || len(e.Model.Added) != 1 || len(e.Model.Output) != 1 || !strings.Contains(e.Model.Added[0].Parts[0].Text, "what next?") {
				t.Errorf("model exchange %d: %+v", e.Model.N, e.Model)
			}
		case e.Call != nil:
			calls++
			written = e.Call.End
			if !strings.Contains(e.Call.Text, "output") {
				t.Errorf("call %d: output %q", e.Call.N, e.Call.Text)
			}
		}
		if at, ok := arrived[e.Seq]; ok {
			lags = append(lags, max(0, at.Sub(written)))
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) > 0 {
		t.Logf("%d entries followed live: lag after the entry was written, median %s, max %s", len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}
	if models != 4 || calls != 4 {
		t.Errorf("%d model exchanges, %d calls; want 4 and 4", models, calls)
	}
	pred := readPredicate(t, filepath.Join(r.Dir, "result.att.json"))
	rep, err := transcript.Check(r.Dir, pred)
	if err != nil || len(rep.Problems) > 0 || !rep.Transcript || !rep.Page || rep.Bodies.Intact != 12 {
		t.Errorf("check: %+v %v", rep, err)
	}
	// The key was in place: the provider got it. Nothing the API answers or the run keeps has it.
	if reqs := tb.prov.Requests(); len(reqs) == 0 || !strings.Contains(reqs[0].Header.Get("Authorization"), secret) {
		t.Fatalf("the provider did not get the key (%d requests)", len(reqs))
	}
	for _, p := range []string{"/runs", "/runs/" + rec.ID, "/runs/" + rec.ID + "/transcript", "/runs/" + rec.ID + "/events?follow=0"} {
		answers.Write(get(p))
	}
	for _, name := range []string{"transcript", "transcript-json", "transcript-html", "audit", "history", "report", "attestation", "summary", "report-html", "track", "journal", "call-1", "gateway-1-request", "gateway-1-response"} {
		answers.Write(get("/runs/" + rec.ID + "/files/" + name))
	}
	if bytes.Contains(answers.Bytes(), []byte(secret)) {
		t.Error("the provider's key is in an answer of the admin API")
	}
	filepath.Walk(r.Dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the provider's key is in %s", p)
			}
		}
		return nil
	})
}

func readPredicate(t *testing.T, path string) *attest.Predicate {
	t.Helper()
	st, err := attest.ReadUnverified(mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return st.Predicate
}

// The live transcript route refuses what it cannot read, and answers an unknown run 404.
func TestTranscriptRouteRefusals(t *testing.T) {
	d := &Daemon{runs: map[string]*api.Record{"r-1": {ID: "r-1", State: api.StateQueued, Dir: t.TempDir()}}, subs: map[chan api.Event]string{}, spec: map[string]RunSpec{}}
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/runs/r-1/transcript?from=-1", 400, "from="},
		{"/v1/runs/r-1/transcript?from=x", 400, "from="},
		{"/v1/runs/r-1/transcript?wait=NaN", 400, "wait="},
		{"/v1/runs/r-1/transcript?wait=-3", 400, "wait="},
		{"/v1/runs/r-nope/transcript", 404, "no run r-nope"},
		{"/v1/runs/r-1/transcript", 200, `"events":[]`},
		{"/v1/runs/r-1/files/gateway-0-request", 404, "no file"},
		{"/v1/runs/r-1/files/gateway-01-request", 404, "no file"},
		{"/v1/runs/r-1/files/gateway-1-headers", 404, "no file"},
		{"/v1/runs/r-1/files/gateway-1-request", 404, "has no gateway/000001.request.json.gz yet"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s; want %d ~%q", c.path, resp.StatusCode, b, c.code, c.want)
		}
	}
}

// What a user of sealrun view sees, in a real browser: the runs list with the running run; its
// page following it (each model turn and call on screen soon after its audit entry, measured);
// the end. Then the run gathered and published: the leaderboard's link opens its transcript from
// file://, and the provider's key, in place for the run, is on no page the viewer serves and in
// no file of the publication. Screenshots of each page are kept.
func TestViewFollowsARunInChromium(t *testing.T) {
	tb := newTestbed(t)
	b := browsertest.New(t)
	const secret = "sk-sealrun-test-SECRET-0b5d17aa93"
	os.WriteFile(tb.cfg.Providers["openai"].KeyFile, []byte(secret+"\n"), 0o600)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(liveAgent, "sleep 1", "sleep 2", 1)), 0o755)
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	d := startDaemon(t, tb, tb.executor())
	client := serveAPI(t, tb, d)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v, err := view.New(client, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: v.Handler()}
	go srv.Serve(ln)
	defer srv.Close()

	rec, err := d.Submit([]byte(tb.trackTOML), "demo-test.toml", "openai/gpt-x@high", 1, false, "test")
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, rec.ID, api.StateRunning)
	if err := b.Do(60*time.Second, chromedp.Navigate(v.URL(ln.Addr().String())), chromedp.WaitVisible(chromedp.CSS(`a[href="/runs/`+rec.ID+`"]`))); err != nil {
		t.Fatal(err)
	}
	b.Screenshot("view-runs")
	if err := b.Do(60*time.Second, chromedp.Click(chromedp.CSS(`a[href="/runs/`+rec.ID+`"]`)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	// Watch the page's counts of model requests and calls as the run goes on.
	type seen struct {
		Models, Calls int
		Live          string
	}
	const read = `(function(){var f=document.querySelector('header .facts').innerText; function n(re){var m=f.match(re); return m?+m[1].replace(/,/g,''):0}
	  return {models: n(/model (\d[\d,]*) requests/), calls: n(/compute (\d[\d,]*) calls/), live: document.getElementById('live').textContent}})()`
	var appeared []time.Time // when the page first showed k events (models + calls)
	var last seen
	shot := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		s, err := browsertest.Eval[seen](b, read)
		if err != nil {
			t.Fatal(err)
		}
		for len(appeared) < s.Models+s.Calls {
			appeared = append(appeared, time.Now())
		}
		if !shot && s.Models >= 2 {
			b.Screenshot("view-run-live")
			shot = true
		}
		last = s
		if strings.Contains(s.Live, "ended") {
			break
		}
	}
	if last.Models != 4 || last.Calls != 4 || !strings.Contains(last.Live, "the run has ended") {
		t.Fatalf("the page shows %+v at the end; want 4 model requests, 4 calls and the end", last)
	}
	b.Screenshot("view-run-ended")
	r := waitState(t, d, rec.ID, api.StateGraded)
	tr, err := transcript.Read(filepath.Join(r.Dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	var written []time.Time
	for _, e := range tr.Events {
		switch {
		case e.Model != nil:
			written = append(written, e.Time.Add(time.Duration(e.Model.LatencyMS)*time.Millisecond))
		case e.Call != nil:
			written = append(written, e.Call.End)
		}
	}
	sort.Slice(written, func(i, j int) bool { return written[i].Before(written[j]) })
	var lags []time.Duration
	for i := range min(len(written), len(appeared)) {
		lags = append(lags, max(0, appeared[i].Sub(written[i])))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) > 0 {
		t.Logf("in the browser, %d model turns and calls appeared after their audit entries: median %s, max %s (the page polled every 50 ms)", len(lags), lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
	}

	// Every page and answer of the viewer, fetched as the browser does (with its cookie).
	var served bytes.Buffer
	for _, p := range []string{"/", "/runs/" + rec.ID, "/api/runs", "/api/runs/" + rec.ID + "/transcript?from=0"} {
		body, err := browsertest.Eval[string](b, `fetch(`+strconv.Quote(p)+`).then(function(r){return r.text()})`)
		if err != nil {
			t.Fatalf("fetch %s: %v", p, err)
		}
		served.WriteString(body)
	}
	if !strings.Contains(served.String(), rec.ID) {
		t.Fatalf("the viewer's answers do not name the run: %.300s", served.String())
	}
	if strings.Contains(served.String(), secret) {
		t.Error("the provider's key is on a page of the viewer")
	}

	// Gathered, published: the leaderboard links the transcript, which opens from file://.
	results := filepath.Join(tb.base, "results")
	os.Mkdir(results, 0o755)
	if _, err := client.Gather(context.Background(), r, results); err != nil {
		t.Fatal(err)
	}
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	pub := filepath.Join(tb.base, "publication")
	if _, err := publish.Write(publish.Options{Out: pub, Suite: "exam", Keys: []string{"../attest/testdata/ed25519.pub"}, Tracks: []string{trackFile}, Inputs: []string{results}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(60*time.Second, chromedp.Navigate("file://"+filepath.Join(pub, "leaderboard.html")), chromedp.WaitVisible(chromedp.CSS("table.board"))); err != nil {
		t.Fatal(err)
	}
	href, err := browsertest.Eval[string](b, `(function(){var a=document.querySelector('a[href$="transcript.html"]'); return a ? a.href : ''})()`)
	if err != nil || !strings.HasSuffix(href, "runs/"+rec.ID+"/transcript.html") {
		t.Fatalf("the leaderboard's transcript link: %q %v", href, err)
	}
	if err := b.Do(60*time.Second, chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	if title, _ := browsertest.Eval[string](b, `document.title`); !strings.HasPrefix(title, rec.ID) {
		t.Errorf("the linked page's title is %q", title)
	}
	b.Screenshot("leaderboard-transcript")
	filepath.Walk(pub, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		data, _ := os.ReadFile(p)
		if strings.HasSuffix(p, ".gz") {
			if zr, err := gzip.NewReader(bytes.NewReader(data)); err == nil {
				data, _ = io.ReadAll(zr)
			}
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the provider's key is in the published %s", p)
		}
		return nil
	})
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}
