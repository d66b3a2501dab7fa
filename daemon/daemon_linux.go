package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
)

// submitted is the journal payload of a new run.
type submitted struct {
	Track   string `json:"track"` // the track file's bytes (also in <run>/track.toml)
	Agent   string `json:"agent"`
	Seed    int64  `json:"seed"`
	User    string `json:"user"`
	RerunOf string `json:"rerun_of,omitempty"`
	// An outside scheduler's run (RunRequest): its GPUs and job.
	GPUs       []string `json:"gpus,omitempty"`
	Dispatcher string   `json:"dispatcher,omitempty"`
	// A human run's person and proctors (RunRequest).
	Person   *api.Person `json:"person,omitempty"`
	Proctors []string    `json:"proctors,omitempty"`
}

// Daemon is sealrund: the runs, their queue and the executor.
type Daemon struct {
	cfg  *hostconfig.Config
	x    *Executor
	j    *Journal
	log  *slog.Logger
	mu   sync.Mutex
	runs map[string]*api.Record
	spec map[string]RunSpec
	// amendMu makes one amendment at a time: its check, its file and its ledger entry.
	amendMu sync.Mutex
	// cancel of each running run; queued runs are cancelled by state alone.
	cancel  map[string]context.CancelFunc
	active  int
	wake    chan struct{}
	subs    map[chan api.Event]string // live event subscribers, by run ("" for all)
	live    liveTranscripts           // the transcripts of runs being followed (GET /v1/runs/{id}/transcript)
	wg      sync.WaitGroup
	metrics *metrics
	tracks  map[string]*policy.Track // parsed track files, by content
	// freeGPUs and freeCPUs are what no run holds (for ps).
	freeGPUs []string
	freeCPUs int64
	// ledger is the host's run ledger; broken is the first failure to write the journal or the
	// ledger: from then on the daemon takes no run (ErrBroken) until restarted.
	ledger *ledger.Log
	broken error
	// witnesses shows the ledger's heads to [[witnesses]] (nil: none configured); cosigs keeps
	// what they cosigned.
	witnesses *witness.Follower
	cosigs    *witness.Cosignatures
}

// ErrBroken: the daemon could not write its journal or ledger and takes no new runs.
var ErrBroken = errors.New("the daemon takes no new runs")

// fail records the first journal or ledger write that failed: the daemon stops taking runs and
// cancels the running ones (they end invalid, the reason in their attestations); the log and
// the metrics (sealrun_daemon_broken) say why.
func (d *Daemon) fail(what string, err error) {
	d.mu.Lock()
	first := d.broken == nil
	if first {
		d.broken = fmt.Errorf("%s: %w", what, err)
	}
	cancels := make([]context.CancelFunc, 0, len(d.cancel))
	for _, c := range d.cancel {
		cancels = append(cancels, c)
	}
	d.mu.Unlock()
	if !first {
		return
	}
	d.log.Error("the daemon takes no new runs and ends the running ones invalid: fix the disk and restart sealrund", "failed", what, "err", err)
	d.x.failure.Store(&brokenErr{fmt.Errorf("%s: %w", what, err)})
	for _, c := range cancels {
		c()
	}
}

type brokenErr struct{ error }

// Broken is the write failure that stopped the daemon taking runs, or nil.
func (d *Daemon) Broken() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}

// hostCPUs is how many CPUs runs may take: [resources] cpus, or every CPU of the host.
func (d *Daemon) hostCPUs() int64 {
	return int64(len(d.hostCPUSet()))
}

