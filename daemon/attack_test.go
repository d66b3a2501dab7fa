package daemon

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/images/registrytest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// attackRow is one line of the attack table (e2e/hostile's Row, plus the host's own checks).
type attackRow struct {
	Attack   string `json:"attack"`
	Role     string `json:"role"`
	Expected string `json:"expected"`
	Observed string `json:"observed"`
	Reason   string `json:"reason"`
	Escaped  bool   `json:"escaped"`
}

// hostileBed is what both attack tests share: the host's listeners and secrets, and the hostile
// image (e2e/hostile, built by buildah, pushed to a registry, pulled by digest) pinned in the
// track as its scaffold.
type hostileBed struct {
	tb                          *testbed
	track                       *policy.Track
	trackText, ref              string
	examSecret, keyPEM, provKey string
	accepted                    *atomic.Int64
}

// editTrack replaces, once each, the strings a test changes in a track's text; one the text does
// not hold fails the test (the track it meant to edit has changed).
func editTrack(t testing.TB, text string, edits map[string]string) string {
	t.Helper()
	for old, repl := range edits {
		if !strings.Contains(text, old) {
			t.Fatalf("the track has no %q to edit", old)
		}
		text = strings.Replace(text, old, repl, 1)
	}
	return text
}

// newHostileBed readies tb for the attack suite.
func newHostileBed(t *testing.T, tb *testbed) *hostileBed {
	base := tb.base

	// Secrets the run must never see: a hidden question's answer, the signing key, the provider key.
	secret := func(prefix string) string {
		b := make([]byte, 12)
		rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	examSecret := secret("EXAMSECRET")
	var docs bytes.Buffer
	exams.WriteDocuments(&docs, exams.Synthesize(5, 12))
	qs, err := exams.ReadDocuments("synth", &docs)
	if err != nil {
		t.Fatal(err)
	}
	qs = append(qs, exams.Question{ID: "secret", Prefix: []byte("The password is "), Answer: []byte(examSecret)})
	examFile := filepath.Join(t.TempDir(), "exam")
	examSHA, err := exams.WriteFile(examFile, qs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	addContent(t, tb.state, mustRead(t, examFile))
	provKey := secret("sk-attack-")
	os.WriteFile(tb.cfg.Providers["openai"].KeyFile, []byte(provKey+"\n"), 0o600)
	keyPEM := strings.Split(string(mustRead(t, "../attest/testdata/ed25519.key")), "\n")[1]

	trackText := editTrack(t, tb.trackTOML, map[string]string{
		string(tb.track.Exam.SHA256): examSHA, "questions = 12": "questions = 13", `workspace = "64MiB"`: `workspace = "128MiB"`,
	})
	// The compute attacks must end before the reserve window opens, where compute is refused.
	// Alone they take 34 s here and the submissions 36 s; beside the rest of `go test ./...` on a
	// fresh machine of this project's size, 1m24s and more than 2m30s; under gVisor they once
	// reached 2m49s. So the window opens at 4m and lasts 6m; the run ends when the suite
	// finalizes, and never waits for its window: the attacks on the window are a run of their
	// own (windowTrack), beside this one.
	open := 4 * time.Minute
	reserve := 6 * time.Minute
	trackText = editTrack(t, trackText, map[string]string{
		`wall = "3m"`:     fmt.Sprintf(`wall = "%s"`, time.Duration(testenv.Slow())*(open+reserve)),
		`reserve = "30s"`: fmt.Sprintf(`reserve = "%s"`, time.Duration(testenv.Slow())*reserve),
	})
	track, err := policy.Parse("attack.toml", []byte(trackText))
	if err != nil {
		t.Fatal(err)
	}

	// What the host opens for the run to find: listeners on every host address, a UDP echo, a
	// unix socket standing for the admin socket. Any accepted connection is an escape.
	var accepted atomic.Int64
	var tcp, udp []string
	listen := func(network, addr string) string {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("listen %s %s: %v (not tried)", network, addr, err)
			return ""
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		return l.Addr().String()
	}
	anyAddr := listen("tcp", "0.0.0.0:0")
	_, anyPort, _ := net.SplitHostPort(anyAddr)
	for _, a := range hostAddrs(t) {
		tcp = append(tcp, net.JoinHostPort(a, anyPort))
	}
	for _, a := range []string{"127.0.0.1:0", "[::1]:0"} {
		if s := listen("tcp", a); s != "" {
			tcp = append(tcp, s)
		}
	}
	if pc, err := net.ListenPacket("udp", "0.0.0.0:0"); err == nil {
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				accepted.Add(1)
				pc.WriteTo(buf[:n], from)
			}
		}()
		_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
		for _, a := range hostAddrs(t) {
			udp = append(udp, net.JoinHostPort(a, port))
		}
	}
	adminSock := filepath.Join(base, "sealrun.sock")
	listen("unix", adminSock)

	imagesDir := filepath.Join(testenv.LocalImages(t).State, "images")
	cfg := map[string]any{
		"markers": map[string]string{"the hidden exam's answer": masked(examSecret), "the signing key": masked(keyPEM), "the provider key": masked(provKey)},
		"host_paths": []string{api.ContentPath(tb.state, digest.Hex(examSHA)), abs(t, "../attest/testdata/ed25519.key"), tb.cfg.Providers["openai"].KeyFile,
			tb.state, filepath.Join(tb.state, "runs"), filepath.Join(tb.state, "journal.jsonl"), imagesDir, "/var/lib/sealrun", "/etc/shadow.sealrun-host-only"},
		"write_paths": []string{tb.state, imagesDir},
		"tcp":         tcp,
		"udp":         udp,
		"unix":        []string{adminSock, "/run/sealrun/sealrun.sock"},
		"host_prefixes": []string{filepath.Join(tb.state, "content"), filepath.Join(tb.state, "journal.jsonl"), abs(t, "../attest/testdata"),
			tb.cfg.Providers["openai"].KeyFile, filepath.Join(tb.state, "kits"), tb.state, imagesDir, filepath.Dir(tb.cfg.Runner)},
		"workspace_bytes": track.Resources.Workspace,
		"memory_bytes":    track.Resources.Memory,
		"runtimes": map[string]string{"controller": tb.h.RuntimeFor(sandbox.RoleController).Kind, "runner": tb.h.RuntimeFor(sandbox.RoleRunner).Kind,
			"grader": tb.h.RuntimeFor(sandbox.RoleGrader).Kind},
	}
	os.WriteFile("/etc/shadow.sealrun-host-only", []byte("host only\n"), 0o600)
	defer os.Remove("/etc/shadow.sealrun-host-only")
	// The hostile scaffold is an ordinary user image: built by buildah from a Containerfile,
	// pushed to a real registry, pinned and pulled by digest, its command and labels its own.
	b, _ := json.MarshalIndent(cfg, "", "  ")
	reg := registrytest.Start(t)
	ctxDir, configSHA := userImageContext(t, "hostile", "1", "etc/hostile/attack.json",
		map[string][]byte{"usr/bin/hostile": mustRead(t, sandboxtest.Static(t, "e2e/hostile")), "etc/hostile/attack.json": b}, `["/usr/bin/hostile", "controller"]`)
	ref, trackText := tb.pullScaffold(t, reg, trackText, ctxDir, "attack/hostile:1", "hostile", "1", configSHA)
	if track, err = policy.Parse("attack.toml", []byte(trackText)); err != nil {
		t.Fatal(err)
	}
	return &hostileBed{tb: tb, track: track, trackText: trackText, ref: ref, examSecret: examSecret, keyPEM: keyPEM, provKey: provKey, accepted: &accepted}
}

