package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller/providertest"
	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/tracks"
)

// The demo's hidden exam: synthetic, from a seed no kit uses (the ARI kit's training text and
// validation set have their own seeds).
const demoExamSeed = 424242

type demoOptions struct {
	seeds    int
	scaffold string
	keep     bool
	quick    bool
	cacheDir string
}

func newDemoCmd(g *globals) *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--seeds N] [--scaffold scripted-demo|opencode] [--keep] [--quick]",
		Short: "A whole sealed benchmark on this machine: build, run the scripted agent, verify, rank",
		Long: `Demo runs the real thing at small scale, as root, on this machine:
  1. builds the local images it needs (the controller with the scaffold, python with torch);
  2. builds a hidden exam from the synthetic generator into the content store (it never enters
     a container) and the ARI kit (brief, starter model, training text, validation set);
  3. writes the demo track with every pin filled (<state-dir>/demo/track.toml);
  4. starts sealrund in this process (its own socket, keys and config under <state-dir>/demo);
  5. runs N seeds of the scripted demo agent (scripted-demo: a shell script, not a model),
     concurrently where CPUs allow: it trains the starter through runner, submits, reads the
     validation score, tries one improvement, promotes the better and finalizes;
     with --scaffold opencode, the real scaffold instead (the controller-opencode image: opencode
     from npm, pinned) driven through the gateway by a scripted model: controller/providertest on
     loopback, provider "scripted" (agent scripted/scripted), which answers each turn with the
     next tool call: read the brief, runner time_left, train the starter, bundle and submit,
     promote, finalize. It is a script, not a model, and the leaderboard says so;
  6. verifies each attestation with every file (bundle, report, audit log, track);
  7. prints the leaderboard of those attestations and where each run's reports are.
The state dir is /var/lib/sealrun-demo unless --state-dir is given; it must be the demo's own.
Everything from an earlier demo (its runs, journal and demo/) is replaced; the images and the build
cache are reused. Without --keep the runs' workspaces (checkpoints) are removed at the end;
reports, attestations, audit logs and candidates stay.`,
		Example: `  sealrun demo                          # state in /var/lib/sealrun-demo
  sealrun demo --seeds 1 --quick        # the shortened demo make test runs
  sealrun demo --scaffold opencode      # opencode in the sealed controller, a scripted model`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.seeds < 1 || o.seeds > 16 {
				return usage(fmt.Errorf("--seeds %d: give 1 to 16", o.seeds))
			}
			if o.scaffold != images.DemoScaffoldName && o.scaffold != "opencode" {
				return usage(fmt.Errorf("--scaffold %q: choose %s (a shell script, no model) or opencode (the real scaffold, a scripted model)", o.scaffold, images.DemoScaffoldName))
			}
			if os.Geteuid() != 0 {
				return errors.New("sealrun demo runs sealed runs (namespaces, cgroups, runc) and needs root: run it with sudo, or make demo")
			}
			state := g.stateDir
			if f := cmd.Flag("state-dir"); f == nil || !f.Changed {
				state = "/var/lib/sealrun-demo" // never the production state dir by default
			}
			return runDemo(cmd.Context(), state, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&o.seeds, "seeds", 3, "how many seeds of the demo agent to run")
	cmd.Flags().StringVar(&o.scaffold, "scaffold", images.DemoScaffoldName, "the scaffold in the controller: "+images.DemoScaffoldName+" (a shell script) or opencode (driven by a scripted model)")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the runs' workspaces (checkpoints, bundles) after the demo")
	cmd.Flags().BoolVar(&o.quick, "quick", false, "a tighter budget and a smaller exam (about 2 minutes a seed)")
	cmd.Flags().StringVar(&o.cacheDir, "cache-dir", "", "where the debootstrap result is kept between builds (default <state-dir>/build-cache)")
	return cmd
}

// demoLog prints progress lines, from several goroutines.
type demoLog struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (l *demoLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "[%6.1fs] %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}

// Write lets the image build's progress lines through the same log.
func (l *demoLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.printf("  %s", line)
	}
	return len(p), nil
}

