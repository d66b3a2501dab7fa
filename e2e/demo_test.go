package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/demo"
	"github.com/sealrun/sealrun/export/exporttest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/publish/publishtest"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
	"github.com/sealrun/sealrun/scaffolds"
)

// TestDemo runs the shortened demo (one seed, the quick budget) the way make demo runs the full
// one: the real sealrun binary, its in-process sealrund, real containers, the ARI kit's starter
// trained through runner, real grading and a signed attestation. Then it checks what a reader of
// the demo would: the attestation verifies with every file, the report's score is the pass
// vector's count, README's reader block and kits/KIT.md's hash recipe run as written (docblocks.go),
// the scripted agent's calls are in the audit log in order, and nothing is left behind.
func TestDemo(t *testing.T) {
	sealrun, state, out := runDemo(t)
	for _, want := range []string{"1/7 images", "contamination check: 0 of 12", "seed 1: VALID", "scripted-demo 1.0.0 · no model (scripted)", "Where the reports are:", "transcript.html (what the agent did: open it first)", "setup ", "amendment: seed 1 noted (sealrun amend)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`seed 1 \((r-[0-9a-z-]+), graded\): (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no graded run in the demo's output")
	}
	dir := m[2]
	trackFile := filepath.Join(state, "demo", "track.toml")
	track, err := policy.Load(trackFile)
	if err != nil {
		t.Fatal(err)
	}

	// The report's score is the pass vector's count.
	var rep report.Exam
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if strings.Count(rep.PassVector, "1") != rep.Score.Passed || len(rep.PassVector) != rep.Score.Questions || rep.Score.Questions != 12 {
		t.Errorf("report score %+v, pass vector %q", rep.Score, rep.PassVector)
	}

	// The attestation verifies with every file, by the CLI a verifier runs.
	bundle := filepath.Join(dir, "candidates", string(rep.Candidate.ID.Hex())+".tar.gz")
	v, err := exec.Command(sealrun, "verify", filepath.Join(dir, "result.att.json"), "--key", filepath.Join(state, "demo", "keys", "sealrun.pub"),
		"--bundle", bundle, "--report", filepath.Join(dir, "report.json"), "--audit", filepath.Join(dir, "audit.jsonl"), "--track", trackFile).CombinedOutput()
	if err != nil || !strings.Contains(string(v), "VALID") {
		t.Errorf("sealrun verify with every file: %v\n%s", err, v)
	}

	// The demo's publication checks as a reader checks it: README's reader block as written, in a
	// directory where site/ is the publication and sealrun.pub the operator's key, RUN a run of it.
	work := t.TempDir()
	os.Symlink(filepath.Join(state, "demo", "publication"), filepath.Join(work, "site"))
	os.Symlink(filepath.Join(state, "demo", "keys", "sealrun.pub"), filepath.Join(work, "sealrun.pub"))
	os.Symlink(filepath.Join(state, "demo", "witness", "witness.pub"), filepath.Join(work, "witness.pub"))
	pv := runDocBlock(t, "../README.md", "reader", work, filepath.Dir(sealrun), "RUN", m[1])
	if !strings.Contains(pv, "publication: VALID") || !strings.Contains(pv, "every run they hold of these tracks ended and is published here") {
		t.Errorf("README's reader block on the demo's publication:\n%s", pv)
	}
	// Its first seed's note (the demo amends it) is published beside the run and on the board.
	if ams, _ := filepath.Glob(filepath.Join(state, "demo", "publication", "runs", "*", "amendments", "*.att.json")); len(ams) != 1 {
		t.Errorf("the demo's publication holds %d amendments; want its one note", len(ams))
	}
	if b, _ := os.ReadFile(filepath.Join(state, "demo", "publication", "leaderboard.md")); !strings.Contains(string(b), "note ") || !strings.Contains(string(b), "operator added after the run") {
		t.Errorf("the demo's leaderboard.md does not show its note:\n%s", b)
	}
	// The demo's ledger was shown to its witness: the publication's ledger carries a head it
	// cosigned over every entry, and a reader with the witness's key checks it.
	wpub, err := os.ReadFile(filepath.Join(state, "demo", "witness", "witness.pub"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	wv, err := exec.Command(sealrun, "verify-publication", filepath.Join(state, "demo", "publication"), "--key", filepath.Join(state, "demo", "keys", "sealrun.pub"), "--witness", strings.TrimSpace(string(wpub))).CombinedOutput()
	if err != nil || !strings.Contains(string(wv), "publication: VALID") || !strings.Contains(string(wv), "cosigned by witness.demo.sealrun/") || !strings.Contains(string(wv), "; 0 entries after it") {
		t.Errorf("verify-publication --witness: %v\n%s", err, wv)
	}
	t.Logf("verify-publication --witness of the demo's publication: %s", time.Since(t0).Round(time.Millisecond))
	// Strict: without the witness's key the runs' proofs stay unchecked, which fails by name
	// unless the reader allows it.
	pubDir0, key0 := filepath.Join(state, "demo", "publication"), filepath.Join(state, "demo", "keys", "sealrun.pub")
	if out, err := exec.Command(sealrun, "verify-publication", pubDir0, "--key", key0).CombinedOutput(); err == nil || !strings.Contains(string(out), "/witnessed.json: unchecked: a witnessed proof") {
		t.Errorf("verify-publication without the witness's key: %v\n%s", err, out)
	}
	if out, err := exec.Command(sealrun, "verify-publication", pubDir0, "--key", key0, "--allow-unchecked", "runs/*/witnessed.json").CombinedOutput(); err != nil || !strings.Contains(string(out), "publication: VALID, ") {
		t.Errorf("verify-publication --allow-unchecked 'runs/*/witnessed.json': %v\n%s", err, out)
	}
	hostilePublications(t, sealrun, pubDir0, key0, strings.TrimSpace(string(wpub)))
	if !regexp.MustCompile(`witnessed: (\d+) of (\d+) runs each queued and ended`).MatchString(string(wv)) {
		t.Errorf("verify-publication --witness does not say how many runs are witnessed:\n%s", wv)
	} else if g := regexp.MustCompile(`witnessed: (\d+) of (\d+) runs`).FindStringSubmatch(string(wv)); g[1] != g[2] {
		t.Errorf("not every run of the demo is under its witnessed head: %s", g[0])
	}
	// One row, from its own files: the run's witnessed.json, with the witness's key.
	pubRun := filepath.Join(state, "demo", "publication", "runs", m[1])
	one, err := exec.Command(sealrun, "verify", filepath.Join(pubRun, "result.att.json"), "--key", filepath.Join(state, "demo", "keys", "sealrun.pub"), "--witness", strings.TrimSpace(string(wpub))).CombinedOutput()
	if err != nil || !strings.Contains(string(one), "witnessed  queued (entry") {
		t.Errorf("sealrun verify --witness of run %s: %v\n%s", m[1], err, one)
	}
	// The proof of another run does not stand for this one.
	runs, _ := os.ReadDir(filepath.Dir(pubRun))
	for _, r := range runs {
		if r.Name() == m[1] {
			continue
		}
		bad, err := exec.Command(sealrun, "verify", filepath.Join(pubRun, "result.att.json"), "--key", filepath.Join(state, "demo", "keys", "sealrun.pub"), "--witness", strings.TrimSpace(string(wpub)),
			"--witnessed", filepath.Join(filepath.Dir(pubRun), r.Name(), "witnessed.json")).CombinedOutput()
		if err == nil || !strings.Contains(string(bad), "NOT VALID (witnessed)") {
			t.Errorf("run %s checked with run %s's witnessed proof: %v\n%s", m[1], r.Name(), err, bad)
		}
		break
	}

	// The publication's runs export as ATIF, by its rules, and a reader recomputes an export from
	// a checked run: exactly equal; one byte changed, not.
	exp := t.TempDir()
	if out, err := exec.Command(sealrun, "export", "--format", "atif", filepath.Join(state, "demo", "publication"), "--out", exp).CombinedOutput(); err != nil {
		t.Fatalf("sealrun export: %v\n%s", err, out)
	}
	traj := filepath.Join(exp, m[1], "trajectory.json")
	tb, err := os.ReadFile(traj)
	if err != nil {
		t.Fatal(err)
	}
	exporttest.ATIFRules(t, tb)
	verifyExport := func(file string) (string, error) {
		out, err := exec.Command(sealrun, "verify", filepath.Join(pubRun, "result.att.json"), "--key", filepath.Join(state, "demo", "keys", "sealrun.pub"),
			"--transcript", pubRun, "--export", file).CombinedOutput()
		return string(out), err
	}
	if out, err := verifyExport(traj); err != nil || !strings.Contains(out, "export     "+traj+" is exactly the atif export of this run's transcript") {
		t.Errorf("verify --export: %v\n%s", err, out)
	}
	// The publication carries each run's trajectory.json, made by publish the same way.
	published := filepath.Join(pubRun, "trajectory.json")
	if pb, err := os.ReadFile(published); err != nil {
		t.Errorf("the publication has no trajectory.json beside run %s's transcript: %v", m[1], err)
	} else {
		exporttest.ATIFRules(t, pb)
		if out, err := verifyExport(published); err != nil || !strings.Contains(out, "is exactly the atif export") {
			t.Errorf("verify --export of the published trajectory.json: %v\n%s", err, out)
		}
	}
	if !strings.Contains(pv, "trajectory.json (ATIF) is what the transcript gives") {
		t.Errorf("verify-publication does not check the published trajectories:\n%s", pv)
	}
	// As Inspect eval logs: by Inspect's rules, the publication's own and sealrun export's, each
	// run's sample recomputed from the run.
	if !strings.Contains(pv, "samples, each exactly what its run's transcript gives") {
		t.Errorf("verify-publication does not check the published Inspect logs:\n%s", pv)
	}
	if out, err := exec.Command(sealrun, "export", "--format", "inspect", filepath.Join(state, "demo", "publication"), "--out", exp).CombinedOutput(); err != nil {
		t.Fatalf("sealrun export --format inspect: %v\n%s", err, out)
	}
	logs, _ := filepath.Glob(filepath.Join(exp, "*.json"))
	if len(logs) != 1 {
		t.Fatalf("the demo's runs (one track, one agent) as %d Inspect logs, want 1: %v", len(logs), logs)
	}
	lb, _ := os.ReadFile(logs[0])
	exporttest.InspectRules(t, lb)
	if out, err := verifyExport(logs[0]); err != nil || !strings.Contains(out, "is exactly the inspect export of this run's transcript") {
		t.Errorf("verify --export of the Inspect log: %v\n%s", err, out)
	}
	edited := filepath.Join(exp, "edited.json")
	os.WriteFile(edited, bytes.Replace(tb, []byte(`"step_id": 1,`), []byte(`"step_id": 1 ,`), 1), 0o644)
	if out, err := verifyExport(edited); err == nil || !strings.Contains(out, "NOT VALID (export)") {
		t.Errorf("verify --export of an edited export: %v\n%s", err, out)
	}

	// The kit hash recomputes with the shell recipe of kits/KIT.md, as written, twice (from
	// SHA256SUMS, and from the files alone), and equals the track's pin.
	kitDir := filepath.Join(state, "demo", "kit")
	h := runDocBlock(t, "../kits/KIT.md", "kit-hash", work, filepath.Dir(sealrun), "KIT", kitDir)
	if got := strings.Count(h, string(track.Kit.SHA256)); got != 2 {
		t.Errorf("kits/KIT.md's recipe on %s printed the track's kit hash %s %d times, want 2:\n%s", kitDir, track.Kit.SHA256, got, h)
	}

	// The scripted agent's calls are in the audit log, in the order it makes them.
	var kinds []string
	a, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	for _, line := range strings.Split(strings.TrimSpace(string(a)), "\n") {
		var e struct {
			Kind string
			Argv []string
		}
		json.Unmarshal([]byte(line), &e)
		k := e.Kind
		if k == "call" && len(e.Argv) > 1 {
			k += ":" + e.Argv[1]
		}
		kinds = append(kinds, k)
	}
	got := strings.Join(kinds, " ")
	want := regexp.MustCompile(`^call:starter/train.py submit validation promote call:starter/train.py submit validation promote finalize sealed`)
	if !want.MatchString(got) {
		t.Errorf("audit log kinds in order:\n%s\nwant the agent's: train, submit, validation, promote, train, submit, validation, promote, finalize, sealed", got)
	}

	// Nothing left behind: no container of the demo's runtime, no mount under the state dir.
	runDirs, _ := filepath.Glob("/run/sealrun-demo-*") // each demo state directory's own
	for _, d := range runDirs {
		if o, _ := exec.Command("runc", "--root", filepath.Join(d, "runtime"), "list", "-q").Output(); len(bytes.TrimSpace(o)) > 0 {
			t.Errorf("containers left under %s: %s", d, o)
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	// (other packages' containers mount image rootfs from the same state dir meanwhile)
	if strings.Contains(string(mi), m[1]) || strings.Contains(string(mi), "/run/sealrun-demo") {
		t.Errorf("mounts of run %s or under /run/sealrun-demo left", m[1])
	}
	if _, err := os.Stat(filepath.Join(sandbox.DefaultNetnsDir, sandbox.Prefix+m[1]+"-gw")); err == nil {
		t.Errorf("network namespace of run %s left in %s", m[1], sandbox.DefaultNetnsDir)
	}

	interruptDemo(t, sealrun, state)
}

// interruptDemo runs the demo again in the state dir of one that published, and interrupts it
// (SIGINT, as ^C does) once its run is running: it says the run ended invalid (cancelled), that
// nothing was scored or published, prints no verdict, board or verify line, and leaves nothing
// behind; the earlier demo's publication stays, whole, and still verifies.
func interruptDemo(t *testing.T, sealrun, state string) {
	pubDir := filepath.Join(state, "demo", "publication")
	key := filepath.Join(t.TempDir(), "sealrun.pub") // the demo makes new keys each time
	if b, err := os.ReadFile(filepath.Join(state, "demo", "keys", "sealrun.pub")); err != nil {
		t.Fatal(err)
	} else {
		os.WriteFile(key, b, 0o644)
	}
	cache := os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	cmd := exec.Command(sealrun, "--state-dir", state, "demo", "--seeds", "1", "--quick", "--cache-dir", cache)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out bytes.Buffer
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	running := regexp.MustCompile(`\] +seed 1 running`)
	sent := false
	timeout := time.After(time.Duration(testenv.Slow()) * 5 * time.Minute)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			out.WriteString(l + "\n")
			if !sent && running.MatchString(l) {
				cmd.Process.Signal(syscall.SIGINT)
				sent = true
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("the demo to interrupt did not end in time:\n%s", out.String())
		}
	}
	err = cmd.Wait()
	t.Logf("the demo interrupted once its run was running:\n%s", out.String())
	if !sent {
		t.Fatal("the demo's run never showed running")
	}
	o := out.String()
	if err == nil {
		t.Error("an interrupted demo exited 0")
	}
	for _, want := range []string{"interrupted during step 5/7", "ended invalid (cancelled)", "the previous demo's publication is unchanged: " + pubDir, "no run of it is scored and nothing new was published"} {
		if !strings.Contains(o, want) {
			t.Errorf("the interrupted demo does not say %q", want)
		}
	}
	for _, bad := range []string{"REJECTED", "Verify one yourself", "6/7", "7/7", "What a reader gets", "left behind"} {
		if strings.Contains(o, bad) {
			t.Errorf("the interrupted demo says %q", bad)
		}
	}
	if pv, err := exec.Command(sealrun, "verify-publication", pubDir, "--key", key, "--allow-unchecked", "runs/*/witnessed.json").CombinedOutput(); err != nil || !strings.Contains(string(pv), "publication: VALID") {
		t.Errorf("the previous publication after an interrupted demo: %v\n%s", err, pv)
	}
	if _, err := os.Stat(pubDir + ".next"); err == nil {
		t.Errorf("%s.next left", pubDir)
	}
	runDirs, _ := filepath.Glob("/run/sealrun-demo-*")
	for _, d := range runDirs {
		if o, _ := exec.Command("runc", "--root", filepath.Join(d, "runtime"), "list", "-q").Output(); len(bytes.TrimSpace(o)) > 0 {
			t.Errorf("containers left under %s after the interrupt: %s", d, o)
		}
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), "/run/sealrun-demo") {
		t.Error("mounts under /run/sealrun-demo left after the interrupt")
	}
}

// demoSetup is what both ways of running the demo need: root, the test images' state dir, their
// build cache, and the static binaries the demo finds beside sealrun (their directory). The
// demo's state is removed when the test ends.
func demoSetup(t *testing.T) (state, cache, bin string) {
	t.Helper()
	testenv.RequireRoot(t)
	imgs := testenv.LocalImages(t)
	cache = os.Getenv("SEALRUN_TEST_BUILD_CACHE")
	if cache == "" {
		testenv.Missing(t, "SEALRUN_TEST_BUILD_CACHE is not set: make test sets it to the build cache the images were built with")
	}
	bin = filepath.Dir(sandboxtest.Static(t, "cmd/sealrun"))
	sandboxtest.Static(t, "cmd/runner")
	sandboxtest.Static(t, "cmd/sealrun-netns-hook")
	t.Cleanup(func() {
		for _, p := range []string{"runs", "journal.jsonl", "ledger.jsonl", "demo", "kits", "content"} {
			os.RemoveAll(filepath.Join(imgs.State, p))
		}
	})
	return imgs.State, cache, bin
}

// runDemo runs `sealrun demo` as make demo does (one seed, the quick budget) in the test images'
// state dir, and returns the binary, the state dir and the demo's output.
func runDemo(t *testing.T, args ...string) (sealrun, state string, out *bytes.Buffer) {
	t.Helper()
	state, cache, bin := demoSetup(t)
	sealrun = filepath.Join(bin, "sealrun")
	cmd := exec.Command(sealrun, append([]string{"--state-dir", state, "demo", "--seeds", "1", "--quick", "--cache-dir", cache}, args...)...)
	out = &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	t.Logf("sealrun demo %s:\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		t.Fatalf("sealrun demo %s: %v", strings.Join(args, " "), err)
	}
	return sealrun, state, out
}

// runDemoPackage runs the demo as package demo, without the CLI (one seed, the quick budget), in
// the test images' state dir, and returns its output.
func runDemoPackage(t *testing.T, scaffold string) *bytes.Buffer {
	t.Helper()
	state, cache, bin := demoSetup(t)
	out := &bytes.Buffer{}
	err := demo.Run(context.Background(), demo.Options{StateDir: state, BinDir: bin, Seeds: 1, Quick: true, Scaffold: scaffold, CacheDir: cache,
		Version: "0.0.0-test", Commit: "test"}, out)
	t.Logf("demo.Run with %s:\n%s", scaffold, out.String())
	if err != nil {
		t.Fatalf("demo.Run with %s: %v", scaffold, err)
	}
	return out
}

// TestDemoOpencode runs the demo with the real scaffold, as package demo (no CLI): opencode in the
// sealed controller, driven through the gateway by the scripted model. The run is graded and its
// attestation verifies (the demo checks both), the leaderboard labels the row scripted, never as a
// model, the transcript shows each of opencode's tool calls, and every model request is in the
// audit log as a gateway entry of the scripted provider.
func TestDemoOpencode(t *testing.T) {
	out := runDemoPackage(t, "opencode")
	oc, _ := scaffolds.Lookup("opencode")
	for _, want := range []string{"seed 1: VALID", "opencode " + oc.Version + " · scripted (not a model)", "scripted/scripted: a script on loopback behind the gateway"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	m := regexp.MustCompile(`seed 1 \((r-[0-9a-z-]+), graded\): (\S+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatal("no graded run in the demo's output")
	}
	tr, _ := os.ReadFile(filepath.Join(m[2], "transcript.log"))
	transcript := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(tr), "")
	for _, want := range []string{"$ head -n 12 BRIEF.md", "$ runner time_left", "$ runner python3 starter/train.py", "runner submit bundle1", "$ runner promote", "$ runner finalize"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("the transcript lacks the tool call %q:\n%s", want, transcript)
		}
	}
	audit, _ := os.ReadFile(filepath.Join(m[2], "audit.jsonl"))
	if n := strings.Count(string(audit), `"kind":"gateway"`); n < 6 {
		t.Errorf("%d gateway entries in the audit log; want one per turn (6 tool calls and the last)", n)
	}
}

// hostilePublications runs the corpus of forged publications (publishtest) on the demo's own
// publication, as the demo's path wrote it: each NOT VALID naming the file and what is wrong.
func hostilePublications(t *testing.T, sealrun, pub, key, witnessKey string) {
	t.Helper()
	corpus, err := publishtest.Corpus(pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 25 {
		t.Fatalf("%d tamperings of the demo's publication; the corpus has at least 25", len(corpus))
	}
	work := t.TempDir()
	var table strings.Builder
	for i, c := range corpus {
		d := filepath.Join(work, fmt.Sprintf("forged-%02d", i))
		if err := publishtest.Forge(pub, d, c); err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		out, err := exec.Command(sealrun, append([]string{"verify-publication", d, "--key", key, "--witness", witnessKey}, c.Flags...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "publication: NOT VALID") || !strings.Contains(string(out), c.Want) {
			t.Errorf("the demo's publication, %s: %v; want NOT VALID and %q in:\n%s", c.Name, err, c.Want, out)
		}
		os.RemoveAll(d)
		fmt.Fprintf(&table, "  %-50s %s\n", c.Name, c.Check)
	}
	t.Logf("%d tamperings of the demo's publication, each caught by:\n%s", len(corpus), table.String())
}
