package daemon

// Human runs (agent human/HANDLE, on a track with [human]): the controller is a shell on a
// terminal a person attaches to (sealrun attach, through the admin API's attach), under the same
// seal, budget and rules as a scaffold. The run waits for its person up to the track's
// human.start; the clock starts at the first attach, or when that wait is over, and never stops.
// A person who never attaches fails the run (their own fault); the host failing is invalid, as
// for agents.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/policy"
)

// MaxAttaches bounds the attach connections sealrund serves at once, all runs together;
// MaxAttachesPerUser those of one account, so that no one account can hold every slot and lock
// every person out of their run.
const (
	MaxAttaches        = 64
	MaxAttachesPerUser = 8
)

// checkHuman checks a human run's pins: the track takes human runs, and its human controller
// image (human.image, or the controller image) is in the store with a shell.
func (x *Executor) checkHuman(t *policy.Track, p *pins, agent controller.Agent) []error {
	if agent.Effort != "" {
		return []error{fmt.Errorf("agent %s: a person has no reasoning effort; write %s/%s", agent, hostconfig.HumanProvider, agent.Model)}
	}
	if t.Human == nil {
		return []error{fmt.Errorf("track %s takes no human runs (agent %s/HANDLE): it has no [human] table; add one (start = how long a run waits for its person) to the track, as docs/OPERATING.md shows", t.Name, hostconfig.HumanProvider)}
	}
	if t.Human.Image.Digest != "" {
		root, err := x.Store.Rootfs(string(t.Human.Image.Digest))
		if err != nil {
			return []error{fmt.Errorf("track %s pins the human controller image %s, which is not in the image store (%v); pull or import it (sealrun images pull %s)", t.Name, t.Human.Image, err, t.Human.Image)}
		}
		p.controller = root
	}
	if p.controller == "" {
		return nil // reported with the controller image
	}
	img := t.Images.Controller
	if t.Human.Image.Digest != "" {
		img = t.Human.Image
	}
	cf, err := x.Store.Config(string(img.Digest))
	if err != nil {
		return []error{fmt.Errorf("the human controller image %s: %v", img, err)}
	}
	if err := controller.CheckImageEnv(cf.Config.Env); err != nil {
		return []error{fmt.Errorf("the human controller image %s: %w", img, err)}
	}
	p.imageEnv, p.scaffold = cf.Config.Env, hostconfig.HumanProvider
	if _, err := os.Lstat(filepath.Join(p.controller, controller.HumanShell)); err != nil {
		return []error{fmt.Errorf("the human controller image %s has no %s: a person's run needs a shell; pin an image with one ([human] image)", img, controller.HumanShell)}
	}
	return nil
}

// humanRun is a human run's terminal while it is served.
type humanRun struct {
	sess    *controller.Session
	rec     *controller.Recording
	started atomic.Pointer[time.Time] // the clock's start, once it has started
	pauser  atomic.Pointer[pauser]    // while its controller runs: what a pause freezes
}

// sessions are the human runs being served, by run id (the attach handler's way in).
type sessions struct {
	mu       sync.Mutex
	m        map[string]*humanRun
	attaches int            // connections served (MaxAttaches)
	byUser   map[string]int // of them, each account's (MaxAttachesPerUser)
}

// acquire takes an attach slot for user; it says why not when none is left.
func (s *sessions) acquire(user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byUser[user] >= MaxAttachesPerUser:
		return fmt.Errorf("%s holds %d attaches already, all runs together (at most %d an account); detach one first", user, s.byUser[user], MaxAttachesPerUser)
	case s.attaches >= MaxAttaches:
		return fmt.Errorf("sealrund serves %d attaches at once, all runs together; detach one, or attach again later", MaxAttaches)
	}
	if s.byUser == nil {
		s.byUser = map[string]int{}
	}
	s.attaches++
	s.byUser[user]++
	return nil
}

func (s *sessions) release(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attaches--
	if s.byUser[user]--; s.byUser[user] <= 0 {
		delete(s.byUser, user)
	}
}

