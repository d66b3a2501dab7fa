package demo

// The demo's seven steps, in order (Run lists them).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/images/builder"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/sealrun/sealrun/trackpin"
	"github.com/sealrun/sealrun/tracks"
)

// buildImages (1/7) builds the local images the demo track pins, and makes the state dir the
// demo's own: an earlier demo's runs, journal and ledger are removed.
func (s *session) buildImages(ctx context.Context) error {
	s.lg.printf("1/7 images: building the local images into %s (the first time: a debootstrap, minutes)", s.state)
	store, err := images.OpenStore(s.state)
	if err != nil {
		return err
	}
	s.controllerKey = "demo-controller"
	if sc, ok := scaffolds.Lookup(s.o.Scaffold); ok {
		s.controllerKey = sc.ImageKey()
	}
	want := []string{s.controllerKey, "python"}
	if s.o.RunnerImage != "" {
		want = want[:1] // the runner and grader are the image given
	}
	built, err := builder.BuildLocal(ctx, store, s.state, builder.BuildOptions{Images: want, CacheDir: s.o.CacheDir, Log: s.lg})
	if err != nil {
		return err
	}
	s.refs = map[string]string{}
	for _, b := range built {
		s.refs[b.Key] = b.Ref
	}
	if r := s.o.RunnerImage; r != "" {
		if _, err := store.Get(r[strings.LastIndex(r, "@")+1:]); err != nil {
			return opt.Wrap("demo.Options", "RunnerImage", err)
		}
		s.refs["python"] = r
		s.lg.printf("    runner and grader: %s (given)", r)
	}
	// The demo's daemon keeps its runs in this state dir: it must be the demo's own.
	if _, err := os.Stat(filepath.Join(s.state, "journal.jsonl")); err == nil {
		if _, err := os.Stat(s.demoDir); err != nil {
			return opt.New("demo.Options", "StateDir", fmt.Sprintf("%s holds runs that are not the demo's (a journal and no demo/); the demo replaces its runs each time: give it its own, for example /var/lib/sealrun-demo", s.state))
		}
	}
	// Everything of the earlier demo goes but its publication, which a new one replaces only once
	// it is whole (demoPublish).
	old, _ := filepath.Glob(filepath.Join(s.demoDir, "*"))
	old = slices.DeleteFunc(old, func(p string) bool { return filepath.Base(p) == "publication" })
	for _, p := range append(old, filepath.Join(s.state, "runs"), filepath.Join(s.state, "journal.jsonl"), filepath.Join(s.state, "ledger.jsonl")) {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("remove the earlier demo's %s: %w", p, err)
		}
	}
	return os.MkdirAll(s.demoDir, 0o711)
}

// makeContent (2/7) synthesizes the hidden exam into the content store and builds and installs
// the ARI kit, checking that the kit's training text holds none of the exam's answers.
func (s *session) makeContent(context.Context) error {
	s.questions = 40
	if s.o.Quick {
		s.questions = 12
	}
	s.lg.printf("2/7 exam: %d synthetic questions (seed %d) into the content store; only its hash leaves it", s.questions, demoExamSeed)
	var err error
	if s.examSHA, err = demoExam(s.state, s.questions); err != nil {
		return err
	}
	kitOut := filepath.Join(s.demoDir, "kit")
	if s.o.Kit != "" {
		kitOut = s.o.Kit
		s.lg.printf("    kit: %s (given; sealrun kit build made it)", kitOut)
		if s.kit, err = kits.Open(kitOut); err != nil {
			return opt.Wrap("demo.Options", "Kit", err)
		}
	} else {
		s.lg.printf("    kit: building the ARI kit (sealrun kit build kits/ari)")
		if s.kit, err = kits.Build(kits.ARI(), "kits/ari", kitOut, kits.BuildOptions{}); err != nil {
			return err
		}
	}
	if _, err := kits.Install(kitOut, filepath.Join(s.state, "kits")); err != nil {
		return err
	}
	train, _ := s.kit.File(kits.TrainPath)
	s.lg.printf("    kit %s: %d files, %d bytes of training text", s.kit.Hash, len(s.kit.Files), train.Size)
	n, err := contamination(filepath.Join(kitOut, kits.TrainPath), api.ContentPath(s.state, digest.Hex(s.examSHA)))
	if err != nil {
		return err
	}
	s.lg.printf("    contamination check: %d of %d hidden answers (with the 32 bytes before them) occur in the training text", n, s.questions)
	return nil
}

