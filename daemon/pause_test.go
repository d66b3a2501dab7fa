package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/client"
)

// TestPausesOfAHumanRun: the operator pauses a person's run with sealrun pause while a compute
// call runs: the call and the shell stand still, the clock too, and the pause's end (its length
// up, or sealrun resume) moves the deadline by it; the call ends well, not at its limit. The
// track's allowance bounds them; hostile requests are refused, each saying why; the pauses are in
// the audit log, the attestation (which verifies) and the transcript.
func TestPausesOfAHumanRun(t *testing.T) {
	tb, d, trackFile, cli := humanTestbed(t, "2m", "pauses = \"8s\"\n")
	out, err := exec.Command(cli, "run", "--track", trackFile, "--agent", "human/alice", "--person", "root", "--seed", "1", "--detach", "--socket", tb.cfg.Socket).CombinedOutput()
	if err != nil {
		t.Fatalf("sealrun run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	sealrun := func(args ...string) (string, error) {
		o, err := exec.Command(cli, append(args, "--socket", tb.cfg.Socket)...).CombinedOutput()
		return string(o), err
	}
	// Before its clock starts, there is nothing to pause, and the record says what it waits for.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if r, _ := d.Run(id); r.Waiting != "" {
			if !strings.Contains(r.Waiting, "sealrun attach "+id) || !r.Started.IsZero() || !r.Deadline.IsZero() {
				t.Errorf("waiting for its person, the record says %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the human run's record never said it waits for its person")
		}
	}
	if o, err := sealrun("pause", id, "--reason", "too early"); err == nil || !strings.Contains(o, "nothing to pause yet") {
		t.Errorf("a pause before the first attach: %v %s", err, o)
	}
	if o, _ := sealrun("ps"); !strings.Contains(o, "waiting up to 2m0s") {
		t.Errorf("sealrun ps while the run waits for its person:\n%s", o)
	}
	c := client.New(tb.cfg.Socket)
	var a *client.Attachment
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		if a, err = c.Attach(t.Context(), id, false, 120, 40); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	defer a.Close()
	type line struct {
		at   time.Time
		text string
	}
	shown := make(chan line, 1000)
	prompt := make(chan struct{})
	go func() {
		var buf string
		prompted := false
		for {
			p, ended, err := a.Next()
			if !prompted && strings.Contains(buf+string(p), "[sealrun] ") {
				close(prompt)
				prompted = true
			}
			buf += string(p)
			for {
				i := strings.IndexByte(buf, '\n')
				if i < 0 {
					break
				}
				shown <- line{time.Now(), strings.TrimRight(buf[:i], "\r")}
				buf = buf[i+1:]
			}
			if err != nil || ended != "" {
				close(shown)
				return
			}
		}
	}()
	next := func(match func(string) bool, what string) line {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case l, ok := <-shown:
				if !ok {
					t.Fatalf("the terminal ended before %s", what)
				}
				if match(l.text) {
					return l
				}
			case <-timeout:
				t.Fatalf("no %s on the terminal", what)
			}
		}
	}
	// waitLine waits for a line starting with want (a line the command prints, not its echo).
	waitLine := func(want string) time.Time {
		t.Helper()
		return next(func(s string) bool { return strings.HasPrefix(s, want) }, fmt.Sprintf("line starting %q", want)).at
	}
	waitLineMatching := func(want string) string {
		t.Helper()
		return next(func(s string) bool { return strings.Contains(s, want) }, fmt.Sprintf("line with %q", want)).text
	}
	select {
	case <-prompt:
	case <-time.After(time.Minute):
		t.Fatal("no prompt on the person's terminal")
	}
	rec0, _ := d.Run(id)
	if rec0.Waiting != "" || rec0.Started.IsZero() || time.Since(rec0.Started) > 30*time.Second || rec0.Deadline.Sub(rec0.Started) != tb.track.Budget.Wall {
		t.Errorf("attached, the record says %+v", rec0)
	}
	// A call of 3 s of ticks; the pause comes at its first.
	a.Input([]byte(`runner sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo tick$i; sleep 0.1; done; echo call-$((6*7))'` + "\r"))
	waitLine("tick1")
	if o, err := sealrun("pause", id, "--reason", "fire alarm", "--for", "4s"); err != nil || !strings.Contains(o, "paused at") {
		t.Fatalf("sealrun pause: %v %s", err, o)
	}
	paused := time.Now()
	if r, _ := d.Run(id); r.Paused.IsZero() {
		t.Errorf("paused, the record says %+v", r)
	} else {
		paused = r.Paused // when the daemon paused it, not when the CLI returned
	}

	// Hostile and mistaken requests while paused: each refused, nothing of the run lost.
	raw := func(method, path, body string) (int, string) {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", tb.cfg.Socket)
		}}}
		req, _ := http.NewRequest(method, "http://sealrund/v1"+path, strings.NewReader(body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/runs/" + id + "/pause", `{"reason": "again"}`, 409, "already paused"},
		{"/runs/nope/pause", `{"reason": "x"}`, 404, "no run nope"},
		{"/runs/" + id + "/pause", `{"reason": ""}`, 400, "reason: none given"},
		{"/runs/" + id + "/pause", `{"reason": "a\u001b]52;c;aGk=\u0007b"}`, 400, "control character"},
		{"/runs/" + id + "/pause", `{"reason": "` + strings.Repeat("x", 301) + `"}`, 400, "at most 300"},
		{"/runs/" + id + "/pause", `{"reason": "x", "for": "-1s"}`, 400, "not a length of pause"},
		{"/runs/" + id + "/pause", `{"reason": "x", "for": "48h"}`, 400, "not a length of pause"},
		{"/runs/" + id + "/pause", `{"reason": "x", "for": "soon"}`, 400, "not a length of pause"},
		{"/runs/" + id + "/pause", `{"reason": "x", "until": "5m"}`, 400, "not a pause request"},
		{"/runs/" + id + "/pause", `[1,2`, 400, "not a pause request"},
		{"/runs/" + id + "/pause", `{"reason": "` + strings.Repeat("x", 2<<20) + `"}`, 413, "over"},
	} {
		code, body := raw("POST", c.path, c.body)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("POST %s %.60s: %d %s; want %d %s", c.path, c.body, code, body, c.code, c.want)
		}
	}
	// Nothing of the call ran while paused; the pause's length ended it, and the call went on.
	// The ticks printed before the pause took (the pause's request takes its time, the call
	// ticks every 0.1 s), and the line or two on its way when the freeze came, are passed over.
	var resumedAt time.Time
	for resumedAt.IsZero() {
		if l := next(func(s string) bool { return strings.HasPrefix(s, "tick") }, "a tick after the pause"); l.at.After(paused.Add(500 * time.Millisecond)) {
			resumedAt = l.at
		}
	}
	if gap := resumedAt.Sub(paused); gap < 3500*time.Millisecond {
		t.Errorf("the call went on %s after the pause began; it was for 4 s", gap)
	}
	waitLine("call-42")
	rec1, _ := d.Run(id)
	if moved := rec1.Deadline.Sub(rec0.Deadline); !rec1.Paused.IsZero() || moved < 4*time.Second || moved > 5*time.Second {
		t.Errorf("after the pause: paused %v, the deadline moved by %s", rec1.Paused, moved)
	}
	// A second pause, ended by sealrun resume; a third takes what the allowance leaves; a
	// fourth is refused.
	if o, err := sealrun("pause", id, "--reason", "the person's laptop died"); err != nil {
		t.Fatalf("second pause: %v %s", err, o)
	}
	time.Sleep(time.Second)
	if o, err := sealrun("resume", id); err != nil || !strings.Contains(o, "deadline is now") {
		t.Fatalf("sealrun resume: %v %s", err, o)
	}
	if o, err := sealrun("resume", id); err == nil || !strings.Contains(o, "is not paused") {
		t.Errorf("resume while running: %v %s", err, o)
	}
	if o, err := sealrun("pause", id, "--reason", "lunch"); err != nil {
		t.Fatalf("third pause: %v %s", err, o)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r, _ := d.Run(id); r.Paused.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the third pause outlasted the allowance")
		}
	}
	if o, err := sealrun("pause", id, "--reason", "more"); err == nil || !strings.Contains(o, "have been used") {
		t.Errorf("a pause past the allowance: %v %s", err, o)
	}

	// The run ends as a person ends it; its pauses are everywhere a reader looks.
	a.Input([]byte("mkdir -p b1 && cp sealrun-bundle.json predict.py b1/ && runner submit b1\r"))
	cand := ""
	for cand == "" {
		if m := regexp.MustCompile(`candidate ([0-9a-f]{12,})`).FindStringSubmatch(waitLineMatching("candidate ")); m != nil {
			cand = m[1]
		}
	}
	a.Input([]byte("runner finalize " + cand + "\r"))
	rec := waitState(t, d, id, api.StateGraded)
	st, err := attest.Verify(mustRead(t, filepath.Join(rec.Dir, "result.att.json")), tb.verifier)
	if err != nil {
		t.Fatal(err)
	}
	tl := st.Statement.Predicate.Timeline
	if len(tl.Pauses) != 3 || st.Statement.Predicate.Budget.Pauses != "8s" || tl.Pauses[0].Reason != "fire alarm" || tl.Pauses[0].By == "" {
		t.Errorf("the attestation's pauses: %+v (budget %q)", tl.Pauses, st.Statement.Predicate.Budget.Pauses)
	}
	if got := tl.PausedFor(); got < 7*time.Second || got > 9*time.Second {
		t.Errorf("the pauses lasted %s in all; the allowance is 8 s", got)
	}
	var events []string
	for _, l := range strings.Split(string(mustRead(t, filepath.Join(rec.Dir, "audit.jsonl"))), "\n") {
		var e struct {
			Kind  string `json:"kind"`
			Event string `json:"event"`
		}
		if json.Unmarshal([]byte(l), &e) == nil && e.Kind == audit.KindPause {
			events = append(events, e.Event)
		}
	}
	if got := strings.Join(events, ","); got != "pause,resume,pause,resume,pause,resume" {
		t.Errorf("the audit log's pauses: %s", got)
	}
	tr := mustRead(t, filepath.Join(rec.Dir, "transcript.json"))
	if !bytes.Contains(tr, []byte("paused by ")) || !bytes.Contains(tr, []byte("fire alarm")) || !bytes.Contains(tr, []byte("resumed after")) {
		t.Error("the transcript has no pause events")
	}
	vout, err := exec.Command(cli, "verify", filepath.Join(rec.Dir, "result.att.json"), "--key", "../attest/testdata/ed25519.pub", "--transcript", rec.Dir).CombinedOutput()
	if err != nil || !strings.Contains(string(vout), "VALID") {
		t.Errorf("sealrun verify: %v\n%s", err, vout)
	}
}
