package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/report"
)

// API limits.
const (
	MaxRequestBytes = 1 << 20 // a run request holds a track file (about 2 KiB)
	apiVersion      = "/v1"
)

type peerKey struct{}

// Handler is the admin API (daemon/API.md).
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	// A person's account (PeopleGroup) attaches, and nothing else: every other path is the
	// operators' (a person listing runs, reading another's files or recording, cancelling or
	// pausing would watch or end someone else's run).
	handle := func(pattern string, h http.HandlerFunc) {
		if !strings.HasSuffix(pattern, "/attach") {
			h = operatorsOnly(h)
		}
		mux.HandleFunc(pattern, h)
	}
	handle("POST "+apiVersion+"/runs", d.postRun)
	handle("GET "+apiVersion+"/runs", func(w http.ResponseWriter, r *http.Request) {
		// ?active=1: only runs that have not ended (what ps shows); ?limit=N: the newest N.
		// Not indented: with thousands of runs the list is megabytes.
		runs := d.Runs()
		if r.URL.Query().Get("active") == "1" {
			kept := runs[:0]
			for _, rec := range runs {
				if !rec.Final() {
					kept = append(kept, rec)
				}
			}
			runs = kept
		}
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n >= 0 && n < len(runs) {
			runs = runs[:n]
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(runs)
	})
	handle("GET "+apiVersion+"/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, ok := d.Run(r.PathValue("id"))
		if !ok {
			writeErr(w, http.StatusNotFound, "no run %s (sealrun ps -a lists them)", r.PathValue("id"))
			return
		}
		if d.ledger != nil {
			for _, e := range d.ledger.AmendmentsOf(rec.ID) {
				rec.Amendments = append(rec.Amendments, api.Amendment{Time: e.Time, Action: e.Action, Reason: e.Reason, Link: e.Link, Amendment: string(e.Amendment)})
			}
		}
		writeJSON(w, http.StatusOK, rec)
	})
	handle("POST "+apiVersion+"/runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		rec, err := d.Cancel(r.PathValue("id"))
		switch {
		case rec == nil && err != nil:
			writeErr(w, http.StatusNotFound, "%v", strings.TrimPrefix(err.Error(), "refused: "))
		case err != nil:
			writeErr(w, http.StatusConflict, "%v", strings.TrimPrefix(err.Error(), "refused: "))
		default:
			writeJSON(w, http.StatusOK, rec)
		}
	})
	handle("GET "+apiVersion+"/runs/{id}/events", d.events)
	handle("GET "+apiVersion+"/runs/{id}/files/{name}", d.file)
	handle("GET "+apiVersion+"/runs/{id}/transcript", d.transcriptOf)
	handle("POST "+apiVersion+"/runs/{id}/attach", d.attach)
	handle("POST "+apiVersion+"/runs/{id}/pause", d.pauseRun)
	handle("POST "+apiVersion+"/runs/{id}/resume", d.resumeRun)
	handle("POST "+apiVersion+"/runs/{id}/amend", d.amendRun)
	handle("/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, "%s %s is not an API path; see daemon/API.md (paths start with %s)", r.Method, r.URL.Path, apiVersion)
	})
	return http.MaxBytesHandler(mux, MaxRequestBytes)
}

// operatorsOnly refuses h to a person's account.
func operatorsOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if pr := peerOf(r); pr.Person {
			writeErrCode(w, http.StatusForbidden, api.CodeOperatorsOnly, "%s is a person's account (a member of %s, or no account of this host): it attaches to its own human run (sealrun attach RUN) and watches those it proctors (sealrun attach --watch RUN); the rest of sealrund is the operators'", pr.Name, PeopleGroup)
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// decodeRequest decodes the request's JSON body into v, known fields only; it answers 413 (over
// MaxRequestBytes) or 400 (not what, the request's kind) and reports false when it cannot.
func decodeRequest(w http.ResponseWriter, r *http.Request, v any, what string) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, "the request is over %d bytes", MaxRequestBytes)
			return false
		}
		writeErr(w, http.StatusBadRequest, "the request is not %s: %v", what, err)
		return false
	}
	return true
}

func writeErr(w http.ResponseWriter, code int, format string, args ...any) {
	writeErrCode(w, code, api.CodeOf(code), format, args...)
}

// writeErrCode is writeErr with a code of its own (api.Code*) where a client branches on more
// than the status.
func writeErrCode(w http.ResponseWriter, status int, code, format string, args ...any) {
	writeJSON(w, status, api.APIError{Error: fmt.Sprintf(format, args...), Code: code})
}