// writeTrack (3/7) writes the demo track pinned to what the demo built, as an operator pins
// theirs (package trackpin, sealrun track pin), with the quick budget if asked.
func (s *session) writeTrack(context.Context) error {
	s.lg.printf("3/7 track: the demo track, pinned to what the demo built (sealrun track pin)")
	text := tracks.Demo
	if sc, ok := scaffolds.Lookup(s.o.Scaffold); ok {
		text = scaffoldDemoTrack(text, sc)
	}
	if len(s.o.GPUs) > 0 {
		text = strings.Replace(text, "gpus = 0", "gpus = 1", 1) // each run gets one of them
		// CUDA's PyTorch holds GiBs of host memory beside the GPU's; 3 GiB is a CPU demo's
		text = strings.Replace(text, `memory = "3GiB"`, `memory = "16GiB"`, 1)
	}
	if s.o.Quick {
		for old, repl := range map[string]string{`wall = "6m"`: `wall = "3m"`, `call_limit = "2m"`: `call_limit = "1m"`, `reserve = "1m"`: `reserve = "30s"`, `grading = "3m"`: `grading = "2m"`} {
			text = strings.Replace(text, old, repl, 1)
		}
	}
	text = strings.Replace(text, "# PLACEHOLDERS:", "# Written by sealrun demo: every pin below is real (this comment replaces the placeholder note).\n# WAS PLACEHOLDERS:", 1)
	s.trackFile = filepath.Join(s.demoDir, "track.toml")
	python := s.refs["python"]
	pinned, err := trackpin.Pin(s.state, "tracks/demo.toml", []byte(text), s.trackFile,
		trackpin.Pins{Exam: s.examSHA, Kit: string(s.kit.Hash), Controller: s.refs[s.controllerKey], Runner: python, Grader: python})
	if err != nil {
		return fmt.Errorf("pin the demo track: %w", err)
	}
	if err := pinned.WriteFile(s.trackFile); err != nil {
		return err
	}
	s.text, s.track = pinned.Text, pinned.Track
	s.lg.printf("    %s: track id %s", s.trackFile, s.track.ID)
	return nil
}

// startDaemon (4/7) makes the signing keys and the daemon's configuration and starts sealrund in
// this process; it stops when the demo ends.
func (s *session) startDaemon(ctx context.Context) error {
	s.lg.printf("4/7 sealrund: keys, config and the daemon, in this process")
	cfg, err := s.writeConfig()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(s.demoDir, "sealrund.log"))
	if err != nil {
		return err
	}
	s.onClose(func() { logf.Close() })
	s.socket, s.log = cfg.Socket, logf.Name()
	// Once the daemon has stopped (the closers run last first), its run directory goes if
	// nothing is left in it: each demo's state dir has its own under /run.
	runDir := cfg.RunDir
	s.runDir = runDir
	s.onClose(func() {
		for _, p := range []string{"runtime", "bundles", "runs", ".lock", ""} {
			os.Remove(filepath.Join(runDir, p)) // never RemoveAll: what a crash left stays for sealrun sandbox reap
		}
	})
	dctx, stopDaemon := context.WithCancel(ctx)
	ready := make(chan struct{})
	var readyOnce sync.Once
	daemonDone := make(chan error, 1)
	go func() {
		daemonDone <- daemon.Main(dctx, cfg, slog.New(slog.NewTextHandler(logf, nil)), s.o.Version, s.o.Commit, func() { readyOnce.Do(func() { close(ready) }) })
	}()
	s.onClose(func() {
		stopDaemon()
		<-daemonDone
	})
	select {
	case <-ready:
	case err := <-daemonDone:
		return fmt.Errorf("sealrund did not start: %v (its log: %s)", err, logf.Name())
	case <-ctx.Done():
		return ctx.Err()
	}
	s.lg.printf("    socket %s; log %s", cfg.Socket, logf.Name())
	return nil
}