func runDemo(ctx context.Context, state string, o demoOptions, out io.Writer) error {
	lg := &demoLog{w: out, start: time.Now()}
	demoDir := filepath.Join(state, "demo")
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bin := filepath.Dir(self)
	for _, b := range []string{"runner", "sealrun-netns-hook"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("sealrun demo needs %s beside sealrun (%s); make build (or make install) puts it there", b, filepath.Join(bin, b))
		}
	}

	lg.printf("1/7 images: building the local images into %s (the first time: a debootstrap, minutes)", state)
	store, err := images.OpenStore(state)
	if err != nil {
		return err
	}
	controllerKey := "demo-controller"
	if o.scaffold == "opencode" {
		controllerKey = "controller-opencode"
	}
	built, err := store.BuildLocal(ctx, state, images.BuildOptions{Images: []string{controllerKey, "python"}, CacheDir: o.cacheDir, Log: lg})
	if err != nil {
		return err
	}
	refs := map[string]string{}
	for _, b := range built {
		refs[b.Key] = b.Ref
	}

	// The demo's daemon keeps its runs in this state dir: it must be the demo's own.
	if _, err := os.Stat(filepath.Join(state, "journal.jsonl")); err == nil {
		if _, err := os.Stat(demoDir); err != nil {
			return fmt.Errorf("%s holds runs that are not the demo's (a journal and no demo/); the demo replaces its runs each time: give it its own --state-dir, for example /var/lib/sealrun-demo", state)
		}
	}
	for _, p := range []string{demoDir, filepath.Join(state, "runs"), filepath.Join(state, "journal.jsonl"), filepath.Join(state, "ledger.jsonl")} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove the earlier demo's %s: %w", p, err)
		}
	}
	if err := os.MkdirAll(demoDir, 0o711); err != nil {
		return err
	}
	questions := 40
	if o.quick {
		questions = 12
	}
	lg.printf("2/7 exam: %d synthetic questions (seed %d) into the content store; only its hash leaves it", questions, demoExamSeed)
	examSHA, err := demoExam(state, questions)
	if err != nil {
		return err
	}
	lg.printf("    kit: building the ARI kit (sealrun kit build kits/ari)")
	kitOut := filepath.Join(demoDir, "kit")
	k, err := kits.Build(kits.ARI(), "kits/ari", kitOut, kits.BuildOptions{})
	if err != nil {
		return err
	}
	if _, err := kits.Install(kitOut, filepath.Join(state, "kits")); err != nil {
		return err
	}
	val, _ := k.File(kits.ValidationPath)
	train, _ := k.File(kits.TrainPath)
	lg.printf("    kit %s: %d files, %d bytes of training text", k.Hash, len(k.Files), train.Size)
	if n, err := contamination(filepath.Join(kitOut, kits.TrainPath), daemon.ContentPath(state, examSHA)); err != nil {
		return err
	} else {
		lg.printf("    contamination check: %d of %d hidden answers (with the 32 bytes before them) occur in the training text", n, questions)
	}

	lg.printf("3/7 track: the demo track with every pin filled")
	text := tracks.Demo
	for old, repl := range map[string]string{
		tracks.PlaceholderExam: examSHA, tracks.PlaceholderValidation: val.SHA256, tracks.PlaceholderKit: k.Hash,
		tracks.PlaceholderController: refs[controllerKey], tracks.PlaceholderPython: refs["python"], tracks.PlaceholderScaffold: images.DemoScaffoldConfigSHA256(),
	} {
		text = strings.ReplaceAll(text, old, repl)
	}
	text = strings.ReplaceAll(text, "questions = 40", fmt.Sprintf("questions = %d", questions))
	if o.scaffold == "opencode" {
		text = opencodeDemoTrack(text)
	}
	if o.quick {
		for old, repl := range map[string]string{`wall = "6m"`: `wall = "3m"`, `call_limit = "2m"`: `call_limit = "1m"`, `reserve = "1m"`: `reserve = "30s"`, `grading = "3m"`: `grading = "2m"`} {
			text = strings.Replace(text, old, repl, 1)
		}
	}
	text = strings.Replace(text, "# PLACEHOLDERS:", "# Written by sealrun demo: every pin below is real (this comment replaces the placeholder note).\n# WAS PLACEHOLDERS:", 1)
	text = regexp.MustCompile(`[ \t]+# placeholder\n`).ReplaceAllString(text, "\n") // filled now
	trackFile := filepath.Join(demoDir, "track.toml")
	if err := os.WriteFile(trackFile, []byte(text), 0o644); err != nil {
		return err
	}
	track, err := policy.Load(trackFile)
	if err != nil {
		return fmt.Errorf("the demo track: %w", err)
	}
	lg.printf("    %s: track id %s", trackFile, track.ID)

	lg.printf("4/7 sealrund: keys, config and the daemon, in this process")
	keys := filepath.Join(demoDir, "keys")
	if _, _, _, err := attest.GenerateKeys(keys, attest.AlgoED25519, nil); err != nil {
		return err
	}
	cfgPath := filepath.Join(demoDir, "sealrun.toml")
	cfgText := fmt.Sprintf(`# Written by sealrun demo.
state_dir = %q
run_dir = "/run/sealrun-demo"
socket = %q
group = "root"
runner = %q
hook = %q
[keys]
signing = %q
public = %q
[resources]
concurrency = %d
`, state, filepath.Join(demoDir, "sealrun.sock"), filepath.Join(bin, "runner"), filepath.Join(bin, "sealrun-netns-hook"),
		filepath.Join(keys, "sealrun.key"), filepath.Join(keys, "sealrun.pub"), o.seeds)
	agent := "none/none"
	if o.scaffold == "opencode" {
		// The scripted model: on loopback, for this process's lifetime (after the daemon's).
		prov := providertest.New()
		defer prov.Close()
		prov.Agent(opencodeDemoSteps()...)
		keyFile := filepath.Join(demoDir, "scripted.key")
		if err := os.WriteFile(keyFile, []byte("scripted-demo-key-not-a-secret\n"), 0o600); err != nil {
			return err
		}
		cfgText += fmt.Sprintf("[providers.%s]\nkind = \"openai\"\nbase_url = %q\nkey_file = %q\n", daemon.ScriptedProvider, prov.URL+"/v1", keyFile)
		agent = daemon.ScriptedProvider + "/scripted"
	}
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		return err
	}
	cfg, err := daemon.LoadConfig(cfgPath)
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(demoDir, "sealrund.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	dctx, stopDaemon := context.WithCancel(ctx)
	ready := make(chan struct{})
	var readyOnce sync.Once
	daemonDone := make(chan error, 1)
	go func() {
		daemonDone <- daemon.Main(dctx, cfg, slog.New(slog.NewTextHandler(logf, nil)), version, commit, func() { readyOnce.Do(func() { close(ready) }) })
	}()
	defer func() {
		stopDaemon()
		<-daemonDone
	}()
	select {
	case <-ready:
	case err := <-daemonDone:
		return fmt.Errorf("sealrund did not start: %v (its log: %s)", err, logf.Name())
	case <-ctx.Done():
		return ctx.Err()
	}
	lg.printf("    socket %s; log %s", cfg.Socket, logf.Name())

	who := "the scripted demo agent (none/none: no model)"
	if o.scaffold == "opencode" {
		who = "opencode with the scripted model (" + agent + ": a script on loopback behind the gateway, not a model)"
	}
	lg.printf("5/7 runs: %d seed(s) of %s, %d CPU(s) each, %d CPU(s) here", o.seeds, who, track.Resources.CPUs, runtime.NumCPU())
	c := newAPIClient(cfg.Socket)
	runs := make([]*demoRun, o.seeds)
	for i := range runs {
		r := &demoRun{seed: int64(i + 1)}
		if err := c.do(ctx, "POST", "/runs", daemon.RunRequest{Track: text, TrackName: trackFile, Agent: agent, Seed: r.seed}, &r.rec); err != nil {
			return err
		}
		runs[i] = r
		lg.printf("    seed %d: run %s queued", r.seed, r.rec.ID)
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.rec = demoFollow(ctx, c, r.rec.ID, func(e daemon.Event, last daemon.Record) {
				if line := eventLine(e, last); line != "" {
					lg.printf("    seed %d %s", r.seed, strings.TrimSpace(line[strings.Index(line, " "):]))
				}
			})
		}()
	}
	wg.Wait()
	// The journal has every state change with its time (the live stream may begin after the first).
	byID := map[string]*demoRun{}
	for _, r := range runs {
		byID[r.rec.ID] = r
		r.t = map[string]time.Time{"queued": r.rec.Queued}
	}
	if jb, err := os.ReadFile(filepath.Join(state, "journal.jsonl")); err == nil { // read only: the daemon still has it open
		for _, line := range bytes.Split(jb, []byte("\n")) {
			var e daemon.Event
			if json.Unmarshal(line, &e) == nil && e.Kind == "state" && byID[e.Run] != nil {
				byID[e.Run].t[e.State] = e.Time
			}
		}
	}

	lg.printf("6/7 verify: each attestation with --bundle --report --audit --track")
	var atts []string
	failed := 0
	var timings []string
	for _, r := range runs {
		dir := r.rec.Dir
		att := filepath.Join(dir, "result.att.json")
		f := &verifyFlags{key: filepath.Join(keys, "sealrun.pub"), report: filepath.Join(dir, "report.json"), audit: filepath.Join(dir, "audit.jsonl"), track: trackFile}
		if rep, err := readReport(filepath.Join(dir, "report.json")); err == nil && rep.Candidate.ID != "" {
			f.bundle = filepath.Join(dir, "candidates", strings.TrimPrefix(rep.Candidate.ID, "sha256:")+".tar.gz")
		}
		v, err := verifyAttestation(att, f)
		if err != nil {
			failed++
			lg.printf("    seed %d: %s REJECTED: %v", r.seed, att, err)
			continue
		}
		res := v.Statement.Predicate.Result
		lg.printf("    seed %d: VALID %s — %s, %d/%d passed", r.seed, att, res.Status, res.Passed, res.Questions)
		if r.rec.State != daemon.StateGraded {
			failed++
		}
		atts = append(atts, att)
		timings = append(timings, demoTimings(r.seed, r.rec, r.t))
		if !o.keep { // the workspace's files live in its quota image
			os.RemoveAll(filepath.Join(dir, "workspace"))
			os.Remove(filepath.Join(dir, "workspace.img"))
		}
	}

	lg.printf("7/7 leaderboard of the verified attestations")
	ks, err := leaderboard.LoadKeys([]string{filepath.Join(keys, "sealrun.pub")})
	if err != nil {
		return err
	}
	in, err := leaderboard.Load(atts, ks, []*policy.Track{track})
	if err != nil {
		return err
	}
	var board bytes.Buffer
	if err := leaderboard.Build(in, ks).Render(&board, "text"); err != nil {
		return err
	}
	pubDir := filepath.Join(demoDir, "publication")
	if failed == 0 {
		lg.printf("    publication: the runs gathered, the run ledger, the track, the key and the boards into %s", pubDir)
		if err := demoPublish(ctx, c, state, demoDir, pubDir, filepath.Join(keys, "sealrun.pub"), trackFile, runs); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\n%s\n", board.String())
	fmt.Fprintln(out, "Time per seed (queued: waiting for CPUs; setup: preparing to running; agent: running to grading; grading; attesting):")
	for _, s := range timings {
		fmt.Fprintln(out, "  "+s)
	}
	fmt.Fprintln(out, "\nWhere the reports are:")
	for _, r := range runs {
		fmt.Fprintf(out, "  seed %d (%s, %s): %s\n", r.seed, r.rec.ID, r.rec.State, r.rec.Dir)
		fmt.Fprintf(out, "      report.html  summary.txt  report.json  result.att.json  audit.jsonl  transcript.log\n")
	}
	fmt.Fprintf(out, "\nVerify one yourself:\n  sealrun verify %s --key %s --track %s\nThe track: %s (sealrun track show %s)\n",
		filepath.Join(runs[0].rec.Dir, "result.att.json"), filepath.Join(keys, "sealrun.pub"), trackFile, trackFile, trackFile)
	if failed == 0 {
		fmt.Fprintf(out, "What a reader gets (VERIFY.md says how to check it by hand):\n  sealrun verify-publication %s --key %s\n", pubDir, filepath.Join(keys, "sealrun.pub"))
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d demo runs did not end graded with a valid attestation; see the runs above and %s", failed, len(runs), logf.Name())
	}
	return nil
}