// windowTrack is the attack track for the hostile scaffold's window run (agent effort "window"):
// its reserve window opens 45 s after the clock starts, which leaves the run's start room under
// load (the scaffold then waits until 6 s before the window), and lasts 2 minutes, for a bundle
// submitted inside it, promoted and finalized; its call limit is 30 s.
func (hb *hostileBed) windowTrack(t *testing.T) *policy.Track {
	open, reserve := time.Duration(testenv.Slow())*45*time.Second, time.Duration(testenv.Slow())*2*time.Minute
	b := hb.track.Budget
	text := editTrack(t, hb.trackText, map[string]string{
		fmt.Sprintf(`wall = "%s"`, b.Wall):       fmt.Sprintf(`wall = "%s"`, open+reserve),
		fmt.Sprintf(`reserve = "%s"`, b.Reserve): fmt.Sprintf(`reserve = "%s"`, reserve),
		// Within the 45 s before the window, and longer than the 6 s the straddling call gets:
		// its limit is the window's, not this.
		`call_limit = "1m"`: fmt.Sprintf(`call_limit = "%s"`, open*2/3),
	})
	track, err := policy.Parse("attack-window.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return track
}

// judgeWindow reads the window run's rows (its transcript): the calls timed against the reserve
// window and the bundle submitted inside it, each there and none escaped, and the run graded.
func judgeWindow(t *testing.T, dir, status string) {
	t.Helper()
	transcript := string(mustRead(t, filepath.Join(dir, "transcript.log")))
	got := map[string]attackRow{}
	for _, l := range strings.Split(transcript, "\n") {
		var r attackRow
		if j, ok := strings.CutPrefix(l, "ROW "); ok && json.Unmarshal([]byte(j), &r) == nil {
			got[r.Attack] = r
		}
	}
	var tbl strings.Builder
	for _, a := range []string{"a call started 6 s before the reserve window, asking for 120 s", "a call started inside the reserve window", "submit a bundle inside the reserve window"} {
		r, ok := got[a]
		switch {
		case !ok:
			t.Errorf("the window run reported no row %q\ntranscript:\n%s", a, transcript)
		case r.Escaped:
			t.Errorf("escape in the window run: %s (%s): expected %s, observed %s", r.Attack, r.Role, r.Expected, r.Observed)
		}
		fmt.Fprintf(&tbl, "%s\t%s\t%s\t%s\n", a, r.Role, r.Expected, r.Observed)
	}
	t.Logf("the window run's rows (%s):\n%s", regexp.MustCompile(`hostile: window attacks took \S+`).FindString(transcript), tbl.String())
	if status != api.StateGraded {
		t.Errorf("the hostile window run ended %s; want graded", status)
	}
}

// TestHostileScaffold runs a whole sealed run whose scaffold is e2e/hostile: from the controller,
// from a compute call (runner container) and from submitted bundles (grader container, during
// validation and the hidden grading) it tries every attack of the catalogue. The host side adds
// what only it can see (did a listener accept, does a stored candidate hold a secret, did a
// call log outgrow its cap). The table is printed; any escape fails the test.
func TestHostileScaffold(t *testing.T) {
	t.Parallel() // most of its time is the run waiting for its reserve window: the two attack runs wait together
	tb := newTestbed(t)
	hb := newHostileBed(t, tb)
	x := &Executor{Cfg: tb.cfg, Host: tb.h, Store: tb.store, Signer: tb.signer, Version: "test", Commit: "test", Journal: tb.journal}
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	id := "run-hostile"
	start := time.Now()
	// Beside it, the attacks on the reserve window: a run of their own, whose window opens soon.
	windowTrack := hb.windowTrack(t)
	windowAgent, _ := controller.ParseAgent("openai/gpt-x@window")
	var wg sync.WaitGroup
	var wout *Outcome
	var werr error
	wg.Go(func() {
		if wout, werr = x.Execute(context.Background(), RunSpec{ID: id + "-window", Track: windowTrack, Agent: windowAgent, Seed: 1, Queued: time.Now()}); werr == nil {
			t.Logf("%s-window: %s %q in %s", id, wout.Status, wout.Reason, time.Since(start).Round(time.Second))
		}
	})
	out, err := x.Execute(context.Background(), RunSpec{ID: id, Track: hb.track, Agent: agent, Seed: 1, Queued: time.Now()})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tb.state, "runs", id)
	t.Logf("%s: %s %q in %s", id, out.Status, out.Reason, time.Since(start).Round(time.Second))
	hb.judge(t, dir, string(mustRead(t, filepath.Join(dir, "transcript.log"))), string(out.Status), false)
	if werr != nil {
		t.Fatalf("the window run: %v", werr)
	}
	judgeWindow(t, filepath.Join(tb.state, "runs", id+"-window"), string(wout.Status))
}

