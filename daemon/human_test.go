package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// tmux is a private tmux server a test drives a person through: send-keys types, capture-pane
// reads the screen.
type tmux struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T) *tmux {
	testenv.RequireTool(t, "tmux", "tmux")
	// Its socket in the test's own directory (removed with it), not tmux's shared one.
	m := &tmux{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	t.Cleanup(func() { exec.Command("tmux", "-S", m.sock, "kill-server").Run() })
	return m
}

func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", m.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys types into a pane: words are tmux key names (Enter, C-p) or literal text (-l).
func (m *tmux) typeLine(pane, line string) {
	m.t.Helper()
	m.run("send-keys", "-t", pane, "-l", line)
	m.run("send-keys", "-t", pane, "Enter")
}

// screen is a pane's whole history and screen, its lines joined.
func (m *tmux) screen(pane string) string {
	m.t.Helper()
	return m.run("capture-pane", "-p", "-J", "-S", "-", "-t", pane)
}

// waitFor waits until a pane shows want (a regexp), and returns its first match. want must be
// something only the step just taken can print (a marker made by arithmetic, so that the echo
// of the typed line never matches it); text that may already be on the screen is waited for
// with waitForNth.
func (m *tmux) waitFor(pane, want string, timeout time.Duration) []string {
	m.t.Helper()
	return m.waitForNth(pane, want, 1, timeout)
}

// waitForNth waits until a pane shows want (a regexp) n times, and returns the nth match: a
// step whose output the screen may already hold (a second attach, a replay) waits for the
// count to grow past what it was before the step.
func (m *tmux) waitForNth(pane, want string, n int, timeout time.Duration) []string {
	m.t.Helper()
	re := regexp.MustCompile(want)
	deadline := time.Now().Add(timeout)
	for {
		s := m.screen(pane)
		if got := re.FindAllStringSubmatch(s, n); len(got) >= n {
			return got[n-1]
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("pane %s never showed %q %d times in %s; it shows:\n%s", pane, want, n, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// after waits until a pane shows want (a regexp) after the nth time it shows anchor (what the
// step that produces want printed first), and returns what follows the anchor.
func (m *tmux) after(pane, anchor string, n int, want string, timeout time.Duration) string {
	m.t.Helper()
	are, re := regexp.MustCompile(anchor), regexp.MustCompile(want)
	deadline := time.Now().Add(timeout)
	for {
		s := m.screen(pane)
		if at := are.FindAllStringIndex(s, n); len(at) >= n && re.MatchString(s[at[n-1][1]:]) {
			return s[at[n-1][1]:]
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("pane %s never showed %q after its %s #%d in %s; it shows:\n%s", pane, want, anchor, n, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// foreground waits until the process in a pane's foreground is cmd (sh once a client it ran
// has ended): what the pane is running, not what it printed.
func (m *tmux) foreground(pane, cmd string, timeout time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := strings.TrimSpace(m.run("display-message", "-p", "-t", pane, "#{pane_current_command}"))
		if got == cmd {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("pane %s runs %q after %s; want %q", pane, got, timeout, cmd)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// auditCount is how many entries of a kind a run's audit log holds so far.
func auditCount(t *testing.T, dir, kind string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte(`"kind":"`+kind+`"`))
}

// humanTestbed is a testbed whose track takes human runs, its daemon served on a socket.
func humanTestbed(t *testing.T, humanStart string, more ...string) (*testbed, *Daemon, string, string) {
	tb := newTestbed(t)
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	tb.trackTOML += "\n[human]\nstart = \"" + humanStart + "\"\n" + strings.Join(more, "")
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	d := startDaemon(t, tb, tb.executor())
	serveAPI(t, tb, d)
	return tb, d, trackFile, sandboxtest.Static(t, "cmd/sealrun")
}

// TestHumanRunThroughTmux: a person, driven through tmux, attaches to a human run with sealrun
// attach, reads the brief, asks the time left, trains, detaches mid-call and comes back to the
// same shell, loses their client to a kill and comes back again, is watched by a proctor who
// cannot type, tries the wall from inside, submits and finalizes; the run ends graded, verifies,
// and its recording holds the whole session, each segment hashed in the audit log.
func TestHumanRunThroughTmux(t *testing.T) {
	tb, d, trackFile, cli := humanTestbed(t, "2m")
	m := newTmux(t)
	out, err := exec.Command(cli, "run", "--track", trackFile, "--agent", "human/alice", "--person", "root", "--seed", "1", "--detach", "--socket", tb.cfg.Socket).CombinedOutput()
	if err != nil {
		t.Fatalf("sealrun run --agent human/alice: %v\n%s", err, out)
	}
	id := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	attachCmd := fmt.Sprintf("%s attach %s --socket %s", cli, id, tb.cfg.Socket)

	// The person's terminal: a shell in tmux, from which they run sealrun attach. Each attach
	// prints "attached to" once: the nth attach waits for the nth.
	attached := `sealrun: attached to ` + regexp.QuoteMeta(id)
	m.run("new-session", "-d", "-s", "h", "-x", "120", "-y", "40", "sh")
	m.typeLine("h", attachCmd)
	m.waitForNth("h", attached, 1, 60*time.Second)
	m.after("h", attached, 1, `\[sealrun\] ~ \$`, 60*time.Second)
	r, _ := d.Run(id)
	if r.State != api.StateRunning {
		t.Errorf("attached, the run is %s", r.State)
	}
	briefLine := "head -1 BRIEF.md; echo TIME-$((1+1)); runner time_left; echo TIME-$((2+1))"
	m.typeLine("h", briefLine)
	m.waitFor("h", `# The task`, 10*time.Second)
	if left := m.after("h", `TIME-2`, 1, `TIME-3`, 10*time.Second); !strings.Contains(left, " left; reserve window starts in ") {
		t.Errorf("runner time_left printed no time left: %q", left)
	}

	// A training call; the person detaches while it runs (^P ^Q) and the call goes on, and ends,
	// while they are away (its audit entry is written when it ends).
	calls := auditCount(t, r.Dir, audit.KindCall)
	m.typeLine("h", `runner python3 -c 'import time; print("epoch", 1+0, flush=True); time.sleep(4); print("trained", 2+0)'`)
	m.waitFor("h", `epoch 1`, 30*time.Second)
	m.run("send-keys", "-t", "h", "C-p", "C-q")
	m.waitFor("h", `sealrun attach `+id+` returns to it`, 10*time.Second)
	m.foreground("h", "sh", 10*time.Second)
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * 30 * time.Second); auditCount(t, r.Dir, audit.KindCall) == calls; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the training call never ended while the person was away")
		}
	}
	m.typeLine("h", attachCmd)
	m.waitForNth("h", attached, 2, 30*time.Second)
	m.after("h", attached, 2, `trained 2`, 30*time.Second) // the same shell, the call done while away

	// A proctor watches: they see the shell, and nothing they type reaches it.
	m.run("new-window", "-t", "h", "-n", "proctor", "sh")
	m.typeLine("h:proctor", fmt.Sprintf("%s attach --watch %s --socket %s", cli, id, tb.cfg.Socket))
	m.waitFor("h:proctor", `watching `+id+` read-only`, 30*time.Second)
	m.typeLine("h:proctor", "echo proctor-typed-this")
	m.typeLine("h:0", "echo person-$((6*7))")
	m.waitFor("h:0", `person-42`, 10*time.Second)
	m.waitFor("h:proctor", `person-42`, 10*time.Second)

	// The wall, from inside the person's shell: no Python, no GPU, no network, no host path.
	// (Each marker is printed by arithmetic, so that the echo of the typed line never matches it.)
	m.typeLine("h:0", `for c in python3 python perl gcc; do command -v $c >/dev/null && echo HAS-$c-$((1)); done; echo NVIDIA-$(ls /dev | grep -c nvidia); wget -T 3 -q -O- http://10.0.0.1/ >/dev/null 2>&1 || echo NO-NET-$((1)); ls /var/lib/sealrun 2>/dev/null || echo NO-HOST-PATH-$((1)); echo PTS-$(ls /dev/pts | tr '\n' ,); echo WALL-$((2))-DONE`)
	m.waitFor("h:0", `WALL-2-DONE`, 30*time.Second)
	screen := m.screen("h:0")
	if has := regexp.MustCompile(`HAS-\w+-1`).FindString(screen); has != "" {
		t.Errorf("the person's shell has what an agent's has not: %s", has)
	}
	// Only its own terminal: the container's devpts is a new instance (no host pty to read).
	for _, want := range []string{"NVIDIA-0", "NO-NET-1", "NO-HOST-PATH-1", "PTS-0,ptmx,"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the wall from inside: no %s in\n%s", want, screen)
		}
	}

	// The client is killed: the shell goes on, and attaching again returns to it.
	if o, err := exec.Command("pkill", "-KILL", "-f", "attach "+id+" --socket").CombinedOutput(); err != nil {
		t.Fatalf("kill the attach client: %v %s", err, o)
	}
	m.foreground("h:0", "sh", 10*time.Second)
	// A killed client leaves the local terminal raw, as any would: the person types reset (^J
	// ends a line in a raw terminal), and types nothing more until it has run: keys typed
	// before it would be read raw, the next line's Enter a CR that ends no line.
	m.run("send-keys", "-t", "h:0", "-l", "stty sane; echo SANE-$((40+3))")
	m.run("send-keys", "-t", "h:0", "C-j")
	m.waitFor("h:0", `SANE-43`, 10*time.Second)
	m.typeLine("h:0", attachCmd)
	m.waitForNth("h:0", attached, 3, 30*time.Second)
	m.after("h:0", attached, 3, `(?s)person-42.*WALL-2-DONE`, 30*time.Second) // the same shell, replayed

	// Submit, then finalize the candidate.
	m.typeLine("h:0", `mkdir -p b1 && cp sealrun-bundle.json predict.py b1/ && runner submit b1`)
	cand := m.waitFor("h:0", `candidate ([0-9a-f]{12,})`, 60*time.Second)[1]
	m.typeLine("h:0", "runner finalize "+cand)
	rec := waitState(t, d, id, api.StateGraded)
	m.waitFor("h:0", `sealrun: the run ended`, 30*time.Second)
	m.waitFor("h:proctor", `sealrun: the run ended`, 30*time.Second)

	// The run verifies with its whole trajectory, the recording's segments among its bodies, as
	// the daemon keeps it and as gathered.
	results := t.TempDir()
	if out, err := exec.Command(cli, "results", "gather", id, results, "--socket", tb.cfg.Socket).CombinedOutput(); err != nil {
		t.Fatalf("sealrun results gather: %v\n%s", err, out)
	}
	for _, dir := range []string{rec.Dir, filepath.Join(results, id)} {
		vout, err := exec.Command(cli, "verify", filepath.Join(dir, "result.att.json"), "--key", "../attest/testdata/ed25519.pub", "--transcript", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(vout), "VALID") || !strings.Contains(string(vout), "intact") {
			t.Errorf("sealrun verify --transcript %s: %v\n%s", dir, err, vout)
		}
	}
	if segs, _ := filepath.Glob(filepath.Join(results, id, "terminal", "*.cast.gz")); len(segs) == 0 {
		t.Error("the gathered run has no recording")
	}
	cast, attaches := readHumanRun(t, rec.Dir)
	typed, shown := castStreams(t, cast)
	for _, want := range []string{briefLine + "\r", "runner finalize " + cand + "\r"} {
		if !strings.Contains(typed, want) {
			t.Errorf("the recording's input has no %q", want)
		}
	}
	for _, want := range []string{"trained", "person-42", "WALL-2-DONE", "# The task"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the recording's output has no %q", want)
		}
	}
	for _, want := range []string{`"m", "attach `, `"m", "detach `, `"m", "watch `} {
		if !bytes.Contains(cast, []byte(want)) {
			t.Errorf("the recording has no %s marker", want)
		}
	}
	if strings.Contains(typed+shown, "proctor-typed-this") {
		t.Error("what the proctor typed is in the recording")
	}
	// The recording replays in a browser, in the run's own page: its last screen first.
	br := browsertest.New(t)
	if err := br.Do(60*time.Second, chromedp.Navigate("file://"+filepath.Join(rec.Dir, "transcript.html")), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	last, err := browsertest.Eval[string](br, `document.getElementById('tscreen').textContent`)
	if err != nil || !strings.Contains(last, "runner finalize "+cand) {
		t.Errorf("the page's player shows last %q (%v); want the finalize", last, err)
	}
	br.Screenshot("human-run-last-screen")
	mid, err := browsertest.Eval[string](br, `(function(){var p=document.getElementById('tpos');p.value=String(Math.round(Number(p.max)/2));p.dispatchEvent(new Event('input'));return document.getElementById('tscreen').textContent;})()`)
	if err != nil || strings.Contains(mid, "runner finalize") {
		t.Errorf("the player halfway: %q (%v)", mid, err)
	}
	br.Screenshot("human-run-halfway")
	if errs := br.Errors(); len(errs) > 0 {
		t.Errorf("the page logged errors: %q", errs)
	}
	got := strings.Join(attaches, ",")
	for _, want := range []string{"attach,detach:detached,attach", "watch", "the connection dropped"} {
		if !strings.Contains(got, want) {
			t.Errorf("the audit log's attaches %s have no %s", got, want)
		}
	}
}

// castStreams reads an asciicast v2 recording: its header, then every event in time order; it
// returns what was typed and what was shown, each joined.
func castStreams(t *testing.T, cast []byte) (typed, shown string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(cast), "\n"), "\n")
	var h struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.Version != 2 {
		t.Fatalf("the recording's header %q: %v", lines[0], err)
	}
	last := 0.0
	var in, out strings.Builder
	for _, l := range lines[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("recording line %q: %v", l, err)
		}
		at, _ := ev[0].(float64)
		if at < last {
			t.Errorf("recording line %q goes back in time", l)
		}
		last = at
		switch ev[1] {
		case "i":
			in.WriteString(ev[2].(string))
		case "o":
			out.WriteString(ev[2].(string))
		}
	}
	return in.String(), out.String()
}

// readHumanRun reads a human run's recording back from its directory (each segment against its
// audit entry) and the attach entries of its audit log, as "event[:reason]".
func readHumanRun(t *testing.T, dir string) (cast []byte, attaches []string) {
	t.Helper()
	cast, _, as, err := transcripttest.Recording(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		s := a.Event
		if a.Reason != "" {
			s += ":" + a.Reason
		}
		attaches = append(attaches, s)
	}
	return cast, attaches
}

// TestHumanNeverAttached: a human run no person attaches to fails as theirs (never attached,
// scored 0), its clock started when human.start had passed. Meanwhile the attach API refuses what
// is malformed, hostile or too much, each with a clear answer, and the run goes on.
func TestHumanNeverAttached(t *testing.T) {
	tb := newTestbed(t)
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	tb.trackTOML = editTrack(t, tb.trackTOML, map[string]string{`wall = "3m"`: `wall = "25s"`, `reserve = "30s"`: `reserve = "5s"`, `call_limit = "1m"`: `call_limit = "10s"`})
	tb.trackTOML += "\n[human]\nstart = \"2s\"\n"
	d := startDaemon(t, tb, tb.executor())
	c := serveAPI(t, tb, d)
	ctx := t.Context()
	rec, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "track.toml", Agent: "human/bob", Seed: 1, Person: &api.Person{Account: "root"}})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	for agent, want := range map[string]string{"human/bob@high": "a person has no reasoning effort"} {
		if _, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "track.toml", Agent: agent, Seed: 2}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run --agent %s: %v; want %q", agent, err, want)
		}
	}
	plain := strings.Replace(tb.trackTOML, "\n[human]\nstart = \"2s\"\n", "", 1)
	if _, err := c.Submit(ctx, api.RunRequest{Track: plain, TrackName: "plain.toml", Agent: "human/bob", Seed: 3}); err == nil || !strings.Contains(err.Error(), "takes no human runs") {
		t.Errorf("a human run on a track without [human]: %v", err)
	}
	// An agent's run has no terminal, whatever its state.
	agentRun, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "track.toml", Agent: "openai/gpt-x@high", Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Attach(ctx, agentRun.ID, false, 0, 0); !api.IsCode(err, api.CodeNotHuman) || !strings.Contains(err.Error(), "not a person's") {
		t.Errorf("attach to an agent's run: %v", err)
	}
	c.Cancel(ctx, agentRun.ID)
	if _, err := c.Attach(ctx, "r-nope", true, 0, 0); !api.IsCode(err, api.CodeNotFound) || !strings.Contains(err.Error(), "no run r-nope") {
		t.Errorf("attach to no run: %v", err)
	}
	// The terminal opens once the run is served; until then, a clear answer.
	var w *client.Attachment
	for deadline := time.Now().Add(60 * time.Second); ; {
		if w, err = c.Attach(ctx, id, true, 0, 0); err == nil {
			break
		}
		if !api.IsCode(err, api.CodeNotYetRunning) || time.Now().After(deadline) {
			t.Fatalf("watch the run: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A proctor is not a person: watching starts no clock and counts as no attach.
	rawAttach := func(path string, headers map[string]string) string {
		t.Helper()
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", tb.cfg.Socket)
		}}}
		req, _ := http.NewRequest(http.MethodPost, "http://sealrund"+path, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for _, c := range []struct {
		path    string
		headers map[string]string
		want    string
	}{
		{"/v1/runs/" + id + "/attach", nil, "upgrades the connection to " + api.AttachProtocol},
		{"/v1/runs/" + id + "/attach?cols=0&rows=9", map[string]string{"Upgrade": api.AttachProtocol, "Connection": "Upgrade"}, "each a whole number 1 to 4096"},
		{"/v1/runs/" + id + "/attach?cols=x&rows=" + strings.Repeat("9", 5000), map[string]string{"Upgrade": api.AttachProtocol, "Connection": "Upgrade"}, "each a whole number 1 to 4096"},
	} {
		if got := rawAttach(c.path, c.headers); !strings.Contains(got, c.want) {
			t.Errorf("POST %.60s: %s; want %q", c.path, got, c.want)
		}
	}
	// A thousand attaches at once: every one answered, each attached or refused with why.
	errs := make(chan error, 1000)
	for range 1000 {
		go func() {
			a, err := c.Attach(ctx, id, true, 0, 0)
			if err == nil {
				a.Close()
			}
			errs <- err
		}()
	}
	refused := 0
	for range 1000 {
		if err := <-errs; err != nil {
			refused++
			if !strings.Contains(err.Error(), "watch this run; one must leave first") && !strings.Contains(err.Error(), "attaches at once") && !strings.Contains(err.Error(), "(uid 0) holds 8 attaches already") {
				t.Errorf("an attach among a thousand: %v", err)
			}
		}
	}
	t.Logf("1000 attaches at once: %d refused", refused)
	// Each closed attach gives its slot back as its handler ends: wait for that (only w's held),
	// so that what follows is not refused for slots the burst still holds.
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * 10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d.x.sessions.mu.Lock()
		held := d.x.sessions.attaches
		d.x.sessions.mu.Unlock()
		if held <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the burst, %d attach slots are still held", held)
		}
	}
	// Hostile frames end the attachment that sent them, with why.
	for _, c := range []struct {
		frame []byte
		want  string
	}{
		{[]byte{'i', 0xff, 0xff, 0xff, 0xff}, "at most 65536"},
		{[]byte{'z', 0, 0, 0, 1, 'x'}, "unknown type"},
		{[]byte{'r', 0, 0, 0, 3, '0', 'x', '0'}, ""}, // a proctor's resize is theirs: ignored
	} {
		conn, br := rawUpgrade(t, tb.cfg.Socket, id)
		conn.Write(c.frame)
		if c.want == "" {
			conn.Close()
			continue
		}
		ended := ""
		for {
			typ, p, err := api.ReadFrame(br)
			if err != nil {
				t.Errorf("frame %q: the connection ended without saying why: %v", c.frame, err)
				break
			}
			if typ == api.FrameEnd {
				ended = string(p)
				break
			}
		}
		if !strings.Contains(ended, c.want) {
			t.Errorf("frame %q: the attachment ended %q; want %q", c.frame, ended, c.want)
		}
		conn.Close()
	}
	w.Close()
	r := waitState(t, d, id, api.StateFailed)
	if !strings.Contains(r.Reason, "never attached") {
		t.Errorf("the run failed for %q; want never attached", r.Reason)
	}
	var rep report.Exam
	json.Unmarshal(mustRead(t, filepath.Join(r.Dir, "report.json")), &rep)
	if rep.Status != outcome.Failed || rep.Score.Passed != 0 {
		t.Errorf("report.json: %+v", rep)
	}
	if _, attaches := readHumanRun(t, r.Dir); strings.Contains(strings.Join(attaches, ","), "attach,") {
		t.Errorf("a person attached: %v", attaches)
	}
	if _, err := c.Attach(ctx, id, false, 0, 0); !api.IsCode(err, api.CodeRunEnded) || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("attach to an ended run: %v", err)
	}
}