// hostCPUSet is the CPUs runs may take: those this process may run on (its affinity, which its
// cgroup's cpuset bounds), the first [resources] cpus of them when that is set. Each run is
// pinned to CPUs of its own from these.
func (d *Daemon) hostCPUSet() []int {
	var set unix.CPUSet
	var cpus []int
	if unix.SchedGetaffinity(0, &set) == nil {
		for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	if len(cpus) == 0 {
		for c := 0; c < runtime.NumCPU(); c++ {
			cpus = append(cpus, c)
		}
	}
	if n := d.cfg.Resources.CPUs; n > 0 && int(n) < len(cpus) {
		cpus = cpus[:n]
	}
	return cpus
}

// New opens the journal, replays it and reconciles what a previous daemon left: runs that were
// not finished become invalid (reason: daemon restart), their leftovers are removed, and a rerun
// of each is queued and linked. Finished runs are untouched.
func New(ctx context.Context, cfg *hostconfig.Config, x *Executor, log *slog.Logger) (*Daemon, error) {
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "runs")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
	}
	d := &Daemon{cfg: cfg, x: x, log: log, runs: map[string]*api.Record{}, spec: map[string]RunSpec{}, cancel: map[string]context.CancelFunc{},
		wake: make(chan struct{}, 1), subs: map[chan api.Event]string{}}
	d.metrics = newMetrics(d)
	j, err := OpenJournal(filepath.Join(cfg.StateDir, "journal.jsonl"), d.apply)
	if err != nil {
		return nil, err
	}
	d.j = j
	x.Journal = j
	x.onFail = d.fail
	if x.Signer != nil {
		if d.ledger, err = ledger.Open(filepath.Join(cfg.StateDir, "ledger.jsonl"), ledgerOrigin(cfg), x.Signer); err != nil {
			j.Close()
			return nil, err
		}
		x.Ledger = d.ledger
		if err := d.reconcileLedger(); err != nil {
			d.Close()
			return nil, err
		}
		d.dropUnledgeredAmendments()
		if len(cfg.Witnesses) > 0 {
			if d.cosigs, err = witness.OpenCosignatures(filepath.Join(cfg.StateDir, witness.CosignaturesFile)); err != nil {
				d.Close()
				return nil, err
			}
			d.witnesses = witness.NewFollower(d.ledger, cfg.WitnessTargets(), d.cosigs, log.With("part", "witnesses"))
		}
	}
	if x.KillAfter != "" { // a test failpoint: see Journal.KillAfter
		point, nth, _ := strings.Cut(x.KillAfter, "#")
		n, _ := strconv.Atoi(nth)
		j.KillAfter(point, max(n, 1))
	}
	x.onEvent = d.publish
	reaped, err := x.Host.Reap(ctx)
	if err != nil {
		log.Warn("reap leftovers", "err", err)
	} else if len(reaped.Containers)+len(reaped.Runs) > 0 {
		log.Info("removed what a previous daemon left", "containers", len(reaped.Containers), "runs", len(reaped.Runs))
	}
	for _, p := range reaped.Stranded {
		log.Warn("removed a run's network namespace that a later mount over its directory had hidden (another program mounted it)", "netns", p)
	}
	if err := d.recover(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// recover ends what a previous daemon left unfinished: a queued run keeps its place, a run that
// had ended and been attested keeps its result (only its last journal event was lost), any other
// becomes invalid (daemon restart) and is attested so; then every invalid run but a cancelled or
// dispatched one gets its rerun.
func (d *Daemon) recover(ctx context.Context) error {
	var unfinished []*api.Record
	for _, r := range d.runs {
		if !r.Final() {
			unfinished = append(unfinished, r)
		}
	}
	sort.Slice(unfinished, func(i, k int) bool { return unfinished[i].Queued.Before(unfinished[k].Queued) })
	for _, r := range unfinished {
		spec, ok := d.spec[r.ID]
		if r.State == api.StateQueued && ok {
			continue // still waiting: it keeps its place
		}
		reason := "daemon restart"
		if d.finishedInLedger(r) {
			continue // it had ended and been attested; only its last journal event was lost
		}
		if !ok {
			if err := d.setState(r.ID, api.StateInvalid, reason); err != nil {
				return err
			}
			continue
		}
		os.RemoveAll(filepath.Join(r.Dir, "agent.sock"))
		d.invalidate(ctx, spec, reason, r.Started)
	}
	// Every invalid run but a cancelled one gets a rerun, linked both ways. Done here for all of
	// them, not only those just invalidated: a daemon killed between journaling a run invalid
	// and queueing its rerun left one without (found by the kill-at-every-journal-event test).
	var norerun []*api.Record
	for _, r := range d.runs {
		if s, ok := d.spec[r.ID]; ok && r.State == api.StateInvalid && r.RerunBy == "" && r.Reason != "cancelled" && s.Dispatcher == "" {
			norerun = append(norerun, r)
		}
	}
	sort.Slice(norerun, func(i, k int) bool { return norerun[i].Queued.Before(norerun[k].Queued) })
	for _, r := range norerun {
		d.rerun(d.spec[r.ID], r.Reason)
	}
	return nil
}

func mustTrackBytes(dir string) []byte {
	b, _ := os.ReadFile(filepath.Join(dir, "track.toml"))
	return b
}

// apply folds one journal event into the records (replay and live).
func (d *Daemon) apply(e api.Event) error {
	switch e.Kind {
	case api.EventSubmitted:
		var s submitted
		if err := json.Unmarshal(e.Data, &s); err != nil {
			return err
		}
		t := d.tracks[s.Track]
		if t == nil {
			var err error
			if t, err = policy.Parse(filepath.Join(d.cfg.StateDir, "runs", e.Run, "track.toml"), []byte(s.Track)); err != nil {
				return err
			}
			if d.tracks == nil {
				d.tracks = map[string]*policy.Track{}
			}
			d.tracks[s.Track] = t // runs of one track share its parse (a journal of 10,000 runs replays fast)
		}
		agent, err := controller.ParseAgent(s.Agent)
		if err != nil {
			return err
		}
		d.runs[e.Run] = &api.Record{ID: e.Run, Track: t.Name + " " + t.Version, TrackID: t.ID, Agent: s.Agent, Seed: s.Seed, User: s.User, RerunOf: s.RerunOf,
			Dispatcher: s.Dispatcher, GPUs: s.GPUs, State: api.StateQueued, Queued: e.Time, Dir: filepath.Join(d.cfg.StateDir, "runs", e.Run),
			Person: s.Person, Proctors: s.Proctors}
		d.spec[e.Run] = RunSpec{ID: e.Run, RerunOf: s.RerunOf, Track: t, Agent: agent, Seed: s.Seed, Queued: e.Time, User: s.User,
			WantGPUs: s.GPUs, Dispatcher: s.Dispatcher, Person: s.Person, Proctors: s.Proctors}
		if o := d.runs[s.RerunOf]; o != nil {
			o.RerunBy = e.Run
		}
	case api.EventState:
		r := d.runs[e.Run]
		if r == nil {
			return nil
		}
		r.State, r.Reason = e.State, e.Reason
		switch e.State {
		case api.StateRunning:
			r.Started = e.Time
			if s, ok := d.spec[e.Run]; ok {
				r.Deadline = e.Time.Add(s.Track.Budget.Wall)
			}
		case api.StateGraded, api.StateFailed, api.StateInvalid:
			r.Finished, r.Paused, r.Waiting = e.Time, time.Time{}, ""
		}
	case api.EventHumanWaiting:
		if r := d.runs[e.Run]; r != nil && r.State == api.StateRunning { // its clock has not started
			r.Waiting, r.Started, r.Deadline = e.Reason, time.Time{}, time.Time{}
		}
	case api.EventClockStarted, api.EventPaused, api.EventResumed:
		r := d.runs[e.Run]
		if r == nil {
			return nil
		}
		var data struct {
			Started, Deadline time.Time
		}
		json.Unmarshal(e.Data, &data)
		if !data.Started.IsZero() {
			r.Started = data.Started
		}
		if !data.Deadline.IsZero() {
			r.Deadline = data.Deadline
		}
		r.Waiting, r.Paused = "", time.Time{}
		if e.Kind == api.EventPaused {
			r.Paused = e.Time
		}
	case api.EventResult:
		if r := d.runs[e.Run]; r != nil {
			var res struct {
				Passed    int      `json:"passed"`
				Questions int      `json:"questions"`
				Metric    string   `json:"metric"`
				Value     *float64 `json:"value"`
			}
			json.Unmarshal(e.Data, &res)
			if res.Metric != "" {
				r.Metric, r.Value = res.Metric, res.Value
			} else {
				r.Passed, r.Questions = &res.Passed, res.Questions
			}
		}
	}
	return nil
}

// record appends an event, then applies it and tells subscribers (publish); it fails when the
// journal does.
func (d *Daemon) record(e api.Event) error {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if err := d.j.Append(e); err != nil {
		d.fail("journal", err)
		return err
	}
	d.publish(e)
	return nil
}

// publish applies a journaled event to the records (once: the executor journals its own and
// calls this) and hands it to the live subscribers; a run's end feeds the metrics.
func (d *Daemon) publish(e api.Event) {
	d.mu.Lock()
	d.apply(e)
	dir := ""
	if r := d.runs[e.Run]; r != nil {
		dir = r.Dir
	}
	for ch, run := range d.subs {
		if run == "" || run == e.Run {
			select {
			case ch <- e:
			default: // a slow follower misses events rather than stall the daemon
			}
		}
	}
	d.mu.Unlock()
	if e.Kind == api.EventState && (e.State == api.StateGraded || e.State == api.StateFailed || e.State == api.StateInvalid) && dir != "" {
		d.metrics.observeRun(dir, e.State)
	}
}

func (d *Daemon) setState(id, state, reason string) error {
	return d.record(api.Event{Run: id, Kind: api.EventState, State: state, Reason: reason})
}

// NewRunID makes a run id: r-<UTC time>-<random>.
func NewRunID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("r-%s-%s", now.UTC().Format("20060102-150405"), hex.EncodeToString(b[:]))
}