// writeConfig writes the keys and sealrun.toml of the demo's daemon; with a real scaffold, it
// starts the scripted model on loopback (for the demo's lifetime, after the daemon's) as its
// provider, of the kind the scaffold speaks.
func (s *session) writeConfig() (*hostconfig.Config, error) {
	s.keys = filepath.Join(s.demoDir, "keys")
	if _, _, _, err := attest.GenerateKeys(s.keys, attest.AlgoED25519, nil); err != nil {
		return nil, err
	}
	bin := s.o.BinDir
	cfgPath := filepath.Join(s.demoDir, "sealrun.toml")
	// The run directory is the state directory's own: two demos of two state directories run
	// side by side; a second demo of one state directory is refused (its run directory is held).
	sum := sha256.Sum256([]byte(s.o.StateDir))
	cfgText := fmt.Sprintf(`# Written by sealrun demo.
state_dir = %q
run_dir = "/run/sealrun-demo-`+hex.EncodeToString(sum[:6])+`"
socket = %q
group = "root"
runner = %q
hook = %q
[keys]
signing = %q
public = %q
[resources]
concurrency = %d
gpus = [%s]
`, s.state, filepath.Join(s.demoDir, "sealrun.sock"), filepath.Join(bin, "runner"), filepath.Join(bin, "sealrun-netns-hook"),
		filepath.Join(s.keys, "sealrun.key"), filepath.Join(s.keys, "sealrun.pub"), s.o.Seeds, quoteList(s.o.GPUs))
	// The ledger's heads go to the demo's witness.
	origin := demoOrigin(s.state)
	wkey, wurl, err := s.startWitness(origin)
	if err != nil {
		return nil, fmt.Errorf("start the demo's witness: %w", err)
	}
	cfgText += fmt.Sprintf("[ledger]\norigin = %q\n[[witnesses]]\nname = \"demo\"\nurl = %q\nkey = %q\n", origin, wurl, wkey)
	s.agent = "none/none"
	if sc, ok := scaffolds.Lookup(s.o.Scaffold); ok {
		prov := scriptedmodel.New()
		s.onClose(prov.Close)
		prov.Agent(scaffoldDemoSteps()...)
		keyFile := filepath.Join(s.demoDir, "scripted.key")
		if err := os.WriteFile(keyFile, []byte("scripted-demo-key-not-a-secret\n"), 0o600); err != nil {
			return nil, err
		}
		kind, base := sc.Kinds[0], prov.URL
		if kind == "openai" {
			base += "/v1"
		}
		cfgText += fmt.Sprintf("[providers.%s]\nkind = %q\nbase_url = %q\nkey_file = %q\n", hostconfig.ScriptedProvider, kind, base, keyFile)
		s.agent = hostconfig.ScriptedProvider + "/scripted"
	}
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		return nil, err
	}
	return hostconfig.Load(cfgPath)
}

// runSeeds (5/7) submits each seed through the admin API, follows them to their end, and reads
// from the journal when each entered each state.
func (s *session) runSeeds(ctx context.Context) error {
	who := "the scripted demo agent (none/none: no model)"
	if isShipped(s.o.Scaffold) {
		who = s.o.Scaffold + " with the scripted model (" + s.agent + ": a script on loopback behind the gateway, not a model)"
	}
	s.lg.printf("5/7 runs: %d seed(s) of %s, %d CPU(s) each, %d CPU(s) here", s.o.Seeds, who, s.track.Resources.CPUs, runtime.NumCPU())
	s.c = client.New(s.socket)
	s.runs = make([]*demoRun, s.o.Seeds)
	for i := range s.runs {
		r := &demoRun{seed: int64(i + 1)}
		rec, err := s.c.Submit(ctx, api.RunRequest{Track: s.text, TrackName: s.trackFile, Agent: s.agent, Seed: r.seed})
		if r.rec = rec; err != nil {
			return err
		}
		s.runs[i] = r
		s.lg.printf("    seed %d: run %s queued", r.seed, r.rec.ID)
	}
	var wg sync.WaitGroup
	for _, r := range s.runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.rec = demoFollow(ctx, s.c, r.rec.ID, func(e api.Event, last api.Record) {
				if line := client.EventLine(e, last); line != "" {
					s.lg.printf("    seed %d %s", r.seed, strings.TrimSpace(line[strings.Index(line, " "):]))
				}
			})
		}()
	}
	wg.Wait()
	// The journal has every state change with its time (the live stream may begin after the first).
	byID := map[string]*demoRun{}
	for _, r := range s.runs {
		byID[r.rec.ID] = r
		r.t = map[string]time.Time{"queued": r.rec.Queued}
	}
	if jb, err := os.ReadFile(filepath.Join(s.state, "journal.jsonl")); err == nil { // read only: the daemon still has it open
		for _, line := range bytes.Split(jb, []byte("\n")) {
			var e api.Event
			if json.Unmarshal(line, &e) == nil && e.Kind == api.EventState && byID[e.Run] != nil {
				byID[e.Run].t[e.State] = e.Time
			}
		}
	}
	return nil
}

