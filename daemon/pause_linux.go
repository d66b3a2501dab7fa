package daemon

// Pauses of a human run (sealrun pause RUN --reason, where the track's human.pauses allows them):
// the operator stops the run's clock and freezes the person's shell (the controller) and the
// compute call under way; the pause's end (sealrun resume, or its length up) thaws them and moves
// the deadline by its length. Each pause is in the audit log as it begins and ends, and in the
// attestation's timeline; a reader sees who granted it, why and for how long.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/runner"
)

// MaxPause bounds the length one pause request may ask for.
const MaxPause = 24 * time.Hour

// errPause is a pause or resume refused for the run's state: the API answers 409 with it.
var errPause = errors.New("refused")

// pauser pauses the run it serves: what a pause freezes (the controller, the runner's call) and
// the pauses granted so far.
type pauser struct {
	rs   *runState
	ctl  *controller.Controller
	rsvc *runner.Service

	mu    sync.Mutex
	cur   *attest.Pause // the pause under way
	timer *time.Timer   // ends it when its length is up
	done  []attest.Pause
	ended bool
}

func pauseRefused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errPause, fmt.Sprintf(format, args...))
}

// pause begins a pause of at most d (zero: what the allowance leaves), granted by by for reason.
func (p *pauser) pause(by, reason string, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.rs
	allowed := rs.t.Human.Pauses
	left := allowed - rs.clock.PausedFor()
	switch {
	case p.ended:
		return pauseRefused("run %s is ending: there is nothing left to pause", rs.spec.ID)
	case p.cur != nil:
		return pauseRefused("run %s is already paused, since %s (by %s: %s); sealrun resume %s ends the pause", rs.spec.ID, p.cur.Start.UTC().Format(time.TimeOnly), p.cur.By, p.cur.Reason, rs.spec.ID)
	case allowed == 0:
		return pauseRefused("track %s allows no pauses: its [human] table has no pauses (how long, in all, a run may be paused); a track author adds one, as docs/OPERATING.md shows", rs.t.Name)
	case left < time.Second:
		return pauseRefused("run %s has had its pauses: the track allows %s in all, and they have been used", rs.spec.ID, allowed)
	case rs.clock.Phase() == policy.PhaseOver:
		return pauseRefused("run %s is past its deadline: there is nothing left to pause", rs.spec.ID)
	}
	if d <= 0 || d > left {
		d = left
	}
	at, _ := rs.clock.Pause()
	// Compute first (no new call may start), then the shell. A freeze the host cannot do is the
	// host's failure: the run ends invalid.
	err := p.rsvc.Pause()
	if err == nil {
		err = p.ctl.Container().Freeze()
	}
	if err != nil {
		p.rsvc.Resume()
		p.ctl.Container().Thaw()
		rs.clock.Resume()
		rs.io.onInfra(fmt.Errorf("a pause could not freeze the run: %w", err))
		return fmt.Errorf("the host could not freeze run %s for a pause (%v): the run ends invalid, and is rerun", rs.spec.ID, err)
	}
	p.cur = &attest.Pause{Start: at, By: by, Reason: reason}
	p.append(audit.Pause{Time: at.UTC(), Event: audit.PauseStart, By: by, Reason: reason, For: d.String(), Left: (left - d).String()})
	p.timer = time.AfterFunc(d, func() { p.resume("sealrund", fmt.Sprintf("its length (%s) was up", d)) })
	rs.x.emit(api.Event{Run: rs.spec.ID, Kind: api.EventPaused, Reason: fmt.Sprintf("by %s for at most %s: %s", by, d, reason)})
	return nil
}

// resume ends the pause under way: by who or what, and why.
func (p *pauser) resume(by, why string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return pauseRefused("run %s is not paused", p.rs.spec.ID)
	}
	p.endLocked(by, why)
	return nil
}