// ErrRefused is a run request the daemon declines (the message says why and how to fix it).
var ErrRefused = errors.New("refused")

// Submit queues a run after checking the track, the agent, every pin and the seed.
func (d *Daemon) Submit(trackFile []byte, trackName, agentS string, seed int64, rerun bool, user string) (*api.Record, error) {
	return d.SubmitRequest(api.RunRequest{Track: string(trackFile), TrackName: trackName, Agent: agentS, Seed: seed, Rerun: rerun}, user)
}

// SubmitRequest is Submit with an outside scheduler's fields (RunRequest): the GPUs the run
// must use, the invalid run it reruns, the job that dispatched it.
func (d *Daemon) SubmitRequest(req api.RunRequest, user string) (*api.Record, error) {
	trackFile, trackName, agentS, seed, rerun := []byte(req.Track), req.TrackName, req.Agent, req.Seed, req.Rerun || req.RerunOf != ""
	t, err := policy.Parse(trackName, trackFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	agent, err := controller.ParseAgent(agentS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRefused, err) // the agent field's own
	}
	if seed < 0 {
		return nil, fmt.Errorf("%w: %w", ErrRefused, opt.Field("seed", fmt.Sprintf("%d; seeds are 0 or more", seed)))
	}
	if n := t.Resources.CPUs; n > d.hostCPUs() {
		return nil, fmt.Errorf("%w: track %s needs %d CPUs per run; this host gives runs %d ([resources] cpus)", ErrRefused, t.Name, n, d.hostCPUs())
	}
	if n := int(t.Resources.GPUs); n > len(d.cfg.Resources.GPUs) {
		return nil, fmt.Errorf("%w: track %s needs %d GPUs per run; this host's configuration gives runs %d ([resources] gpus)", ErrRefused, t.Name, n, len(d.cfg.Resources.GPUs))
	}
	if err := d.checkDispatch(t, agent.String(), seed, req); err != nil {
		return nil, err
	}
	if _, err := d.x.Check(RunSpec{Track: t, Agent: agent}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	person, err := checkPeople(agent, req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	if !rerun {
		d.mu.Lock()
		for _, r := range d.runs {
			if r.TrackID == t.ID && r.Agent == agent.String() && r.Seed == seed && r.State != api.StateInvalid {
				d.mu.Unlock()
				return nil, fmt.Errorf("%w: %w", ErrRefused, opt.Field("seed", fmt.Sprintf("%d of %s on track %s already has run %s (%s): give another seed, or run it again", seed, agent, t.Name, r.ID, r.State), "rerun"))
			}
		}
		d.mu.Unlock()
	}
	return d.submit(t, trackFile, submitted{Agent: agent.String(), Seed: seed, User: user, RerunOf: req.RerunOf, GPUs: req.GPUs, Dispatcher: req.Dispatcher, Person: person, Proctors: req.Proctors})
}

// maxDispatcher bounds RunRequest.Dispatcher (it is shown and journaled).
const maxDispatcher = 200

// checkDispatch checks an outside scheduler's fields of a request: GPUs that are this host's
// and enough for the track, a rerun link to an invalid run of the same seed, a job name.
func (d *Daemon) checkDispatch(t *policy.Track, agent string, seed int64, req api.RunRequest) error {
	if req.CPUs < 0 || req.Memory < 0 {
		return fmt.Errorf("%w: %w", ErrRefused, opt.Field("cpus", fmt.Sprintf("%d, memory %d: both are 0 (not given) or more", req.CPUs, req.Memory)))
	}
	if req.CPUs > 0 && t.Resources.CPUs > req.CPUs {
		return fmt.Errorf("%w: track %s needs %d CPUs per run; the job was given %d (sbatch --cpus-per-task=%d)", ErrRefused, t.Name, t.Resources.CPUs, req.CPUs, t.Resources.CPUs)
	}
	if req.Memory > 0 && t.Resources.Memory > req.Memory {
		return fmt.Errorf("%w: track %s needs %d MiB of memory per run; the job was given %d MiB (sbatch --mem=%dM)", ErrRefused, t.Name, t.Resources.Memory>>20, req.Memory>>20, (t.Resources.Memory+(1<<20)-1)>>20)
	}
	// A dispatched run uses only the GPUs its scheduler gave (none given: none), never the
	// host's free ones, which the scheduler may have given to another job.
	if len(req.GPUs) > 0 || req.Dispatcher != "" {
		if len(req.GPUs) < int(t.Resources.GPUs) {
			return fmt.Errorf("%w: %w", ErrRefused, opt.Field("gpus", fmt.Sprintf("%d GPUs (%s); track %s needs %d per run (sbatch --gres=gpu:%d)", len(req.GPUs), strings.Join(req.GPUs, ","), t.Name, t.Resources.GPUs, t.Resources.GPUs)))
		}
		seen := map[string]bool{}
		for _, g := range req.GPUs {
			if seen[g] {
				return fmt.Errorf("%w: %w", ErrRefused, opt.Field("gpus", g+" is named twice"))
			}
			seen[g] = true
			if !slices.Contains(d.cfg.Resources.GPUs, g) {
				return fmt.Errorf("%w: %w", ErrRefused, opt.Field("gpus", fmt.Sprintf("%s is not one of this host's GPUs ([resources] gpus: %s); use their CDI names (sealrun doctor lists them)", g, strings.Join(d.cfg.Resources.GPUs, ", "))))
			}
		}
	}
	if req.RerunOf != "" {
		if !attest.ValidRunID(req.RerunOf) {
			return fmt.Errorf("%w: %w", ErrRefused, opt.Field("rerun_of", fmt.Sprintf("%q is not a run id", req.RerunOf)))
		}
		d.mu.Lock()
		o := d.runs[req.RerunOf]
		d.mu.Unlock()
		// A run of another host is not known here; the leaderboard links it by its attestation.
		if o != nil && (o.State != api.StateInvalid || o.TrackID != t.ID || o.Agent != agent || o.Seed != seed || o.RerunBy != "") {
			return fmt.Errorf("%w: %w", ErrRefused, opt.Field("rerun_of", fmt.Sprintf("%s: that run is %s (track %s, %s, seed %d, rerun by %q); only an invalid run of the same track, agent and seed without a rerun can be rerun", o.ID, o.State, o.Track, o.Agent, o.Seed, o.RerunBy)))
		}
	}
	if len(req.Dispatcher) > maxDispatcher || strings.ContainsFunc(req.Dispatcher, unicode.IsControl) {
		return fmt.Errorf("%w: %w", ErrRefused, opt.Field("dispatcher", fmt.Sprintf("is longer than %d bytes or holds control characters", maxDispatcher)))
	}
	return nil
}

func (d *Daemon) submit(t *policy.Track, trackFile []byte, sub submitted) (*api.Record, error) {
	if err := d.Broken(); err != nil {
		return nil, fmt.Errorf("%w: %w after %v; see the daemon's log, fix the disk and restart sealrund", ErrRefused, ErrBroken, err)
	}
	id := NewRunID(time.Now())
	dir := filepath.Join(d.cfg.StateDir, "runs", id)
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, err
	}
	if err := fileio.WriteAtomic(filepath.Join(dir, "track.toml"), 0o644, func(w io.Writer) error { _, err := w.Write(trackFile); return err }); err != nil {
		return nil, err
	}
	sub.Track = string(trackFile)
	data, _ := json.Marshal(sub)
	if err := d.record(api.Event{Run: id, Kind: api.EventSubmitted, Data: data}); err != nil {
		return nil, err
	}
	if err := d.ledgerQueued(id); err != nil {
		// Journaled but not in the ledger: not acknowledged, and the daemon takes no more runs
		// (a restart that can write appends the entry, or the run is reconciled invalid).
		return nil, err
	}
	d.kick()
	d.mu.Lock()
	defer d.mu.Unlock()
	r := *d.runs[id]
	return &r, nil
}

func (d *Daemon) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Cancel ends a run in any state; it becomes invalid (reason: cancelled).
func (d *Daemon) Cancel(id string) (*api.Record, error) {
	d.mu.Lock()
	r := d.runs[id]
	if r == nil {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: no run %s (sealrun ps -a lists them)", ErrRefused, id)
	}
	if r.Final() {
		c := *r
		d.mu.Unlock()
		return &c, fmt.Errorf("%w: run %s has already ended (%s)", ErrRefused, id, r.State)
	}
	cancel := d.cancel[id]
	queued := r.State == api.StateQueued && cancel == nil // not yet started by Serve
	d.mu.Unlock()
	if queued {
		d.mu.Lock()
		spec := d.spec[id]
		d.mu.Unlock()
		if err := d.invalidate(context.Background(), spec, "cancelled", time.Time{}); err != nil {
			return nil, err
		}
	} else if cancel != nil {
		cancel()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	c := *d.runs[id]
	return &c, nil
}

// Runs lists the records, newest first.
func (d *Daemon) Runs() []api.Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.Record, 0, len(d.runs))
	for _, r := range d.runs {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, k int) bool {
		return out[i].Queued.After(out[k].Queued) || (out[i].Queued.Equal(out[k].Queued) && out[i].ID > out[k].ID)
	})
	// Queued runs: their place (oldest first) and what they wait for.
	pos := 0
	for i := len(out) - 1; i >= 0; i-- {
		r := &out[i]
		if r.State != api.StateQueued {
			continue
		}
		pos++
		need := 0
		if s, ok := d.spec[r.ID]; ok {
			need = int(s.Track.Resources.GPUs)
		}
		switch {
		case d.broken != nil:
			r.Waiting = fmt.Sprintf("not started: the daemon takes no new runs (%v); restart sealrund", d.broken)
		case pos > 1:
			r.Waiting = fmt.Sprintf("#%d in the queue, behind %d older runs", pos, pos-1)
		case d.active >= max(1, d.cfg.Resources.Concurrency):
			r.Waiting = fmt.Sprintf("#1: waiting for a run slot (%d running, concurrency %d)", d.active, max(1, d.cfg.Resources.Concurrency))
		case need > 0 && len(r.GPUs) > 0 && !takesGPUs(d.freeGPUs, need, r.GPUs):
			r.Waiting = fmt.Sprintf("#1: waiting for its GPUs %s (dispatched with them)", strings.Join(r.GPUs[:min(need, len(r.GPUs))], ", "))
		case len(r.GPUs) == 0 && need > len(d.freeGPUs):
			r.Waiting = fmt.Sprintf("#1: waiting for GPUs (%d needed, %d free)", need, len(d.freeGPUs))
		case d.spec[r.ID].Track != nil && d.spec[r.ID].Track.Resources.CPUs > d.freeCPUs:
			r.Waiting = fmt.Sprintf("#1: waiting for CPUs (%d needed, %d free)", d.spec[r.ID].Track.Resources.CPUs, d.freeCPUs)
		default:
			r.Waiting = "#1: starting"
		}
	}
	return out
}