func (s *sessions) get(id string) *humanRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

func (s *sessions) put(id string, h *humanRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*humanRun{}
	}
	if h == nil {
		delete(s.m, id)
		return
	}
	s.m[id] = h
}

// openHuman makes a human run's session, its attaches recorded in the audit log and the
// journal, and waits for its person: until the first attach or human.start. It returns a
// status when the run ends before its clock starts (cancelled, the host failing).
func (rs *runState) openHuman(ctx context.Context) (*humanRun, string, string) {
	x, id, t := rs.x, rs.spec.ID, rs.t
	h := &humanRun{}
	h.sess = controller.NewSession(func(event, user, reason string) {
		rec := audit.Attach{Time: time.Now().UTC(), Event: event, User: user, Reason: reason}
		if st := h.started.Load(); st != nil {
			rec.Offset = time.Since(*st).Round(time.Millisecond).String()
		}
		if _, _, err := rs.io.log.Append(audit.KindAttach, rec); err != nil {
			rs.io.onInfra(fmt.Errorf("audit log: %w", err))
		}
		msg := user
		if reason != "" {
			msg += ": " + reason
		}
		x.event(id, api.EventKind(event), msg) // the audit log's attach events are the journal's (api.EventAttach, ...)
	})
	x.sessions.put(id, h)
	rs.onClose(func() { x.sessions.put(id, nil) })
	x.event(id, api.EventHumanWaiting, fmt.Sprintf("waiting up to %s (human.start, until %s) for %s to attach: sealrun attach %s", t.Human.Start, time.Now().Add(t.Human.Start).UTC().Format(time.TimeOnly), rs.spec.Agent.Model, id))
	timer := time.NewTimer(t.Human.Start)
	defer timer.Stop()
	select {
	case <-h.sess.Attached():
	case <-timer.C:
		x.event(id, api.EventHumanStartPassed, fmt.Sprintf("no one attached within human.start (%s): the clock starts now, without them", t.Human.Start))
	case <-rs.io.infraCh:
		h.sess.End("the run ended before it began: the host failed")
		return nil, api.StateInvalid, "infrastructure: " + rs.io.infra.Error()
	case <-ctx.Done():
		h.sess.End("the run was cancelled before it began")
		return nil, api.StateInvalid, "cancelled"
	}
	return h, "", ""
}

// startRecording begins the recording once the clock has started.
func (h *humanRun) startRecording(rs *runState) (stop func(), err error) {
	st := rs.started
	h.started.Store(&st)
	cols, rows := h.sess.Size()
	if h.rec, err = controller.NewRecording(rs.io.dir, rs.io.log, rs.now(), cols, rows, "sealrun "+rs.spec.ID+" ("+rs.spec.Agent.String()+")", 0); err != nil {
		return nil, err
	}
	return h.rec.FlushEvery(2 * time.Second), nil
}

// end ends the session and the recording once the controller has stopped; a person who never
// attached fails the run, unless it ended otherwise.
func (h *humanRun) end(rs *runState, status, reason string) (string, string) {
	why := "the run ended"
	if reason != "" {
		why += ": " + reason
	}
	h.sess.End(why)
	if h.rec != nil {
		if err := h.rec.Close(rs.now()); err != nil && status == "" {
			status, reason = api.StateInvalid, "infrastructure: the terminal recording: "+err.Error()
		}
	}
	if (status == "" || status == api.StateGrading) && h.sess.FirstAttach().IsZero() {
		return api.StateFailed, fmt.Sprintf("never attached: no one attached to the run's terminal (sealrun attach %s) in human.start (%s) or after, before its deadline", rs.spec.ID, rs.t.Human.Start)
	}
	return status, reason
}