func (p *pauser) endLocked(by, why string) {
	rs := p.rs
	p.timer.Stop()
	// The shell first, then compute: the call's limit moves with the clock.
	thawErr := p.ctl.Container().Thaw()
	if err := p.rsvc.Resume(); thawErr == nil {
		thawErr = err
	}
	d := rs.clock.Resume()
	pz := *p.cur
	pz.End = pz.Start.Add(d)
	p.done = append(p.done, pz)
	p.cur = nil
	deadline := rs.clock.Schedule().Deadline
	p.append(audit.Pause{Time: pz.End.UTC(), Event: audit.PauseEnd, By: by, Reason: why, Length: d.Round(time.Millisecond).String(), Deadline: deadline.UTC(),
		Left: max(0, rs.t.Human.Pauses-rs.clock.PausedFor()).String()})
	data, _ := json.Marshal(map[string]time.Time{"deadline": deadline.UTC()})
	rs.x.emit(api.Event{Run: rs.spec.ID, Kind: api.EventResumed, Reason: fmt.Sprintf("after %s, by %s: %s; the deadline is now %s", d.Round(time.Second), by, why, deadline.UTC().Format(time.TimeOnly)), Data: data})
	if thawErr != nil {
		rs.io.onInfra(fmt.Errorf("the end of a pause could not thaw the run: %w", thawErr))
	}
}

func (p *pauser) append(rec audit.Pause) {
	if _, _, err := p.rs.io.log.Append(audit.KindPause, rec); err != nil {
		p.rs.io.onInfra(fmt.Errorf("audit log: %w", err))
	}
}

// stop ends the pause under way (the run is ending) and returns the pauses granted, for the
// attestation; none may begin after it.
func (p *pauser) stop(why string) []attest.Pause {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil {
		p.endLocked("sealrund", why)
	}
	p.ended = true
	return p.done
}

// pauseRun serves POST /v1/runs/{id}/pause.
func (d *Daemon) pauseRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, ok := d.pauserOf(w, id)
	if !ok {
		return
	}
	var req api.PauseRequest
	if !decodeRequest(w, r, &req, `a pause request (JSON with reason and, optionally, for: a duration such as "10m")`) {
		return
	}
	if err := api.CheckPauseReason(req.Reason); err != nil {
		writeErr(w, http.StatusBadRequest, "reason: %v", err)
		return
	}
	var length time.Duration
	if req.For != "" {
		var err error
		if length, err = time.ParseDuration(req.For); err != nil || length <= 0 || length > MaxPause {
			writeErr(w, http.StatusBadRequest, "for: %.40q is not a length of pause; give a duration from 1s to %s (such as \"10m\"), or none for what the track's allowance leaves", req.For, MaxPause)
			return
		}
	}
	who := peerOf(r).Who
	if err := p.pause(who, req.Reason, length); err != nil {
		writePauseErr(w, err)
		return
	}
	rec, _ := d.Run(id)
	writeJSON(w, http.StatusOK, rec)
}

// resumeRun serves POST /v1/runs/{id}/resume.
func (d *Daemon) resumeRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, ok := d.pauserOf(w, id)
	if !ok {
		return
	}
	who := peerOf(r).Who
	if err := p.resume(who, "resumed by the operator"); err != nil {
		writePauseErr(w, err)
		return
	}
	rec, _ := d.Run(id)
	writeJSON(w, http.StatusOK, rec)
}

// writePauseErr answers a refused pause or resume (409, its reason) or the host's failure (500).
func writePauseErr(w http.ResponseWriter, err error) {
	if errors.Is(err, errPause) {
		writeErr(w, http.StatusConflict, "%s", strings.TrimPrefix(err.Error(), errPause.Error()+": "))
		return
	}
	writeErr(w, http.StatusInternalServerError, "%v", err)
}

// pauserOf is the pauser of run id, or false with the refusal written.
func (d *Daemon) pauserOf(w http.ResponseWriter, id string) (*pauser, bool) {
	rec, ok := d.Run(id)
	switch {
	case !ok:
		writeErr(w, http.StatusNotFound, "no run %s (sealrun ps -a lists them)", id)
		return nil, false
	case !hostconfig.IsHuman(rec.Agent):
		writeErr(w, http.StatusConflict, "run %s is %s's, not a person's: only a human run pauses (an agent's clock is the host's alone)", id, rec.Agent)
		return nil, false
	case rec.Final():
		writeErr(w, http.StatusConflict, "run %s has ended (%s)", id, rec.State)
		return nil, false
	}
	var p *pauser
	if h := d.x.sessions.get(id); h != nil {
		p = h.pauser.Load()
	}
	if p == nil {
		writeErr(w, http.StatusConflict, "run %s is %s and its clock has not started (it waits for its person, or is being prepared): there is nothing to pause yet", id, rec.State)
		return nil, false
	}
	return p, true
}