// demoExam synthesizes the demo's hidden exam into the content store and returns its hash.
func demoExam(state string, questions int) (string, error) {
	var docs bytes.Buffer
	if err := exams.WriteDocuments(&docs, exams.Synthesize(demoExamSeed, questions)); err != nil {
		return "", err
	}
	qs, err := exams.ReadDocuments("demo-exam", &docs)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	sum, err := exams.Encode(&buf, qs, exams.DefaultContextBytes)
	if err != nil {
		return "", err
	}
	dst := daemon.ContentPath(state, sum)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	return sum, exams.WriteAtomic(dst, 0o600, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err })
}

// contamination counts the exam's answers that occur, with the 32 bytes before them, in the
// training text: the kit must never hold the exam's own documents.
func contamination(trainPath, examPath string) (int, error) {
	train, err := os.ReadFile(trainPath)
	if err != nil {
		return 0, err
	}
	ex, err := exams.Open(examPath, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range ex.Questions {
		p := q.Prefix
		if len(p) > 32 {
			p = p[len(p)-32:]
		}
		if bytes.Contains(train, append(append([]byte(nil), p...), q.Answer...)) {
			n++
		}
	}
	return n, nil
}

// demoFollow streams a run's events to fn until the run ends and returns its last record.
func demoFollow(ctx context.Context, c *apiClient, id string, fn func(daemon.Event, daemon.Record)) daemon.Record {
	var last daemon.Record
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://sealrund/v1/runs/"+id+"/events", nil)
		resp, err := c.http.Do(req)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), daemon.MaxEventBytes+1)
		for sc.Scan() {
			var e daemon.Event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			if len(e.Data) > 0 && (e.Kind == "record" || e.Kind == "state" || e.Kind == "result" || e.Kind == "heartbeat") {
				json.Unmarshal(e.Data, &last)
			}
			fn(e, last)
		}
		resp.Body.Close()
		if last.Final() {
			return last
		}
	}
	return last
}