// judge reads the attack table of the run in dir: the rows from inside (transcript: what the
// controller's attacks printed, the run's transcript or, for a person, their terminal), the
// bundles' stderr, and the host's own checks. It fails the test on any escape or on a role that
// did not run the suite.
func (hb *hostileBed) judge(t *testing.T, dir, transcript, status string, human bool) {
	t.Helper()
	tb := hb.tb
	examSecret, keyPEM, provKey, accepted := hb.examSecret, hb.keyPEM, hb.provKey, hb.accepted
	// The rows from inside: the transcript (controller, runner) and the bundles' stderr.
	var rows []attackRow
	seen := map[string]int{}
	add := func(r attackRow) {
		k := r.Role + "\x00" + r.Attack
		if i, ok := seen[k]; ok { // the grader role runs in several containers: keep the worst
			if r.Escaped {
				rows[i] = r
			}
			return
		}
		seen[k] = len(rows)
		rows = append(rows, r)
	}
	for _, l := range strings.Split(transcript, "\n") {
		if j, ok := strings.CutPrefix(l, "ROW "); ok {
			var r attackRow
			if json.Unmarshal([]byte(j), &r) == nil {
				add(r)
			}
		}
	}
	var stderrs []string // the grading logs: every container's stderr
	filepath.Walk(filepath.Join(dir, "grading"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".stderr") {
			stderrs = append(stderrs, p)
		}
		return nil
	})
	for _, p := range stderrs {
		for _, l := range strings.Split(string(mustRead(t, p)), "\n") {
			var r attackRow
			if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &r) == nil && r.Attack != "" {
				add(r)
			}
		}
	}

	// The host's side.
	host := func(attack, expected, observed, reason string, escaped bool) {
		add(attackRow{Attack: attack, Role: "host", Expected: expected, Observed: observed, Reason: reason, Escaped: escaped})
	}
	host("connections accepted by the host's listeners (tcp, udp, unix)", "0", fmt.Sprint(accepted.Load()), "no route from any container to the host", accepted.Load() != 0)
	var candFound []string
	cands, _ := filepath.Glob(filepath.Join(dir, "candidates", "*.tar.gz"))
	for _, c := range cands {
		for _, s := range []string{examSecret, keyPEM, provKey} {
			if tarContains(t, c, s) {
				candFound = append(candFound, filepath.Base(c))
			}
		}
	}
	host(fmt.Sprintf("secrets in the %d stored candidates", len(cands)), "none", fmt.Sprint(len(candFound)), "nothing a container reads can hold them", len(candFound) > 0)
	var bigLogs []string
	logs, _ := filepath.Glob(filepath.Join(dir, "calls", "*.log"))
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.Size() > 64<<20+64<<10 {
			bigLogs = append(bigLogs, fmt.Sprintf("%s %d MiB", filepath.Base(l), fi.Size()>>20))
		}
	}
	host(fmt.Sprintf("call logs over the 64 MiB cap (%d calls)", len(logs)), "none", strings.Join(append(bigLogs, "none")[:max(1, len(bigLogs))], ", "), "runner.WithLogCap", len(bigLogs) > 0)
	if strings.Contains(transcript, examSecret) || strings.Contains(transcript, provKey) {
		host("secrets in the transcript", "none", "FOUND", "", true)
	}
	// Hostile bundles, as the grader judged them (the per-question logs of their validation).
	validation := validations(t, dir, transcript)
	for _, mode := range []struct {
		mode, name, outcome, reason string
	}{
		{"shift", "extra lines to shift answers", "malformed", "a response for a later seq is malformed: the question fails, a fresh container answers the rest"},
		{"slow", "sleeps past the question limit", "timeout", "the question limit kills the container; the next question gets a fresh one"},
	} {
		got := questionOutcomes(t, dir, validation[mode.mode])
		want := "1:wrong 2:" + mode.outcome + " 3:wrong 4:wrong 5:wrong 6:wrong"
		host("bundle: "+mode.name, "question 2 "+mode.outcome+", the others judged", got, mode.reason, got != want)
	}
	// The bombs bundle: contained under runc (the fork fails, the child is OOM-killed, the
	// questions are answered); under gVisor its container ends at the pids limit each time it
	// starts, and the grading says so and goes on.
	if tb.h.RuntimeFor(sandbox.RoleGrader).Kind == sandbox.KindRunsc {
		// gVisor fails some forks at the limit (ENOMEM) and ends at others; then the memory
		// bomb's child takes the sandbox with it. Either way the feedback names the limit.
		note := bundleNote(transcript, "b-bomb")
		if i := strings.Index(note, "validation "); i >= 0 {
			note = note[i:]
		}
		named := strings.Contains(note, "ended at its limit of processes and threads") || strings.Contains(note, "killed: out of memory")
		host("bundle: fork and memory bombs before answering", "the container ends at a limit, said so; the grading goes on (gVisor)", note,
			"gVisor's sandbox ends at the pids limit on its cgroup or by the OOM killer; the grader counts a crash and starts the next one", !named)
	} else {
		got := questionOutcomes(t, dir, validation["bomb"])
		want := "1:wrong 2:wrong 3:wrong 4:wrong 5:wrong 6:wrong"
		host("bundle: fork and memory bombs before answering", "contained, every question judged", got, "the pids and memory limits of the grader container", got != want)
	}
	diff := detectDiff(t, dir, validation["attack"])
	host("bundle: tell the hidden grading from validation", "only by the requests", diff,
		"same image, limits, environment and mounts; only the questions differ (their count and prefixes)", !strings.Contains(diff, "differ: none"))
	// The gateway refused and audited the hostile requests.
	if !human { // a person's run has no gateway unless the track gives one
		audit := string(mustRead(t, filepath.Join(dir, "audit.jsonl")))
		host("gateway refusals in the audit log", "each refused request audited", fmt.Sprint(strings.Count(audit, `"refused`)), "controller/GATEWAY.md", !strings.Contains(audit, "refus"))
	}

	// Every role ran its share.
	per := map[string]int{}
	var escaped []string
	for _, r := range rows {
		per[r.Role]++
		if r.Escaped {
			escaped = append(escaped, fmt.Sprintf("%s (%s): expected %s, observed %s", r.Attack, r.Role, r.Expected, r.Observed))
		}
	}
	escapes := len(escaped)
	if escapes > 0 { // first and whole, before the table (a CI log keeps a failure's start)
		t.Errorf("%d escapes:\n%s", escapes, strings.Join(escaped, "\n"))
	}
	sort.SliceStable(rows, func(i, j int) bool { return roleOrder(rows[i].Role) < roleOrder(rows[j].Role) })
	var tbl strings.Builder
	w := tabwriter.NewWriter(&tbl, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ATTACK\tROLE\tEXPECTED\tOBSERVED\tREASON\t")
	for _, r := range rows {
		flag := ""
		if r.Escaped {
			flag = "ESCAPE "
		}
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\t%s\t\n", flag, cut(r.Attack, 70), r.Role, cut(r.Expected, 50), cut(r.Observed, 90), cut(r.Reason, 80))
	}
	w.Flush()
	took := strings.Join(regexp.MustCompile(`hostile: (compute )?attacks took \S+`).FindAllString(transcript, 2), "; ")
	t.Logf("attack table: %d attacks (%v), %d escapes (%s)\n%s", len(rows), per, escapes, took, tbl.String())
	if d := os.Getenv("SEALRUN_ATTACK_TABLE"); d != "" { // the table, and every row in full
		var full bytes.Buffer
		enc := json.NewEncoder(&full)
		for _, r := range rows {
			enc.Encode(r)
		}
		os.WriteFile(d, []byte(tbl.String()), 0o644)
		os.WriteFile(d+".jsonl", full.Bytes(), 0o644)
	}
	for _, r := range []string{"controller", "runner", "grader"} {
		if per[r] < 30 {
			t.Errorf("the %s role reported %d attacks; the suite did not run there\ntranscript:\n%s", r, per[r], transcript)
		}
	}
	if status != api.StateGraded {
		t.Errorf("the hostile run ended %s; want graded: attacks must not stop the run", status)
	}
}

