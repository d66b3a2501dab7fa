package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/transcript"
)

// Client talks to sealrund's admin API on its unix socket (API.md). Its errors say what to do
// when the daemon is not running or the socket is not the caller's to use.
type Client struct {
	socket string
	http   *http.Client
}

// New is a client of the daemon listening on socket.
func New(socket string) *Client {
	return &Client{socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}}
}

// Do sends a request (body as JSON, if any) to path under /v1 and decodes the answer into out
// (a *[]byte takes it raw). An error answer comes back as an *Error: status, code, message.
func (c *Client) Do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sealrund/v1"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.dialError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return api.AnswerError(resp.StatusCode, resp.Status, data, "")
	}
	if out == nil {
		return nil
	}
	if b, ok := out.(*[]byte); ok {
		*b = data
		return nil
	}
	return json.Unmarshal(data, out)
}

// Submit queues a run (POST /runs) and returns its record.
func (c *Client) Submit(ctx context.Context, req api.RunRequest) (api.Record, error) {
	var rec api.Record
	err := c.Do(ctx, http.MethodPost, "/runs", req, &rec)
	return rec, err
}

// Runs lists the runs (GET /runs): every run, or with active only those not yet ended, newest
// first; limit > 0 keeps that many.
func (c *Client) Runs(ctx context.Context, active bool, limit int) ([]api.Record, error) {
	q := url.Values{}
	if active {
		q.Set("active", "1")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/runs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var recs []api.Record
	err := c.Do(ctx, http.MethodGet, path, nil, &recs)
	return recs, err
}

// Run is one run's record (GET /runs/{id}).
func (c *Client) Run(ctx context.Context, id string) (api.Record, error) {
	var rec api.Record
	err := c.Do(ctx, http.MethodGet, "/runs/"+url.PathEscape(id), nil, &rec)
	return rec, err
}

// Cancel cancels a run (POST /runs/{id}/cancel) and returns its record.
func (c *Client) Cancel(ctx context.Context, id string) (api.Record, error) {
	var rec api.Record
	err := c.Do(ctx, http.MethodPost, "/runs/"+url.PathEscape(id)+"/cancel", nil, &rec)
	return rec, err
}

// Pause pauses human run id (POST /runs/{id}/pause): its clock, its shell and its compute stop
// until Resume or for at most d (zero: what the track's allowance leaves).
func (c *Client) Pause(ctx context.Context, id, reason string, d time.Duration) (api.Record, error) {
	req := api.PauseRequest{Reason: reason}
	if d > 0 {
		req.For = d.String()
	}
	var rec api.Record
	err := c.Do(ctx, http.MethodPost, "/runs/"+url.PathEscape(id)+"/pause", req, &rec)
	return rec, err
}

// Resume ends the pause of run id (POST /runs/{id}/resume).
func (c *Client) Resume(ctx context.Context, id string) (api.Record, error) {
	var rec api.Record
	err := c.Do(ctx, http.MethodPost, "/runs/"+url.PathEscape(id)+"/resume", nil, &rec)
	return rec, err
}

// Amend amends run id (POST /runs/{id}/amend): sealrund signs the amendment with the host key
// and appends its ledger entry.
func (c *Client) Amend(ctx context.Context, id string, req api.AmendRequest) (api.Amended, error) {
	var out api.Amended
	err := c.Do(ctx, http.MethodPost, "/runs/"+url.PathEscape(id)+"/amend", req, &out)
	return out, err
}

// File is one of a run's files as the admin API serves it (GET /runs/{id}/files/{name}; name as
// daemon/API.md lists them: journal, report-html, call-N, …), whole.
func (c *Client) File(ctx context.Context, id, name string) ([]byte, error) {
	var data []byte
	err := c.Do(ctx, http.MethodGet, "/runs/"+url.PathEscape(id)+"/files/"+url.PathEscape(name), nil, &data)
	return data, err
}

// Get sends GET path (under /v1) and returns the answer as it comes, whatever its status, for a
// caller that streams it on (sealrun view); the caller closes its body.
func (c *Client) Get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sealrund/v1"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	return resp, nil
}

func (c *Client) dialError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		switch {
		case errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "no such file"):
			return fmt.Errorf("sealrund is not running (no socket at %s); start it: systemctl start sealrund, or sealrund --config FILE", c.socket)
		case errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "permission denied"):
			return fmt.Errorf("permission denied on %s; join the sealrun group (usermod -aG sealrun $USER, then log in again) or use sudo", c.socket)
		case strings.Contains(err.Error(), "connection refused"):
			return fmt.Errorf("sealrund is not answering on %s (a stale socket?); check systemctl status sealrund", c.socket)
		}
	}
	return err
}