// demoTimings splits a run's wall time: waiting in the queue, setup (preparing to running: pins
// checked, workspace seeded, gateway, services, controller), agent (running to grading),
// grading (both phases, from report.json) and attesting (the rest: report, attestation, record).
func demoTimings(seed int64, r daemon.Record, t map[string]time.Time) string {
	d := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "—"
		}
		return roundDuration(b.Sub(a))
	}
	grading, attesting := "—", d(t[daemon.StateGrading], r.Finished)
	if rep, err := readReport(filepath.Join(r.Dir, "report.json")); err == nil && !t[daemon.StateGrading].IsZero() && !r.Finished.IsZero() {
		gd := time.Duration(rep.Timings.AnswersMS+rep.Timings.BitsMS) * time.Millisecond
		grading = roundDuration(gd)
		attesting = roundDuration(max(0, r.Finished.Sub(t[daemon.StateGrading])-gd))
	}
	return fmt.Sprintf("seed %d: queued %s, setup %s, agent %s, grading %s, attesting %s (%s)", seed,
		d(t["queued"], t[daemon.StatePreparing]), d(t[daemon.StatePreparing], t[daemon.StateRunning]), d(t[daemon.StateRunning], t[daemon.StateGrading]), grading, attesting, r.State)
}

// roundDuration prints milliseconds under a second, tenths of a second above.
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func readReport(path string) (*grader.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r grader.Report
	return &r, json.Unmarshal(b, &r)
}

