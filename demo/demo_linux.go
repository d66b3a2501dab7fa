// Package demo is sealrun's demo: a whole sealed benchmark at small scale on this machine, as
// root. It builds the local images, a hidden exam and the ARI kit, writes the demo track with
// every pin filled, starts sealrund in this process, runs seeds of the scripted demo agent (or
// opencode driven by a scripted model) through the daemon's admin API like any client, verifies
// each attestation with its files, publishes the runs and prints the leaderboard.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/images/builder"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/scaffolds"
)

// The demo's hidden exam: synthetic, from a seed no kit uses (the ARI kit's training text and
// validation set have their own seeds).
const demoExamSeed = 424242

// Options are a demo's.
type Options struct {
	// StateDir is the demo's own state directory (its images, runs, journal, ledger and demo/);
	// everything from an earlier demo in it is replaced, its publication only once the new one
	// is whole (an interrupted or failed demo leaves it as it was). Never the production state
	// dir.
	StateDir string
	// BinDir holds sealrun's runner and sealrun-netns-hook (make build puts them beside sealrun).
	BinDir   string
	Seeds    int    // how many seeds of the demo agent, 1 to 16
	Scaffold string // builder.DemoScaffoldName (a shell script), or a shipped scaffold (scaffolds.Names) driven by a scripted model
	Keep     bool   // keep the runs' workspaces
	Quick    bool   // a tighter budget and a smaller exam
	CacheDir string // where the debootstrap result is kept between builds ("": <state>/build-cache)
	// RunnerImage, when set, is an image already in the store (sealrun images import|pull) the
	// runs' runner and grader use instead of the CPU python image the demo builds: a GPU host's
	// own PyTorch. GPUs are CDI device names the demo's daemon hands out, one per run.
	RunnerImage string
	GPUs        []string
	// Kit, when set, is a built ARI kit (sealrun kit build) to use instead of building one here
	// (a machine without Debian's licence texts the kit's training text is made from).
	Kit string
	// Version and Commit are sealrun's, recorded by the demo's daemon in each attestation.
	Version, Commit string
}

