package daemon

// A run's transcript (transcript/): written beside the attestation when the run ends, and served
// live by the admin API while it runs — one builder a run, fed the audit log's new lines as a
// reader asks, so that a follower sees a new model turn or call within a second of its entry.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/transcript"
)

// Live transcript limits.
const (
	maxTranscriptWait = 30 * time.Second // the longest a reader's wait=S holds the request
	liveIdle          = 10 * time.Minute // a builder nobody asked for that long is dropped
)

// writeTranscript writes transcript.json and transcript.html into an ended run's directory,
// from its attestation's predicate (so that a reader of the same files rebuilds the same bytes).
func writeTranscript(dir string, pred *attest.Predicate) error {
	t, err := transcript.Build(dir, transcript.RunFromPredicate(pred), transcript.Options{})
	if err != nil {
		return err
	}
	return transcript.Write(dir, t)
}

// liveTranscripts are the builders of the runs being followed.
type liveTranscripts struct {
	mu   sync.Mutex
	runs map[string]*liveTranscript
}

type liveTranscript struct {
	mu   sync.Mutex
	b    *transcript.Builder
	off  int64 // the bytes of audit.jsonl read
	used time.Time
	err  error
}

func (l *liveTranscripts) get(id, dir string, run transcript.Run) *liveTranscript {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[string]*liveTranscript{}
	}
	now := time.Now()
	for k, v := range l.runs {
		if now.Sub(v.used) > liveIdle {
			delete(l.runs, k)
		}
	}
	lt := l.runs[id]
	if lt == nil {
		lt = &liveTranscript{b: transcript.NewBuilder(dir, run, transcript.Options{})}
		l.runs[id] = lt
	}
	lt.used = now
	return lt
}

func (l *liveTranscripts) drop(id string) {
	l.mu.Lock()
	delete(l.runs, id)
	l.mu.Unlock()
}

// update reads what the audit log gained since the last read.
func (lt *liveTranscript) update(dir string, run transcript.Run) {
	lt.b.SetRun(run)
	if lt.err != nil {
		return
	}
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return // not started yet
	}
	defer f.Close()
	if _, err := f.Seek(lt.off, 0); err != nil {
		lt.err = err
		return
	}
	n, err := lt.b.ReadFrom(f)
	lt.off += n
	lt.err = err
}

// liveRun is what the daemon knows of a run that has not been attested yet.
func liveRun(rec api.Record, t *policy.Track) transcript.Run {
	r := transcript.Run{ID: rec.ID, Track: rec.Track, TrackID: rec.TrackID, Agent: rec.Agent, Seed: rec.Seed, State: rec.State, Reason: rec.Reason,
		Result: rec.Score(), Started: rec.Started.UTC(), Deadline: rec.Deadline.UTC(), Finished: rec.Finished.UTC(), Live: !rec.Final()}
	if rec.Started.IsZero() {
		r.Started = time.Time{}
	}
	if rec.Deadline.IsZero() {
		r.Deadline = time.Time{}
	}
	if rec.Finished.IsZero() {
		r.Finished = time.Time{}
	}
	if t != nil {
		r.Track, r.TrackVersion = t.Name, t.Version
		r.Wall, r.CallLimit, r.Reserve = t.Budget.Wall.String(), t.Budget.CallLimit.String(), t.Budget.Reserve.String()
		if !r.Deadline.IsZero() {
			r.ReserveAt = r.Deadline.Add(-t.Budget.Reserve)
		}
	}
	return r
}

// transcriptOf answers GET /v1/runs/{id}/transcript?from=N&wait=S: the run's transcript with
// the events of audit entries after N only (all with from=0), waiting up to S seconds (at most
// 30) for one when there is none yet and the run goes on. An ended run's is its transcript.json.
func (d *Daemon) transcriptOf(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	from, err := strconv.Atoi(q.Get("from"))
	if q.Get("from") == "" {
		from, err = 0, nil
	}
	if err != nil || from < 0 {
		writeErr(w, http.StatusBadRequest, "from=%q: give the sequence number of the last audit entry you have (0 for all)", q.Get("from"))
		return
	}
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || n < 0 || n != n {
			writeErr(w, http.StatusBadRequest, "wait=%q: give the seconds to wait for a new entry (at most %d)", s, int(maxTranscriptWait.Seconds()))
			return
		}
		wait = min(time.Duration(n*float64(time.Second)), maxTranscriptWait)
	}
	ch, unsubscribe := d.Subscribe(id)
	defer unsubscribe()
	rec, ok := d.Run(id)
	if !ok {
		writeErr(w, http.StatusNotFound, "no run %s (sealrun ps -a lists them)", id)
		return
	}
	if rec.Final() {
		if t, err := transcript.Read(filepath.Join(rec.Dir, "transcript.json")); err == nil {
			d.live.drop(id)
			t.Events = after(t.Events, from)
			writeTranscriptJSON(w, t)
			return
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		rec, _ = d.Run(id)
		t, err := d.liveTranscript(rec, from)
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "run %s: %v", id, err)
			return
		}
		if len(t.Events) > 0 || rec.Final() || wait == 0 {
			writeTranscriptJSON(w, t)
			return
		}
		select {
		case <-ch: // an audit entry or a state change: look again, once a burst has landed
			settle := time.NewTimer(20 * time.Millisecond)
			select {
			case <-settle.C:
			case <-r.Context().Done():
			}
			settle.Stop()
		case <-deadline.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
		if r.Context().Err() != nil {
			return
		}
	}
}

// liveTranscript is the run's transcript as its audit log holds it now, with the events of the
// entries after from.
func (d *Daemon) liveTranscript(rec api.Record, from int) (*transcript.Transcript, error) {
	d.mu.Lock()
	track := d.spec[rec.ID].Track
	d.mu.Unlock()
	if track == nil {
		track, _ = policy.Load(filepath.Join(rec.Dir, "track.toml"))
	}
	run := liveRun(rec, track)
	lt := d.live.get(rec.ID, rec.Dir, run)
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.update(rec.Dir, run)
	if lt.err != nil {
		return nil, fmt.Errorf("its audit log could not be read past entry %d: %w", lt.b.After(0).Through, lt.err)
	}
	return lt.b.After(from), nil
}

func after(es []transcript.Event, seq int) []transcript.Event {
	out := []transcript.Event{}
	for _, e := range es {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out
}

// writeTranscriptJSON answers with a transcript, compact (a long run's is megabytes).
func writeTranscriptJSON(w http.ResponseWriter, t *transcript.Transcript) {
	b, err := transcript.Marshal(t)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