// opencodeDemoTrack pins the demo track's [scaffold] to opencode (the controller-opencode image's
// labels: version and config template hash).
func opencodeDemoTrack(text string) string {
	head, rest, _ := strings.Cut(text, "[scaffold]\n")
	_, tail, _ := strings.Cut(rest, "\n\n") // the demo track's [scaffold] lines
	section := fmt.Sprintf("name = \"opencode\"         # the real scaffold, driven by a scripted model (provider scripted)\nversion = %q\nconfig_sha256 = %q # kits/opencode/opencode.json",
		images.OpencodeVersion, images.OpencodeConfigSHA256())
	return head + "[scaffold]\n" + section + "\n\n" + tail
}

// opencodeDemoSteps is the scripted model's conversation with opencode: each turn one call of
// opencode's bash tool, chosen from the last tool output as the scripted demo scaffold chooses
// (kits/demo-agent/agent.sh, its first half: one training call, one candidate).
func opencodeDemoSteps() []providertest.Step {
	reserve := regexp.MustCompile(`reserve window starts in ([0-9hms.]+)`)
	candidate := regexp.MustCompile(`candidate ([0-9a-f]{6,})`)
	return []providertest.Step{
		func(string) string { return "head -n 12 BRIEF.md; ls -l starter data validation.sealrun" },
		func(string) string { return "runner time_left" },
		func(last string) string {
			// A quarter of the time before the reserve window, 10 to 40 s: a demo, not an attempt.
			budget := 40 * time.Second
			if m := reserve.FindStringSubmatch(last); m != nil {
				if d, err := time.ParseDuration(m[1]); err == nil && d/4 < budget {
					budget = max(d/4, 10*time.Second)
				}
			}
			return fmt.Sprintf(`runner python3 starter/train.py --size toy --steps 5000 --lr 0.004 --seed "$SEALRUN_SEED" --max-seconds %d --out ckpt1`, int(budget.Seconds()))
		},
		func(string) string { return "sh starter/make_bundle.sh ckpt1 bundle1 && runner submit bundle1" },
		func(last string) string {
			if m := candidate.FindStringSubmatch(last); m != nil {
				return "runner promote " + m[1]
			}
			return "runner history"
		},
		func(string) string { return "runner finalize" },
	}
}