func (o Options) check() error {
	switch {
	case o.Seeds < 1 || o.Seeds > 16:
		return fmt.Errorf("%d seeds: give 1 to 16", o.Seeds)
	case o.Scaffold != builder.DemoScaffoldName && !isShipped(o.Scaffold):
		return fmt.Errorf("scaffold %q: choose %s (a shell script, no model) or a real agent driven by a scripted model: %s", o.Scaffold, builder.DemoScaffoldName, strings.Join(scaffolds.Names(), ", "))
	case len(o.GPUs) > 16:
		return fmt.Errorf("%d GPUs: give at most 16", len(o.GPUs))
	case o.StateDir == "" || o.BinDir == "":
		return errors.New("the demo needs its state directory and the directory of sealrun's binaries")
	}
	return nil
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

func Run(ctx context.Context, o Options, out io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	for _, b := range []string{"runner", "sealrun-netns-hook"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("the demo needs %s beside sealrun (%s); make build (or make install) puts it there", b, filepath.Join(o.BinDir, b))
		}
	}
	s := &session{o: o, out: out, lg: &demoLog{w: out, start: time.Now()}, state: o.StateDir, demoDir: filepath.Join(o.StateDir, "demo")}
	defer s.close()
	for i, step := range []func(context.Context) error{s.buildImages, s.makeContent, s.writeTrack, s.startDaemon, s.runSeeds, s.verifyRuns, s.rank} {
		err := step(ctx)
		if ctx.Err() != nil {
			return s.interrupted(i + 1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// interrupted ends a demo whose context ended (^C) during step n: it stops the daemon, whose
// runs end invalid (cancelled), attested, their containers removed, and says what became of
// each run and of the publication, which only a whole demo replaces.
func (s *session) interrupted(n int) error {
	s.lg.printf("interrupted during step %d/7: stopping (the runs under way end invalid, cancelled, and are attested)", n)
	s.close()
	final := map[string]api.Event{}
	if jb, err := os.ReadFile(filepath.Join(s.state, "journal.jsonl")); err == nil {
		for _, line := range bytes.Split(jb, []byte("\n")) {
			var e api.Event
			if json.Unmarshal(line, &e) == nil && e.Kind == api.EventState {
				final[e.Run] = e
			}
		}
	}
	for _, r := range s.runs {
		if r == nil {
			continue
		}
		e, ok := final[r.rec.ID]
		switch {
		case !ok:
			s.lg.printf("    seed %d: run %s never started", r.seed, r.rec.ID)
		case e.State == api.StateInvalid:
			s.lg.printf("    seed %d: run %s ended invalid (%s): it counts for no one, and its containers are removed", r.seed, r.rec.ID, e.Reason)
		default:
			s.lg.printf("    seed %d: run %s ended %s %s", r.seed, r.rec.ID, e.State, e.Reason)
		}
	}
	if s.runDir != "" {
		if _, err := os.Stat(s.runDir); err == nil {
			s.lg.printf("    left behind: %s (sealrun --state-dir %s sandbox reap removes it)", s.runDir, s.state)
		}
	}
	pub := filepath.Join(s.demoDir, "publication")
	if _, err := os.Stat(pub); err == nil {
		s.lg.printf("    the previous demo's publication is unchanged: %s", pub)
	} else {
		s.lg.printf("    nothing was published")
	}
	return fmt.Errorf("the demo was interrupted during step %d/7: no run of it is scored and nothing new was published; run it again to finish", n)
}

// session is one demo on its way through its seven steps; each step fills in what the later
// ones read, and close undoes what they started (the daemon, the scripted model), last first.
type session struct {
	o              Options
	out            io.Writer
	lg             *demoLog
	state, demoDir string

	controllerKey string            // 1: the controller image's key
	refs          map[string]string // 1: image key -> pinned reference
	questions     int               // 2
	examSHA       string            // 2: the hidden exam's hash
	kit           *kits.Kit         // 2
	text          string            // 3: the track's text
	trackFile     string            // 3
	track         *policy.Track     // 3
	keys          string            // 4: the keys directory
	witnessPub    string            // 4: the demo witness's public key file
	witnessName   string            // 4: and its key name
	agent         string            // 4: the agent every seed runs
	socket, log   string            // 4: the daemon's socket and log
	runDir        string            // 4: the daemon's run directory (under /run)
	c             *client.Client    // 5
	runs          []*demoRun        // 5
	atts          []string          // 6: the attestations that verified
	failed        int               // 6: runs not graded with a valid attestation
	timings       []string          // 6

	closers []func()
}

func (s *session) onClose(f func()) { s.closers = append(s.closers, f) }

// close runs the closers once, last first.
func (s *session) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
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
	dst := api.ContentPath(state, digest.Hex(sum))
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	return sum, fileio.WriteAtomic(dst, 0o600, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err })
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
func demoFollow(ctx context.Context, c *client.Client, id string, fn func(api.Event, api.Record)) api.Record {
	var last api.Record
	for ctx.Err() == nil {
		r, err := c.Events(ctx, id, fn)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		if r.ID != "" {
			last = r
		}
		if last.Final() {
			return last
		}
	}
	return last
}

// demoTimings splits a run's wall time: waiting in the queue, setup (preparing to running: pins
// checked, workspace seeded, gateway, services, controller), agent (running to grading),
// grading (both phases, from report.json) and attesting (the rest: report, attestation, record).
func demoTimings(seed int64, r api.Record, t map[string]time.Time) string {
	d := func(a, b time.Time) string {
		if a.IsZero() || b.IsZero() {
			return "—"
		}
		return roundDuration(b.Sub(a))
	}
	grading, attesting := "—", d(t[api.StateGrading], r.Finished)
	if rep, err := readReport(filepath.Join(r.Dir, "report.json")); err == nil && !t[api.StateGrading].IsZero() && !r.Finished.IsZero() {
		gd := time.Duration(rep.Timings.AnswersMS+rep.Timings.BitsMS) * time.Millisecond
		grading = roundDuration(gd)
		attesting = roundDuration(max(0, r.Finished.Sub(t[api.StateGrading])-gd))
	}
	return fmt.Sprintf("seed %d: queued %s, setup %s, agent %s, grading %s, attesting %s (%s)", seed,
		d(t["queued"], t[api.StatePreparing]), d(t[api.StatePreparing], t[api.StateRunning]), d(t[api.StateRunning], t[api.StateGrading]), grading, attesting, r.State)
}

// roundDuration prints milliseconds under a second, tenths of a second above.
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func readReport(path string) (*report.Exam, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report.Exam
	return &r, json.Unmarshal(b, &r)
}

// isShipped says whether name is a scaffold sealrun ships (scaffolds/NAME).
func isShipped(name string) bool {
	_, ok := scaffolds.Lookup(name)
	return ok
}

// scaffoldDemoTrack pins the demo track's [scaffold] to a shipped scaffold (its image's labels:
// version and config template hash).
func scaffoldDemoTrack(text string, sc *scaffolds.Scaffold) string {
	head, rest, _ := strings.Cut(text, "[scaffold]\n")
	_, tail, _ := strings.Cut(rest, "\n\n") // the demo track's [scaffold] lines
	section := fmt.Sprintf("name = %q         # the real scaffold, driven by a scripted model (provider scripted)\nversion = %q\nconfig_sha256 = %q # %s/%s",
		sc.Name, sc.Version, sc.ConfigSHA256(), sc.Dir(), sc.Config)
	return head + "[scaffold]\n" + section + "\n\n" + tail
}

// scaffoldDemoSteps is the scripted model's conversation with a real scaffold: each turn one
// call of the scaffold's shell tool, chosen from the last tool output as the scripted demo
// scaffold chooses (kits/demo-agent/agent.sh, its first half: one training call, one candidate).
func scaffoldDemoSteps() []scriptedmodel.Step {
	reserve := regexp.MustCompile(`reserve window starts in ([0-9hms.]+)`)
	candidate := regexp.MustCompile(`candidate ([0-9a-f]{6,})`)
	return []scriptedmodel.Step{
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
	rec  api.Record
	t    map[string]time.Time
}

// demoPublish gathers the demo's runs as an operator would (sealrun results gather), exports the
// run ledger, and publishes them with the track and the key (sealrun publish).
func demoPublish(ctx context.Context, c *client.Client, lg *demoLog, state, demoDir, pubDir, pub, trackFile, witnessName, version string, runs []*demoRun) error {
	results := filepath.Join(demoDir, "results")
	if err := os.MkdirAll(results, 0o755); err != nil {
		return err
	}
	// What an operator learns after a run is said by an amendment (sealrun amend): here a note on
	// the first seed, signed, kept beside the run and in the ledger, and shown by the boards, the
	// run's page and the publication.
	am, err := c.Amend(ctx, runs[0].rec.ID, api.AmendRequest{Action: ledger.ActionNote, Reason: "a note the demo's operator added after the run (sealrun amend): the run stays in the mean, its attestation unchanged"})
	if err != nil {
		return fmt.Errorf("amend run %s: %w", runs[0].rec.ID, err)
	}
	lg.printf("    amendment: seed %d noted (sealrun amend): %s, ledger entry %d", runs[0].seed, am.Path, am.Entry)
	for _, r := range runs {
		rec, err := c.Run(ctx, r.rec.ID) // with its amendments
		if err != nil {
			return fmt.Errorf("gather run %s: %w", r.rec.ID, err)
		}
		if _, err := c.Gather(ctx, rec, results); err != nil {
			return fmt.Errorf("gather run %s: %w", r.rec.ID, err)
		}
	}
	ledgerOut := filepath.Join(demoDir, "ledger-demo.jsonl")
	witnessed, err := exportWitnessed(ctx, state, ledgerOut, witnessName)
	if err != nil {
		return fmt.Errorf("export the run ledger with its witnessed head: %w", err)
	}
	lg.printf("    run ledger: %s (%s)", ledgerOut, witnessed)
	// Written beside the previous demo's publication, which stays until this one is whole.
	next := pubDir + ".next"
	if err := os.RemoveAll(next); err != nil {
		return err
	}
	// The list of files is signed with the host's key, beside which its public half sits.
	signer, err := attest.LoadSigner(ctx, filepath.Join(filepath.Dir(pub), attest.PrivateKeyFile), nil)
	if err != nil {
		return fmt.Errorf("load the host's key to sign the publication's list: %w", err)
	}
	if _, err := publish.Write(publish.Options{Out: next, Suite: leaderboard.SuiteExam, Keys: []string{pub}, Tracks: []string{trackFile}, Ledgers: []string{ledgerOut}, Inputs: []string{results}, Version: version, Signer: signer}); err != nil {
		os.RemoveAll(next)
		return fmt.Errorf("publish the demo's runs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		os.RemoveAll(next)
		return err
	}
	return replaceDir(next, pubDir)
}

// replaceDir puts the directory next in dir's place in one step (renameat2's exchange where dir
// exists), then removes what was there: dir is the old one or the new one, never neither.
func replaceDir(next, dir string) error {
	err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.ENOENT) {
		err = os.Rename(next, dir) // no earlier one
	}
	if err != nil {
		return fmt.Errorf("put the new publication %s in place of %s: %w", next, dir, err)
	}
	if err := os.RemoveAll(next); err != nil { // the old one, now
		return fmt.Errorf("remove the previous publication (now %s): %w", next, err)
	}
	return nil
}