// attach serves POST /v1/runs/{id}/attach: a person's terminal (or a proctor's view with
// ?watch=1), upgraded to api.AttachProtocol.
func (d *Daemon) attach(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, ok := d.Run(id)
	switch {
	case peerOf(r).Person && (!ok || !hostconfig.IsHuman(rec.Agent)):
		// A person learns nothing of runs not theirs, not even that one exists or whose it is.
		writeErrCode(w, http.StatusForbidden, api.CodeNotYourRun, "run %.80s is not yours: a person attaches to their own human run only", id)
		return
	case !ok:
		writeErr(w, http.StatusNotFound, "no run %s (sealrun ps -a lists them)", id)
		return
	case !hostconfig.IsHuman(rec.Agent):
		writeErrCode(w, http.StatusConflict, api.CodeNotHuman, "run %s is %s's, not a person's: only a human run (--agent %s/HANDLE) has a terminal to attach to; sealrun logs %s follows an agent", id, rec.Agent, hostconfig.HumanProvider, id)
		return
	}
	// Who asks, before anything of the run's state: a refusal tells nothing but who may attach.
	watch := r.URL.Query().Get("watch") == "1"
	key, takeover := r.URL.Query().Get("key"), r.URL.Query().Get("takeover")
	if key != "" {
		if err := api.CheckKeyFingerprint(key); err != nil {
			writeErr(w, http.StatusBadRequest, "?key=: %v", err)
			return
		}
	}
	if takeover != "" {
		if err := api.CheckPauseReason(takeover); err != nil {
			writeErr(w, http.StatusBadRequest, "?takeover= (the reason for taking the terminal over): %v", err)
			return
		}
	}
	pr := peerOf(r)
	d.mu.Lock()
	spec := d.spec[id]
	d.mu.Unlock()
	role, no := attachRole(id, spec, pr, watch, key, takeover, d.livePerson)
	if no != nil {
		writeErrCode(w, http.StatusForbidden, no.code, "%s", no.msg)
		return
	}
	switch {
	case rec.Final():
		writeErrCode(w, http.StatusConflict, api.CodeRunEnded, "run %s has ended (%s): there is no terminal to attach to; sealrun view shows its recording", id, rec.State)
		return
	case r.Header.Get("Upgrade") != api.AttachProtocol:
		w.Header().Set("Upgrade", api.AttachProtocol)
		writeErr(w, http.StatusUpgradeRequired, "attach upgrades the connection to %s (sealrun attach %s does)", api.AttachProtocol, id)
		return
	}
	h := d.x.sessions.get(id)
	if h == nil {
		writeErrCode(w, http.StatusConflict, api.CodeNotYetRunning, "run %s is %s: its terminal opens once it is running; attach again in a moment", id, rec.State)
		return
	}
	cols, rows := 0, 0
	if c, rw := r.URL.Query().Get("cols"), r.URL.Query().Get("rows"); c != "" || rw != "" {
		var err error
		if cols, rows, err = api.ParseSize([]byte(c + "x" + rw)); err != nil {
			writeErr(w, http.StatusBadRequest, "?cols=%.10q&rows=%.10q: give the window's columns and rows, each a whole number 1 to 4096 (or neither)", c, rw)
			return
		}
	}
	who := attest.AttachUser(pr.Who, key, role, takeover)
	if err := d.x.sessions.acquire(pr.Account); err != nil {
		writeErr(w, http.StatusTooManyRequests, "%v", err)
		return
	}
	defer d.x.sessions.release(pr.Account)
	a, err := h.sess.Attach(who, watch)
	switch {
	case errors.Is(err, controller.ErrTooManyWatchers):
		writeErr(w, http.StatusTooManyRequests, "run %s: %v", id, err)
		return
	case err != nil:
		writeErr(w, http.StatusConflict, "run %s: %v", id, err)
		return
	}
	if cols > 0 && !watch {
		a.Resize(cols, rows)
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		a.Detach("the server cannot upgrade this connection")
		writeErr(w, http.StatusInternalServerError, "this connection cannot be upgraded")
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		a.Detach("the connection could not be upgraded: " + err.Error())
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + api.AttachProtocol + "\r\nConnection: Upgrade\r\n\r\n")
	if err := brw.Flush(); err != nil {
		a.Detach("the connection dropped")
		return
	}
	// From the client: input, resizes, the detach; a connection that drops detaches.
	go func() {
		for {
			typ, p, err := api.ReadFrame(brw.Reader)
			if err != nil {
				a.Detach("the connection dropped (" + err.Error() + ")")
				return
			}
			switch typ {
			case api.FrameInput:
				err = a.Input(p)
			case api.FrameResize:
				var c, rw int
				if c, rw, err = api.ParseSize(p); err == nil {
					err = a.Resize(c, rw)
				}
			case api.FrameDetach:
				a.Detach("detached")
				return
			default:
				a.Detach("the client sent a frame of unknown type " + strconv.QuoteRune(rune(typ)) + "; sealrun attach speaks " + api.AttachProtocol)
				return
			}
			if err != nil && a.Reason() != "" {
				return // the attachment ended (its reason goes to the client)
			}
		}
	}()
	// To the client: the terminal's output, then why the attachment ended. A client that stops
	// reading is cut off after 30 s; the attachment was ended long before (it fell behind).
	send := func(typ byte, p []byte) error {
		conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		return api.WriteFrame(conn, typ, p)
	}
	for {
		select {
		case out := <-a.Output():
			if send(api.FrameOutput, out) != nil {
				a.Detach("the connection dropped")
				return
			}
		case <-a.Done():
			for {
				select {
				case out := <-a.Output():
					if send(api.FrameOutput, out) != nil {
						return
					}
					continue
				default:
				}
				break
			}
			send(api.FrameEnd, []byte(a.Reason()))
			return
		}
	}
}