func (d *Daemon) postRun(w http.ResponseWriter, r *http.Request) {
	var req api.RunRequest
	if !decodeRequest(w, r, &req, "a run request (JSON with track, track_name, agent, seed, rerun; gpus, cpus, memory, rerun_of, dispatcher)") {
		return
	}
	if req.Track == "" || req.Agent == "" {
		writeErr(w, http.StatusBadRequest, "a run needs the track file's content and the agent (PROVIDER/MODEL[@EFFORT])")
		return
	}
	name := req.TrackName
	if name == "" {
		name = "track"
	}
	who := peerOf(r).Who
	req.TrackName = name
	rec, err := d.SubmitRequest(req, who)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrBroken):
			code = http.StatusServiceUnavailable
		case errors.Is(err, ErrRefused):
			code = http.StatusUnprocessableEntity
		}
		a := api.APIError{Error: strings.TrimPrefix(err.Error(), "refused: "), Code: api.CodeOf(code)}
		var oe *opt.Error
		if errors.As(err, &oe) && oe.Where == "" {
			a.Option, a.Needs = oe.Option, oe.Needs
		}
		writeJSON(w, code, a)
		return
	}
	writeJSON(w, http.StatusCreated, rec)
}

// events streams the run's events as JSON lines: first its record, then each event as it comes;
// the stream ends when the run has ended (or at once with follow=0).
func (d *Daemon) events(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ch, cancel := d.Subscribe(id)
	defer cancel()
	rec, ok := d.Run(id)
	if !ok {
		writeErr(w, http.StatusNotFound, "no run %s", id)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.Encode(api.Event{Time: time.Now().UTC(), Run: id, Kind: api.EventRecord, State: rec.State, Reason: rec.Reason, Data: mustJSON(rec)})
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	if rec.Final() || r.URL.Query().Get("follow") == "0" {
		return
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case e := <-ch:
			if e.Kind == api.EventState || e.Kind == api.EventResult {
				rec, _ = d.Run(id)
				e.Data = mustJSON(rec)
			}
			if enc.Encode(e) != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
			if e.Kind == api.EventState && (e.State == api.StateGraded || e.State == api.StateFailed || e.State == api.StateInvalid) {
				return
			}
		case <-tick.C: // a heartbeat, so that a follower notices a dead daemon
			rec, _ = d.Run(id)
			if enc.Encode(api.Event{Time: time.Now().UTC(), Run: id, Kind: api.EventHeartbeat, State: rec.State, Data: mustJSON(rec)}) != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		case <-r.Context().Done():
			return
		}
	}
}

// files the API serves from a run directory, by name.
var runFiles = map[string]string{
	"transcript": "transcript.log", "audit": "audit.jsonl", "history": "history.jsonl", "report": "report.json",
	"attestation": "result.att.json", "summary": "summary.txt", "journal": "", "report-html": "report.html",
	"track": "track.toml", "bundle": "", "transcript-json": "transcript.json", "transcript-html": "transcript.html",
	"sigstore": "result.sigstore.json", "tpm": attest.TPMQuoteFile,
}

// gatewayBodyName maps gateway-N-request and gateway-N-response to the body's path in the run
// directory (audit.GatewayBodyPath).
func gatewayBodyName(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "gateway-")
	if !ok {
		return "", false
	}
	n, part, ok := strings.Cut(rest, "-")
	k, err := strconv.Atoi(n)
	if !ok || err != nil || k < 1 || strconv.Itoa(k) != n || (part != audit.BodyRequest && part != audit.BodyResponse) {
		return "", false
	}
	return audit.GatewayBodyPath(k, part), true
}