// demoRun is one seed of the demo: its record and when it entered each state.
type demoRun struct {
	seed int64
	rec  daemon.Record
	t    map[string]time.Time
}

// demoPublish gathers the demo's runs as an operator would (sealrun results gather), exports the
// run ledger, and publishes them with the track and the key (sealrun publish).
func demoPublish(ctx context.Context, c *apiClient, state, demoDir, pubDir, pub, trackFile string, runs []*demoRun) error {
	cmd := &cobra.Command{}
	cmd.SetContext(ctx)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	results := filepath.Join(demoDir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		return err
	}
	for _, r := range runs {
		if _, err := gather(c, cmd, r.rec, results); err != nil {
			return fmt.Errorf("gather run %s: %w", r.rec.ID, err)
		}
	}
	lf, err := os.Open(filepath.Join(state, "ledger.jsonl"))
	if err != nil {
		return err
	}
	defer lf.Close()
	ledgerOut := filepath.Join(demoDir, "ledger-demo.jsonl")
	if err := exams.WriteAtomic(ledgerOut, 0o644, func(w io.Writer) error { _, err := ledger.Export(lf, w); return err }); err != nil {
		return fmt.Errorf("export the run ledger: %w", err)
	}
	if err := publish(cmd, pubDir, "exam", []string{pub}, []string{trackFile}, []string{ledgerOut}, []string{results}); err != nil {
		return fmt.Errorf("publish the demo's runs: %w", err)
	}
	return nil
}