// checkPeople checks a run request's person and proctors and says who a human run is for: the
// person the request names, or the account named as the agent's handle (human/HANDLE); both
// must be accounts of this host. An agent's run has neither.
func checkPeople(agent controller.Agent, req api.RunRequest) (*api.Person, error) {
	if err := req.CheckPeople(); err != nil {
		return nil, err
	}
	if agent.Provider != hostconfig.HumanProvider {
		if req.Person != nil || len(req.Proctors) > 0 {
			return nil, opt.Field("person", fmt.Sprintf("a person and proctors are a human run's (agent %s/HANDLE); %s is an agent's run", hostconfig.HumanProvider, agent))
		}
		return nil, nil
	}
	person := req.Person
	if person == nil {
		if api.CheckAccount(agent.Model) != nil || !accountExists(agent.Model) {
			return nil, opt.Field("person", fmt.Sprintf("none given, and this host has no account %.40q (agent %s): give the account of the person who attaches (and their ssh key's SHA256 fingerprint, person.key, where people reach this host over ssh through one shared account)", agent.Model, agent))
		}
		person = &api.Person{Account: agent.Model}
	}
	if !accountExists(person.Account) {
		return nil, opt.Field("person", fmt.Sprintf("%s: this host has no such account (getent passwd %s); create it (useradd, and add it to %s: docs/OPERATOR.md, \"Human runs\")", person.Account, person.Account, PeopleGroup))
	}
	for _, a := range req.Proctors {
		switch {
		case a == person.Account && person.Key == "":
			return nil, opt.Field("proctors", a+" is the run's own person: a proctor watches someone else")
		case !accountExists(a):
			return nil, opt.Field("proctors", fmt.Sprintf("%s: this host has no such account (getent passwd %s)", a, a))
		}
	}
	return person, nil
}

func accountExists(name string) bool {
	_, err := user.Lookup(name)
	return err == nil
}

// Roles of whoever attaches to a human run's terminal, as the audit log, the recording and the
// attestation name them.
const (
	RolePerson   = attest.RolePerson   // the run's own person, at its terminal
	RoleProctor  = attest.RoleProctor  // named to watch it
	RoleOperator = attest.RoleOperator // an operator, watching, or taking the terminal over (explicitly)
)