// Run is one record.
func (d *Daemon) Run(id string) (api.Record, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.runs[id]
	if !ok {
		return api.Record{}, false
	}
	return *r, true
}

// Subscribe returns a channel of live events of run ("" for all) and its cancel.
func (d *Daemon) Subscribe(run string) (chan api.Event, func()) {
	ch := make(chan api.Event, 256)
	d.mu.Lock()
	d.subs[ch] = run
	d.mu.Unlock()
	return ch, func() {
		d.mu.Lock()
		delete(d.subs, ch)
		d.mu.Unlock()
	}
}

// execute runs one run (its context rctx, cancelled by cancel) and queues its rerun when it ended
// invalid for any reason but a cancel, unless the daemon is stopping (ctx) or an outside
// scheduler dispatched it.
func (d *Daemon) execute(ctx, rctx context.Context, cancel context.CancelFunc, spec RunSpec) {
	out, err := d.x.Execute(rctx, spec)
	cancelled := rctx.Err() != nil
	cancel()
	reason := ""
	switch {
	case err != nil && cancelled:
		d.invalidate(context.Background(), spec, "cancelled", time.Time{})
	case err != nil:
		d.log.Error("run refused at start", "run", spec.ID, "err", err)
		d.invalidate(context.Background(), spec, err.Error(), time.Time{})
		reason = err.Error()
	case err == nil && out.Status == outcome.Invalid:
		reason = out.Reason
	}
	if reason != "" && reason != "cancelled" && ctx.Err() == nil && spec.Dispatcher == "" {
		d.rerun(spec, reason)
	}
}