// EventLine is one line for a person following a run: its record, each state (with the score
// at the end), each activity of the agent with the time left, and other events by kind; "" for
// what another line already says. r is the run's latest record.
func EventLine(e api.Event, r api.Record) string {
	t := e.Time.Local().Format("15:04:05")
	switch e.Kind {
	case api.EventRecord:
		return fmt.Sprintf("%s  run %s: %s, %s, seed %d — %s", t, r.ID, r.Track, r.Agent, r.Seed, r.State)
	case api.EventState:
		s := fmt.Sprintf("%s  %s", t, e.State)
		if e.State == api.StateRunning && !r.Deadline.IsZero() {
			s += fmt.Sprintf(" (deadline %s)", r.Deadline.Local().Format("15:04:05"))
		}
		if (e.State == api.StateGraded || e.State == api.StateFailed) && r.Passed != nil {
			s += fmt.Sprintf(": %d/%d passed (%.1f%%)", *r.Passed, r.Questions, 100*float64(*r.Passed)/float64(max(1, r.Questions)))
		} else if (e.State == api.StateGraded || e.State == api.StateFailed) && r.Metric != "" {
			s += ": " + r.Score()
		}
		if e.Reason != "" {
			s += " — " + e.Reason
		}
		return s
	case api.EventHeartbeat, api.EventResult, api.EventFinalized: // the state line and the activity line say it
		return ""
	case api.EventSealed:
		return fmt.Sprintf("%s  pass vector sealed %s", t, string(e.Data))
	case api.EventActivity:
		left := ""
		if !r.Deadline.IsZero() {
			left = fmt.Sprintf(" [%s left]", max(0, r.Deadline.Sub(e.Time)).Round(time.Second))
		}
		return fmt.Sprintf("%s  %s%s", t, e.Reason, left)
	}
	s := fmt.Sprintf("%s  %s", t, e.Kind)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// fetchRun writes the run's files into tmp: the attestation att as fetched (compared with what a
// results directory holds), the rest streamed, the bundle checked against the report's candidate.
func (c *Client) fetchRun(ctx context.Context, id string, att []byte, tmp string) error {
	var bundleSum string
	if err := fileio.WriteAtomic(filepath.Join(tmp, "result.att.json"), 0o644, func(w io.Writer) error { _, err := w.Write(att); return err }); err != nil {
		return err
	}
	for _, f := range gatherFiles {
		sum, ok, err := c.FetchFile(ctx, id, f.name, filepath.Join(tmp, f.file))
		if err != nil {
			return err
		}
		if !ok && f.required {
			return fmt.Errorf("run %s has no %s; it cannot be gathered (sealrun show %s)", id, f.file, id)
		}
		if f.name == "bundle" {
			bundleSum = sum
		}
	}
	if err := c.fetchBodies(ctx, id, tmp); err != nil {
		return err
	}
	if bundleSum != "" {
		var rep report.Exam // a task's report.Task has the same candidate
		b, _ := os.ReadFile(filepath.Join(tmp, "report.json"))
		if json.Unmarshal(b, &rep) != nil || string(rep.Candidate.ID) != "sha256:"+bundleSum {
			return fmt.Errorf("run %s: the bundle copied has sha256 %s, not the graded candidate %q of its report; gather again", id, bundleSum, rep.Candidate.ID)
		}
	}
	return nil
}

// fetchBodies copies every body the gathered audit log hashes (the gateway's requests and
// responses, the calls' logs) into tmp/gateway and tmp/calls, and checks each against its hash.
func (c *Client) fetchBodies(ctx context.Context, id, tmp string) error {
	f, err := os.Open(filepath.Join(tmp, "audit.jsonl"))
	if err != nil {
		return err
	}
	refs, err := transcript.BodyRefs(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("run %s: its audit log: %w", id, err)
	}
	for _, d := range []string{audit.GatewayDir, audit.CallsDir} {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	var missing []string
	terminal := false
	for _, r := range refs {
		if dir := path.Dir(r.Path); dir == audit.TerminalDir && !terminal {
			terminal = true
			if err := os.MkdirAll(filepath.Join(tmp, dir), 0o755); err != nil {
				return err
			}
		}
		_, ok, err := c.FetchFile(ctx, id, r.APIName, filepath.Join(tmp, filepath.FromSlash(r.Path)))
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, r.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("run %s: sealrund has no %s, which its audit log hashes; the run's bodies were lost on this host (a run that lost one ends invalid)", id, strings.Join(missing, ", "))
	}
	dirs := []string{audit.GatewayDir, audit.CallsDir}
	if terminal {
		dirs = append(dirs, audit.TerminalDir)
	}
	for _, d := range dirs {
		if err := fileio.SyncDir(filepath.Join(tmp, d)); err != nil {
			return err
		}
	}
	return checkTranscript(id, tmp)
}

// checkTranscript checks the gathered bodies against the audit log and the transcript against
// both; a run whose daemon wrote no transcript (an older sealrund, or one that could not) gets
// one made here from the same files.
func checkTranscript(id, dir string) error {
	env, err := os.ReadFile(filepath.Join(dir, "result.att.json"))
	if err != nil {
		return err
	}
	st, err := attest.ReadUnverified(env)
	if err != nil {
		return fmt.Errorf("run %s: its attestation: %w", id, err)
	}
	rep, err := transcript.Check(dir, st.Predicate)
	if err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	if len(rep.Problems) > 0 {
		return fmt.Errorf("run %s: what sealrund served does not check against its audit log: %s; gather again", id, strings.Join(rep.Problems, "; "))
	}
	if rep.Transcript {
		return nil
	}
	if err := writeTranscript(dir, st.Predicate); err != nil {
		return fmt.Errorf("run %s: %w", id, err)
	}
	return nil
}

// writeTranscript makes a gathered run's transcript.json and transcript.html from its files.
func writeTranscript(dir string, p *attest.Predicate) error {
	t, err := transcript.Build(dir, transcript.RunFromPredicate(p), transcript.Options{})
	if err != nil {
		return err
	}
	return transcript.Write(dir, t)
}

// staleGather is how old a gather's temporary directory must be before another gather of the
// same run removes it as left by a killed one.
const staleGather = time.Hour

// Gather copies a finished run's files into dir/<run id> (a results directory, deploy/slurm/README.md),
// atomically: the attestation, report, audit log, track, summary, report.html, the graded
// bundle and run.json, the daemon's record. already is true when they were there. The run's
// amendments (rec.Amendments, as GET /runs/{id} gives them) are added to dir/<run id>/amendments
// each time, so that one made after the run was gathered is gathered too.
func (c *Client) Gather(ctx context.Context, rec api.Record, dir string) (already bool, err error) {
	already, err = c.gather(ctx, rec, dir)
	if err == nil {
		err = c.gatherAmendments(ctx, rec, filepath.Join(dir, rec.ID))
	}
	return already, err
}

// gatherAmendments fetches each of rec's amendments dest lacks (fetchAmendments); when one came,
// the run's transcript is made again there, to say it.
func (c *Client) gatherAmendments(ctx context.Context, rec api.Record, dest string) error {
	added, err := c.fetchAmendments(ctx, rec, dest)
	if err != nil {
		return err
	}
	if added > 0 {
		if err := rebuildTranscript(dest); err != nil {
			return fmt.Errorf("run %s: its amendments are gathered, but its transcript was not made again to say them: %w; gather it again", rec.ID, err)
		}
	}
	return nil
}

// fetchAmendments fetches each of rec's amendments dest lacks into dest/amendments, each written
// whole (a temporary file, synced, renamed), and says how many came.
func (c *Client) fetchAmendments(ctx context.Context, rec api.Record, dest string) (added int, err error) {
	for _, a := range rec.Amendments {
		if !digest.IsHex(a.Amendment) {
			return added, fmt.Errorf("run %s: sealrund named an amendment %.80q, which is no SHA-256", rec.ID, a.Amendment)
		}
		dir := filepath.Join(dest, "amendments")
		path := filepath.Join(dir, a.Amendment+".att.json")
		if _, err := os.Lstat(path); err == nil {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return added, err
		}
		tmp := path + ".tmp"
		os.Remove(tmp)
		// Fetched whole; its statement's hash, its signature and its ledger entry are the
		// reader's to check (leaderboard, verify-publication).
		_, ok, err := c.FetchFile(ctx, rec.ID, "amendment-"+a.Amendment, tmp)
		if err == nil && !ok {
			err = fmt.Errorf("run %s: sealrund has no amendment %s, which its ledger names", rec.ID, a.Amendment)
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			return added, err
		}
		if err := fileio.SyncDir(dir); err != nil {
			return added, err
		}
		added++
	}
	return added, nil
}

// rebuildTranscript makes a gathered run's transcript again, from its attestation and files.
func rebuildTranscript(dir string) error {
	env, err := os.ReadFile(filepath.Join(dir, "result.att.json"))
	if err != nil {
		return err
	}
	st, err := attest.ReadUnverified(env)
	if err != nil {
		return err
	}
	return writeTranscript(dir, st.Predicate)
}

func (c *Client) gather(ctx context.Context, rec api.Record, dir string) (already bool, err error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return false, fmt.Errorf("results directory %s: not a directory (%v); create it on the shared filesystem, writable by the jobs' user", dir, err)
	}
	dest := filepath.Join(dir, rec.ID)
	att, err := c.File(ctx, rec.ID, "attestation")
	if err != nil {
		return false, fmt.Errorf("run %s: %w", rec.ID, err)
	}
	if same, err := sameAttestation(dest, att); err != nil || same {
		return same, err
	}
	// One gather of a run at a time in this directory, whatever node it runs on: another waits,
	// then finds the run there. Holding the lock, what other gathers of this run left is theirs
	// from when they were killed, and goes.
	unlock, locked, err := LockGather(ctx, dir, rec.ID)
	if err != nil {
		return false, err
	}
	defer unlock()
	if locked {
		if same, err := sameAttestation(dest, att); err != nil || same {
			return same, err
		}
	}
	old, _ := filepath.Glob(filepath.Join(dir, "."+rec.ID+".tmp-*"))
	for _, o := range old {
		// Without a lock (a file system that has none), only what is surely not another
		// gather at work: an hour old.
		if fi, err := os.Lstat(o); err == nil && (locked || time.Since(fi.ModTime()) > staleGather) {
			os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(dir, "."+rec.ID+".tmp-")
	if err != nil {
		return false, fmt.Errorf("results directory %s is not writable (%v); give the jobs' user write access to it", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	os.Chmod(tmp, 0o755)
	// The amendments first: the transcript sealrund serves says them, and is checked against
	// what the run's files, amendments and all, give.
	if _, err := c.fetchAmendments(ctx, rec, tmp); err != nil {
		return false, err
	}
	if err := c.fetchRun(ctx, rec.ID, att, tmp); err != nil {
		return false, err
	}
	recJSON, _ := json.MarshalIndent(rec, "", "  ")
	if err := fileio.WriteAtomic(filepath.Join(tmp, "run.json"), 0o644, func(w io.Writer) error { _, err := w.Write(append(recJSON, '\n')); return err }); err != nil {
		return false, err
	}
	if err := fileio.SyncDir(tmp); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dest); err != nil {
		// Another gather of the same run won the race: fine if it holds the same attestation.
		if same, serr := sameAttestation(dest, att); serr == nil && same {
			os.RemoveAll(tmp)
			return true, nil
		}
		return false, fmt.Errorf("move the gathered run into %s: %w", dest, err)
	}
	return false, fileio.SyncDir(dir)
}

// sameAttestation says whether dest already holds att; a different one is an error. dest is
// looked for before its attestation: another gather renames it into place whole, so one that
// exists has its attestation (read the other way round, a rename between the two reads made a
// whole gathered run look like a stranger's directory: TestSlurmNodes, a loaded machine).
func sameAttestation(dest string, att []byte) (bool, error) {
	if _, err := os.Lstat(dest); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	have, err := os.ReadFile(filepath.Join(dest, "result.att.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("%s exists without result.att.json; it is not a gathered run: move it aside", dest)
	case err != nil:
		return false, err
	case string(have) != string(att):
		return false, fmt.Errorf("%s holds another attestation of this run id; two daemons gave one id, or the file was changed: move it aside and gather again", dest)
	}
	return true, nil
}

// FetchFile streams a run file into path, synced, and returns its sha256; ok is false when the
// daemon has no such file (404).
func (c *Client) FetchFile(ctx context.Context, id, name, path string) (sum string, ok bool, err error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://sealrund/v1/runs/"+id+"/files/"+name, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", false, c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "", false, nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", false, fmt.Errorf("run %s, file %s: sealrund answered %s: %s", id, name, resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(resp.Body, maxGatherFile+1))
	if err != nil {
		return "", false, fmt.Errorf("run %s, file %s: %w", id, name, err)
	}
	if n > maxGatherFile {
		return "", false, fmt.Errorf("run %s, file %s: over %d bytes", id, name, int64(maxGatherFile))
	}
	if err := f.Sync(); err != nil {
		return "", false, err
	}
	return hex.EncodeToString(h.Sum(nil)), true, f.Close()
}

// Events streams a run's events (GET /v1/runs/ID/events) to fn, each with the run's latest
// record as the events so far describe it, until the stream ends; it returns that record (its
// Final says whether the run ended).
func (c *Client) Events(ctx context.Context, id string, fn func(api.Event, api.Record)) (api.Record, error) {
	var last api.Record
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sealrund/v1/runs/"+id+"/events", nil)
	if err != nil {
		return last, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return last, c.dialError(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), api.MaxEventBytes+1)
	for sc.Scan() {
		var e api.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if len(e.Data) > 0 && (e.Kind == api.EventRecord || e.Kind == api.EventState || e.Kind == api.EventResult || e.Kind == api.EventHeartbeat) {
			json.Unmarshal(e.Data, &last)
		}
		fn(e, last)
	}
	return last, nil
}