// refusal is an attach refused for who asked: a 403 and its code.
type refusal struct{ code, msg string }

// attachRole decides who pr is to run id (spec) for an attach (watch: read-only): the role, or
// why not. key is the ssh key the peer says it authenticated with ("": none); takeover is the
// reason an operator gives to take the terminal over ("": none asked). A refusal names who may
// attach and tells nothing else of the run. live says whether an account is the person of a
// human run that has not ended (an operator doing their own run is a person until it ends).
func attachRole(id string, spec RunSpec, pr peer, watch bool, key, takeover string, live func(account string) bool) (string, *refusal) {
	person := spec.Person
	if person == nil { // a run queued before people were bound: its handle's account
		person = &api.Person{Account: spec.Agent.Model}
	}
	isPerson := pr.Known && pr.Name == person.Account && (person.Key == "" || key == person.Key)
	operator := pr.Known && !pr.Person && !(live(pr.Name) && !isPerson)
	if takeover != "" {
		if watch {
			return "", &refusal{api.CodeNotYourRun, "a proctor's view is read-only: there is nothing to take over; attach --take-over without --watch"}
		}
		if !operator {
			return "", &refusal{api.CodeNotYourRun, fmt.Sprintf("only an operator takes a run's terminal over (root, or an account of the sealrun group outside %s, with no human run of its own under way); only %s may attach to run %s", PeopleGroup, person, id)}
		}
		return RoleOperator, nil
	}
	if watch {
		switch {
		case isPerson:
			return RolePerson, nil
		case pr.Known && slices.Contains(spec.Proctors, pr.Name) && !live(pr.Name):
			return RoleProctor, nil // a proctor doing a human run of their own watches no one until it ends
		case operator:
			return RoleOperator, nil
		case pr.Known && slices.Contains(spec.Proctors, pr.Name):
			return "", &refusal{api.CodeNotProctor, fmt.Sprintf("you are a proctor of run %s, but doing a human run of your own: a person watches no one's run until theirs ends", id)}
		}
		return "", &refusal{api.CodeNotProctor, fmt.Sprintf("you are not a proctor of run %s: its operator names who may watch it when queueing it (sealrun run --proctor ACCOUNT)", id)}
	}
	if isPerson {
		return RolePerson, nil
	}
	msg := fmt.Sprintf("run %s is not yours: only %s may attach to its terminal", id, person)
	switch {
	case pr.Known && pr.Name == person.Account && key == "":
		msg += "; attach through ssh with that key (the ForceCommand, deploy/ssh/sealrun-attach-ssh, passes it: sealrun attach --ssh-auth \"$SSH_USER_AUTH\")"
	case operator:
		msg += fmt.Sprintf("; as an operator you may take it over, recorded in its audit log and attestation: sealrun attach --take-over --reason TEXT %s", id)
	}
	return "", &refusal{api.CodeNotYourRun, msg}
}

// people is the attestation's account of a human run's people: who it was for, its proctors,
// and its attaches as its audit log has them (attached; attest.ListAttaches), so that a run cut
// by a restart, attested by the next daemon, lists the attaches it had.
func people(spec RunSpec, attached []attest.HumanAttach, finished time.Time) *attest.Human {
	out := &attest.Human{Proctors: spec.Proctors}
	if p := spec.Person; p != nil {
		out.Person = attest.Person{Account: p.Account, Key: p.Key}
	} else {
		out.Person = attest.Person{Account: spec.Agent.Model}
	}
	out.Attaches, out.AttachesOmitted = attest.ListAttaches(attached, finished)
	return out
}

// livePerson says whether account is the person of a human run that has not ended.
func (d *Daemon) livePerson(account string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		if r.Final() || !hostconfig.IsHuman(r.Agent) {
			continue
		}
		if p := r.Person; p != nil && p.Account == account || p == nil && r.Agent == hostconfig.HumanProvider+"/"+account {
			return true
		}
	}
	return false
}