// rawUpgrade attaches as a proctor by hand (the request and the 101 written and read here), so
// that a test can send what sealrun attach never would.
func rawUpgrade(t *testing.T, socket, id string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/runs/%s/attach?watch=1 HTTP/1.1\r\nHost: sealrund\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", id, api.AttachProtocol)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade by hand: %v %v", resp, err)
	}
	return conn, br
}

// TestHumanKill9MidSession: sealrund killed while a person is at the terminal is the host's
// fault: the person's client is told the connection went, and after the restart the run is
// invalid (daemon restart) with an attestation that verifies and its recording up to the kill
// intact, and its rerun waits for the person again.
func TestHumanKill9MidSession(t *testing.T) {
	tb := newTestbed(t)
	tb.trackTOML += "\n[human]\nstart = \"2m\"\n"
	var err error
	if tb.track, err = policy.Parse("track.toml", []byte(tb.trackTOML)); err != nil {
		t.Fatal(err)
	}
	rd := newRealDaemon(t, tb)
	rd.start()
	id := strings.TrimSpace(rd.sealrun("run", "--track", rd.trackF, "--agent", "human/alice", "--person", "root", "--seed", "1", "--detach"))
	c := client.New(rd.sock)
	var a *client.Attachment
	rd.waitFor("the run's terminal", func() bool { a, err = c.Attach(t.Context(), id, false, 100, 30); return err == nil })
	defer a.Close()
	seen := ""
	next := func(want string) {
		t.Helper()
		for !strings.Contains(seen, want) {
			p, ended, err := a.Next()
			if err != nil || ended != "" {
				t.Fatalf("the terminal ended (%q, %v) before showing %q: %q", ended, err, want, seen)
			}
			seen += string(p)
		}
	}
	next("[sealrun] ~ $")
	a.Input([]byte("echo before-$((20+1))-the-kill\r"))
	next("before-21-the-kill")
	// The kill comes once the recording holds the marker (a segment is flushed every 2 s).
	dir := rd.show(id).Dir
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * 30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if cast, _, _, err := transcripttest.Recording(dir); err == nil && bytes.Contains(cast, []byte("before-21-the-kill")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recording never held what the terminal showed before the kill")
		}
	}
	rd.kill9()
	gone := make(chan struct{})
	go func() { // what was still on its way, then the end
		defer close(gone)
		for {
			if _, ended, err := a.Next(); err != nil || ended != "" {
				return
			}
		}
	}()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Error("the person's connection outlived sealrund")
	}
	rd.start()
	r := rd.show(id)
	if r.State != api.StateInvalid || r.Reason != "daemon restart" || r.RerunBy == "" {
		t.Fatalf("killed mid-session, after the restart: %+v", r)
	}
	rd.verify(r, "mid-session")
	if _, shown := castStreams(t, mustCast(t, r.Dir)); !strings.Contains(shown, "before-21-the-kill") {
		t.Errorf("the recording up to the kill lost what was shown: %q", shown)
	}
	rerun := rd.show(r.RerunBy)
	if rerun.RerunOf != id || rerun.Agent != "human/alice" {
		t.Errorf("the rerun: %+v", rerun)
	}
	rd.sealrun("cancel", rerun.ID)
	rd.waitFor("the rerun's end", func() bool { return rd.show(rerun.ID).Final() })
}

func mustCast(t *testing.T, dir string) []byte {
	t.Helper()
	cast, _ := readHumanRun(t, dir)
	if len(cast) == 0 {
		t.Fatalf("%s has no recording", dir)
	}
	return cast
}