// nextQueued is the oldest queued run not started yet, or nil; d.mu is held. A run started here
// stays queued until its Execute records preparing: the cancel func marks it started, so it is
// never started twice.
func (d *Daemon) nextQueued() *api.Record {
	var next *api.Record
	for _, r := range d.runs {
		if r.State == api.StateQueued && d.cancel[r.ID] == nil && (next == nil || r.Queued.Before(next.Queued)) {
			next = r
		}
	}
	return next
}

// Serve runs the queue until ctx ends: queued runs start in order while the concurrency and
// the GPUs allow. At the end, running runs are cancelled (they end invalid) and waited for.
func (d *Daemon) Serve(ctx context.Context) {
	if d.witnesses != nil {
		// Heads go to the witnesses beside the runs: nothing here waits for them.
		d.wg.Add(1)
		go func() { defer d.wg.Done(); d.witnesses.Run(ctx) }()
	}
	gpusFree := append([]string(nil), d.cfg.Resources.GPUs...)
	cpusFree := d.hostCPUSet()
	d.mu.Lock()
	d.freeGPUs, d.freeCPUs = slices.Clone(gpusFree), int64(len(cpusFree))
	d.mu.Unlock()
	type done struct {
		id   string
		gpus []string
		cpus []int
	}
	finished := make(chan done, 128) // more than the most runs at once (64): a run's end never blocks
	for {
		// Start what fits, oldest first.
		for {
			d.mu.Lock()
			next := d.nextQueued()
			if next == nil || d.active >= max(1, d.cfg.Resources.Concurrency) || d.broken != nil {
				// (A broken daemon starts nothing: what it cannot record must not run.)
				d.mu.Unlock()
				break
			}
			spec := d.spec[next.ID]
			need := int(spec.Track.Resources.GPUs)
			needCPU := spec.Track.Resources.CPUs
			gpus, rest, ok := takeGPUs(gpusFree, need, spec.WantGPUs)
			if !ok || needCPU > int64(len(cpusFree)) {
				d.mu.Unlock()
				break // it waits for GPUs or CPUs; ps says so
			}
			gpusFree = rest
			cpus := slices.Clone(cpusFree[:needCPU])
			cpusFree = slices.Clone(cpusFree[needCPU:])
			d.freeGPUs, d.freeCPUs = slices.Clone(gpusFree), int64(len(cpusFree))
			spec.GPUs = gpus
			spec.CPUSet = sandbox.FormatCPUList(cpus)
			rctx, cancel := context.WithCancel(ctx)
			d.cancel[next.ID] = cancel
			d.active++
			id := next.ID
			d.mu.Unlock()
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.execute(ctx, rctx, cancel, spec)
				finished <- done{id, gpus, cpus}
			}()
		}
		select {
		case <-ctx.Done():
			d.wg.Wait()
			return
		case <-d.wake:
		case f := <-finished:
			d.mu.Lock()
			d.active--
			delete(d.cancel, f.id)
			gpusFree = append(gpusFree, f.gpus...)
			cpusFree = append(cpusFree, f.cpus...)
			slices.Sort(cpusFree)
			d.freeGPUs, d.freeCPUs = slices.Clone(gpusFree), int64(len(cpusFree))
			d.mu.Unlock()
		}
	}
}