func roleOrder(r string) int {
	return map[string]int{"controller": 0, "runner": 1, "grader": 2, "host": 3}[r]
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func masked(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] ^= 0x5a
	}
	return hex.EncodeToString(b)
}

func abs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// hostAddrs are this machine's addresses on its interfaces other than lo.
func hostAddrs(t *testing.T) []string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 || strings.HasPrefix(i.Name, "sr") || strings.HasPrefix(i.Name, "veth") {
			continue
		}
		as, _ := i.Addrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				out = append(out, n.IP.String())
			}
		}
	}
	return out
}

func tarContains(t *testing.T, path, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		if _, err := tr.Next(); err != nil {
			return false
		}
		b, _ := io.ReadAll(tr)
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
}

// validations maps each hostile bundle (by mode) to the number of its validation: the grader
// numbers validations in the order new candidates were packed (history.jsonl), and the
// transcript says which candidate each bundle became.
func validations(t *testing.T, dir, transcript string) map[string]int {
	order := map[string]int{}
	for _, l := range strings.Split(string(mustRead(t, filepath.Join(dir, "history.jsonl"))), "\n") {
		var e struct{ Kind, Candidate string }
		if json.Unmarshal([]byte(l), &e) == nil && e.Kind == "submit" && e.Candidate != "" {
			if _, ok := order[e.Candidate]; !ok {
				order[e.Candidate] = len(order) + 1
			}
		}
	}
	out := map[string]int{}
	for _, l := range strings.Split(transcript, "\n") {
		var mode, id string
		if n, _ := fmt.Sscanf(l, "hostile: bundle %s is candidate %s", &mode, &id); n == 2 {
			for c, k := range order {
				if strings.HasPrefix(strings.TrimPrefix(c, "sha256:"), id) {
					out[mode] = k
				}
			}
		}
	}
	return out
}