func (d *Daemon) file(w http.ResponseWriter, r *http.Request) {
	rec, ok := d.Run(r.PathValue("id"))
	if !ok {
		writeErr(w, http.StatusNotFound, "no run %s", r.PathValue("id"))
		return
	}
	name := r.PathValue("name")
	if name == "journal" {
		w.Header().Set("Content-Type", "application/x-ndjson")
		OpenJournalRead(filepath.Join(d.cfg.StateDir, "journal.jsonl"), rec.ID, w)
		return
	}
	contentType := "text/plain; charset=utf-8"
	if p, ok := gatewayBodyName(name); ok {
		name, contentType = filepath.FromSlash(p), "application/gzip"
	} else if rest, ok := strings.CutPrefix(name, "terminal-"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 1 || strconv.Itoa(n) != rest {
			writeErr(w, http.StatusBadRequest, "%.40q is not terminal-N (a segment of a human run's recording)", name)
			return
		}
		name, contentType = filepath.FromSlash(audit.TerminalSegmentPath(n)), "application/gzip"
	} else if strings.HasPrefix(name, "call-") {
		n, err := strconv.Atoi(strings.TrimPrefix(name, "call-"))
		if err != nil || n < 1 {
			writeErr(w, http.StatusBadRequest, "%s is not call-N", name)
			return
		}
		name = filepath.Join("calls", strconv.Itoa(n)+".log")
	} else if name == "bundle" {
		// The graded bundle: the candidate report.json names (the attestation's bundle.tar.gz).
		var rep report.Exam // a task's report.Task names its candidate alike
		b, _ := os.ReadFile(filepath.Join(rec.Dir, "report.json"))
		var id digest.Digest
		if json.Unmarshal(b, &rep) == nil {
			id, _ = digest.Parse(string(rep.Candidate.ID)) // a hex name: nothing of a path
		}
		if id == "" {
			writeErr(w, http.StatusNotFound, "run %s has no graded bundle (nothing promoted, or not graded yet)", rec.ID)
			return
		}
		name = filepath.Join("candidates", string(id.Hex())+".tar.gz")
	} else if h, ok := strings.CutPrefix(name, "amendment-"); ok && digest.IsHex(h) {
		name, contentType = filepath.Join(AmendmentsDir, h+".att.json"), "application/json"
	} else if f, ok := runFiles[name]; ok {
		name = f
	} else {
		writeErr(w, http.StatusNotFound, "no file %q; one of transcript, transcript-json, transcript-html, audit, history, report, report-html, attestation, summary, track, bundle, journal, call-N, gateway-N-request, gateway-N-response, amendment-SHA256", name)
		return
	}
	f, err := os.Open(filepath.Join(rec.Dir, name))
	if err != nil {
		writeErr(w, http.StatusNotFound, "run %s has no %s yet", rec.ID, name)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	io.Copy(w, f)
}

// OpenJournalRead writes the journal lines of one run to w, reading the journal without
// changing it.
func OpenJournalRead(path, run string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	enc := json.NewEncoder(w)
	for {
		var e api.Event
		if err := dec.Decode(&e); err != nil {
			return nil
		}
		if e.Run == run {
			enc.Encode(e)
		}
	}
}

// Listen opens the admin socket: mode 0660, group-owned by cfg.Group (root and members may use
// it; nobody else).
func Listen(cfg *hostconfig.Config) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(cfg.Socket), 0o755); err != nil {
		return nil, err
	}
	os.Remove(cfg.Socket)
	l, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", cfg.Socket, err)
	}
	gid := 0
	if g, err := user.LookupGroup(cfg.Group); err == nil {
		gid, _ = strconv.Atoi(g.Gid)
	}
	if err := os.Chown(cfg.Socket, 0, gid); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Chmod(cfg.Socket, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ServeAPI serves the admin API on l until ctx ends; each request knows its peer's user.
func (d *Daemon) ServeAPI(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerUser(c))
		}}
	go func() { <-ctx.Done(); srv.Close() }()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// peer is the connecting process as SO_PEERCRED gives it: Who names it ("name (uid N, pid P)",
// as the journal and the audit log record it), Account its account ("name (uid N)", the same
// for every process of it).
// Name and UID are the account's name and uid; Person says the account is in PeopleGroup (a
// person's, who may attach to their own run only), as the host's group database says when the
// connection is made.
type peer struct {
	Who, Account string
	Name         string
	UID          uint32
	Known        bool
	Person       bool
}

var unknownPeer = peer{Who: "unknown", Account: "unknown"}

// PeopleGroup is the group of the accounts of people (docs/OPERATOR.md, "Human runs"): a member
// attaches to their own human run and watches those they proctor, nothing else. Every other
// account that reaches the admin socket (the sealrun group's) is an operator's.
const PeopleGroup = "sealrun-people"

// peerUser reads the connecting process's credentials.
func peerUser(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return unknownPeer
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return unknownPeer
	}
	var cred *syscall.Ucred
	raw.Control(func(fd uintptr) { cred, _ = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED) })
	if cred == nil {
		return unknownPeer
	}
	name := strconv.Itoa(int(cred.Uid))
	u, err := user.LookupId(name)
	if err == nil {
		name = u.Username
	}
	// A uid the account database does not name is no one's account: it is given the least,
	// a person's (it attaches to no run, since no run is queued for it).
	person := cred.Uid != 0 && (err != nil || inGroup(name, PeopleGroup))
	return peer{Who: fmt.Sprintf("%s (uid %d, pid %d)", name, cred.Uid, cred.Pid), Account: fmt.Sprintf("%s (uid %d)", name, cred.Uid),
		Name: name, UID: cred.Uid, Known: true, Person: person}
}

// inGroup says whether account is a member of group (its primary group or a supplementary
// one); false where either is unknown.
func inGroup(account, group string) bool {
	u, err := user.Lookup(account)
	if err != nil {
		return false
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return false
	}
	ids, err := u.GroupIds()
	if err != nil {
		return u.Gid == g.Gid
	}
	return slices.Contains(ids, g.Gid)
}

// peerOf is the request's peer (unknownPeer where the connection gave none: a test's handler).
func peerOf(r *http.Request) peer {
	if p, ok := r.Context().Value(peerKey{}).(peer); ok {
		return p
	}
	return unknownPeer
}