// takeGPUs gives a run need GPUs from free: the first ones, or for a run dispatched with its
// GPUs (want) the first need of those, all of which must be free. ok is false when it waits.
func takeGPUs(free []string, need int, want []string) (gpus, rest []string, ok bool) {
	pick := free
	if len(want) > 0 {
		pick = want
	}
	if need > len(pick) {
		return nil, free, false
	}
	gpus = append([]string(nil), pick[:need]...)
	for _, g := range gpus {
		if !slices.Contains(free, g) {
			return nil, free, false
		}
	}
	rest = slices.DeleteFunc(slices.Clone(free), func(g string) bool { return slices.Contains(gpus, g) })
	return gpus, rest, true
}

// takesGPUs says whether takeGPUs would give the run its GPUs now.
func takesGPUs(free []string, need int, want []string) bool {
	_, _, ok := takeGPUs(free, need, want)
	return ok
}

// MaxReruns bounds a chain of automatic reruns: a host that fails every run stops after this.
const MaxReruns = 3

// rerun queues a rerun of an invalid run (the infrastructure's fault; a cancel is the
// operator's choice and is not rerun), linked both ways, unless the chain is already long.
func (d *Daemon) rerun(spec RunSpec, reason string) {
	d.mu.Lock()
	depth := 0
	for r := d.runs[spec.ID]; r != nil && r.RerunOf != ""; r = d.runs[r.RerunOf] {
		depth++
	}
	dir := ""
	if r := d.runs[spec.ID]; r != nil {
		dir = r.Dir
	}
	d.mu.Unlock()
	if depth >= MaxReruns {
		d.log.Error("not rerun: the chain of reruns is long; fix the host (sealrun doctor)", "run", spec.ID, "reruns", depth, "reason", reason)
		return
	}
	if _, err := d.submit(spec.Track, mustTrackBytes(dir), submitted{Agent: spec.Agent.String(), Seed: spec.Seed, User: "sealrund (rerun: " + reason + ")", RerunOf: spec.ID, Person: spec.Person, Proctors: spec.Proctors}); err != nil {
		d.log.Warn("queue a rerun", "run", spec.ID, "err", err)
	}
}