// verifyRuns (6/7) verifies each run's attestation with every file it binds, as a reader would.
func (s *session) verifyRuns(context.Context) error {
	s.lg.printf("6/7 verify: each attestation with --bundle --report --audit --track")
	for _, r := range s.runs {
		dir := r.rec.Dir
		att := filepath.Join(dir, "result.att.json")
		f := attest.Files{Key: filepath.Join(s.keys, "sealrun.pub"), Report: filepath.Join(dir, "report.json"), Audit: filepath.Join(dir, "audit.jsonl"), Track: s.trackFile}
		if rep, err := readReport(filepath.Join(dir, "report.json")); err == nil && rep.Candidate.ID != "" {
			f.Bundle = filepath.Join(dir, "candidates", string(rep.Candidate.ID.Hex())+".tar.gz")
		}
		v, err := attest.VerifyFile(att, f)
		if err != nil {
			s.failed++
			s.lg.printf("    seed %d: %s REJECTED: %v", r.seed, att, err)
			continue
		}
		res := v.Statement.Predicate.Result
		s.lg.printf("    seed %d: VALID %s — %s, %d/%d passed", r.seed, att, res.Status, res.Passed, res.Questions)
		if r.rec.State != api.StateGraded {
			s.failed++
		}
		s.atts = append(s.atts, att)
		s.timings = append(s.timings, demoTimings(r.seed, r.rec, r.t))
		if !s.o.Keep { // the workspace's files live in its quota image
			os.RemoveAll(filepath.Join(dir, "workspace"))
			os.Remove(filepath.Join(dir, "workspace.img"))
		}
	}
	return nil
}

// rank (7/7) builds the leaderboard of the verified attestations, publishes the runs when every
// one was graded and verified, and prints the board, the timings and where everything is.
func (s *session) rank(ctx context.Context) error {
	s.lg.printf("7/7 leaderboard of the verified attestations")
	pub := filepath.Join(s.keys, "sealrun.pub")
	ks, err := leaderboard.LoadKeys([]string{pub})
	if err != nil {
		return err
	}
	in, err := leaderboard.Load(s.atts, ks, []*policy.Track{s.track})
	if err != nil {
		return err
	}
	var board bytes.Buffer
	if err := leaderboard.Build(in, ks).Render(&board, "text"); err != nil {
		return err
	}
	pubDir := filepath.Join(s.demoDir, "publication")
	if s.failed == 0 {
		s.lg.printf("    publication: the runs gathered, the run ledger, the track, the key and the boards into %s", pubDir)
		if err := demoPublish(ctx, s.c, s.lg, s.state, s.demoDir, pubDir, pub, s.trackFile, s.witnessName, s.o.Version, s.runs); err != nil {
			return err
		}
	}
	out := s.out
	fmt.Fprintf(out, "\n%s\n", board.String())
	fmt.Fprintln(out, "Time per seed (queued: waiting for CPUs; setup: preparing to running; agent: running to grading; grading; attesting):")
	for _, t := range s.timings {
		fmt.Fprintln(out, "  "+t)
	}
	fmt.Fprintln(out, "\nWhere the reports are:")
	for _, r := range s.runs {
		fmt.Fprintf(out, "  seed %d (%s, %s): %s\n", r.seed, r.rec.ID, r.rec.State, r.rec.Dir)
		fmt.Fprintf(out, "      transcript.html (what the agent did: open it first)  report.html  summary.txt  report.json  result.att.json  audit.jsonl  transcript.json  transcript.log\n")
	}
	fmt.Fprintf(out, "\nVerify one yourself:\n  sealrun verify %s --key %s --track %s\nThe track: %s (sealrun track show %s)\n",
		filepath.Join(s.runs[0].rec.Dir, "result.att.json"), pub, s.trackFile, s.trackFile, s.trackFile)
	if s.failed == 0 {
		fmt.Fprintf(out, "What a reader gets (VERIFY.md says how to check it by hand), with the key of the witness its ledger was shown to:\n  sealrun verify-publication %s --key %s --witness \"$(cat %s)\"\n(without the witness's key, the runs' witnessed proofs cannot be checked: add --allow-unchecked 'runs/*/witnessed.json' to accept that by name)\n", pubDir, pub, s.witnessPub)
		return nil
	}
	return fmt.Errorf("%d of %d demo runs did not end graded with a valid attestation; see the runs above and %s", s.failed, len(s.runs), s.log)
}

// quoteList is names as a TOML array's items.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