// bundleNote is what the runner told the hostile scaffold when it submitted the bundle of dir:
// the lines after "hostile: submit dir" up to the next of the scaffold's own lines.
func bundleNote(transcript, dir string) string {
	var out []string
	in := false
	for _, l := range strings.Split(transcript, "\n") {
		switch {
		case strings.HasPrefix(l, "hostile: submit "+dir+":"):
			in = true
		case in && strings.HasPrefix(l, "hostile: "):
			return strings.Join(out, " ")
		case in && strings.TrimSpace(l) != "":
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " ")
}

// questionOutcomes reads the per-question log of the n-th validation of the run:
// "1:wrong 2:malformed ...".
func questionOutcomes(t *testing.T, dir string, n int) string {
	b, err := os.ReadFile(filepath.Join(dir, "grading", fmt.Sprintf("validation-%d", n), "validation.jsonl"))
	if err != nil {
		return fmt.Sprintf("no log of validation %d: %v", n, err)
	}
	var outcomes []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var q struct {
			Index   int    `json:"index"`
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal([]byte(l), &q) == nil {
			outcomes = append(outcomes, fmt.Sprintf("%d:%s", q.Index, q.Outcome))
		}
	}
	return strings.Join(outcomes, " ")
}

// detectDiff compares what the attack bundle saw of its container in validation and in the
// hidden grading (its DETECT lines): what differs is all a bundle can go by.
func detectDiff(t *testing.T, dir string, n int) string {
	read := func(p string) (map[string]string, int) {
		facts, requests := map[string]string{}, 0
		for _, l := range strings.Split(string(readOr(p)), "\n") {
			rest, ok := strings.CutPrefix(l, "DETECT ")
			if !ok {
				continue
			}
			if strings.HasPrefix(rest, "request ") {
				requests++
				continue
			}
			k, v, _ := strings.Cut(rest, "=")
			facts[k] = v
		}
		return facts, requests
	}
	val, nv := read(filepath.Join(dir, "grading", fmt.Sprintf("validation-%d", n), "validation-1.stderr"))
	hid, nh := read(filepath.Join(dir, "grading", "hidden", "answers-1.stderr"))
	if len(val) == 0 || len(hid) == 0 {
		return fmt.Sprintf("NO DETECT LINES (validation %d, hidden %d)", len(val), len(hid))
	}
	var same, differ []string
	for _, k := range sortedKeys(val) {
		if val[k] == hid[k] {
			same = append(same, k)
		} else {
			differ = append(differ, k)
		}
	}
	return fmt.Sprintf("same %s; differ: %s; requests %d (validation) vs %d (exam)", strings.Join(same, ","), strings.Join(append(differ, "none")[:max(1, len(differ))], ","), nv, nh)
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestHostileHuman is the same attack suite typed by a person: a human run whose controller image
// (human.image) is the hostile image, attached through sealrund's admin socket, where the person
// runs e2e/hostile from their shell. Everything it tries from the controller, from a compute call
// and from its bundles is judged as for a scaffold, its rows read from the person's terminal as
// the recording kept it: the wall holds from inside an attached shell exactly as from a
// scaffold's process.
func TestHostileHuman(t *testing.T) {
	t.Parallel() // most of its time is the run waiting for its reserve window: the two attack runs wait together
	tb := newTestbed(t)
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	hb := newHostileBed(t, tb)
	trackText := hb.trackText + fmt.Sprintf("\n[human]\nstart = \"1m\"\nimage = %q\n", hb.ref)
	x := &Executor{Cfg: tb.cfg, Host: tb.h, Store: tb.store, Signer: tb.signer, Version: "test", Commit: "test", Journal: tb.journal}
	d := startDaemon(t, tb, x)
	c := serveAPI(t, tb, d)
	r, err := d.SubmitRequest(api.RunRequest{Track: trackText, TrackName: "attack.toml", Agent: "human/mallory", Seed: 1, Person: &api.Person{Account: "root"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID
	var a *client.Attachment
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * 2 * time.Minute); ; time.Sleep(time.Second) {
		if a, err = c.Attach(t.Context(), id, false, 200, 50); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the human run's terminal did not open: %v", err)
		}
	}
	defer a.Close()
	shown := make(chan string, 1)
	prompt, once := make(chan struct{}), sync.Once{}
	go func() { // what the terminal shows, until the run ends it
		var b strings.Builder
		for {
			p, ended, err := a.Next()
			b.Write(p)
			// As a terminal does, it answers the cursor position report busybox's line editor
			// asks for at each prompt (and waits for, reading what is typed meanwhile as the answer).
			if bytes.Contains(p, []byte("\x1b[6n")) {
				a.Input([]byte("\x1b[50;20R"))
				once.Do(func() { close(prompt) })
			}
			if err != nil || ended != "" {
				shown <- b.String()
				return
			}
		}
	}()
	select {
	case <-prompt:
	case <-time.After(time.Minute):
		t.Fatal("no prompt in the person's shell")
	}
	start := time.Now()
	a.Input([]byte("cd /workspace && /usr/bin/hostile controller; echo HOSTILE-EXIT-$?\r"))
	var rec api.Record
	for deadline := time.Now().Add(time.Duration(testenv.Slow()) * 16 * time.Minute); ; time.Sleep(2 * time.Second) {
		if rec, _ = d.Run(id); rec.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hostile person's run has not ended: %+v", rec)
		}
	}
	t.Logf("%s: %s %q in %s", id, rec.State, rec.Reason, time.Since(start).Round(time.Second))
	select {
	case <-shown:
	case <-time.After(30 * time.Second):
		t.Error("the person's terminal stayed open after the run ended")
	}
	// The rows as the recording kept them (what a reader of the published run sees), the
	// terminal's line endings made plain.
	_, screen := castStreams(t, mustCast(t, rec.Dir))
	hb.judge(t, rec.Dir, strings.ReplaceAll(screen, "\r\n", "\n"), rec.State, true)
	if t.Failed() {
		t.Logf("the person's terminal showed (%d bytes; its start):\n%s", len(screen), cut(screen, 4000))
	}
}