// invalidate ends a run invalid with its attestation; when not even that can be written, the
// state is journaled alone.
func (d *Daemon) invalidate(ctx context.Context, spec RunSpec, reason string, started time.Time) error {
	if _, err := d.x.Invalidate(ctx, spec, reason, started); err != nil {
		d.log.Warn("attest an invalid run", "run", spec.ID, "err", err)
		if err := d.setState(spec.ID, api.StateInvalid, reason+" (not attested: "+err.Error()+")"); err != nil {
			return err
		}
		return d.x.ledgerEnded(spec.ID, outcome.Invalid, reason+" (not attested)", "")
	}
	return nil
}

// Close closes the journal and the ledger.
func (d *Daemon) Close() error {
	if d.ledger != nil {
		d.ledger.Close()
	}
	if d.cosigs != nil {
		d.cosigs.Close()
	}
	return d.j.Close()
}

// hostOf builds the sandbox host and image store of a configuration.
func hostOf(cfg *hostconfig.Config) (*sandbox.Host, *images.Store, error) {
	h, err := sandbox.NewHost(sandbox.HostConfig{StateDir: cfg.StateDir, RunDir: cfg.RunDir, Runtime: cfg.Runtime, RoleRuntimes: cfg.RoleRuntimes(), Hook: cfg.Hook, CgroupParent: cfg.CgroupParent})
	if err != nil {
		return nil, nil, err
	}
	s, err := images.OpenStore(cfg.StateDir)
	if err != nil {
		return nil, nil, err
	}
	return h, s, nil
}
