package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/outcome"
)

// Run states: a run's way to its end, and its end (an outcome: package outcome owns the three).
const (
	StateQueued    = "queued"
	StatePreparing = "preparing"
	StateRunning   = "running"
	StateGrading   = "grading"
	StateGraded    = string(outcome.Graded)
	StateFailed    = string(outcome.Failed)
	StateInvalid   = string(outcome.Invalid)
)

// Record is what the daemon knows of one run: rebuilt from the journal at start, kept in
// memory, served by the admin API.
type Record struct {
	ID      string `json:"id"`
	Track   string `json:"track"` // name version
	TrackID string `json:"track_id"`
	Agent   string `json:"agent"`
	Seed    int64  `json:"seed"`
	User    string `json:"user"`
	RerunOf string `json:"rerun_of,omitempty"`
	RerunBy string `json:"rerun_by,omitempty"`
	// Dispatcher is the outside scheduler's job that dispatched the run (RunRequest.Dispatcher).
	Dispatcher string    `json:"dispatcher,omitempty"`
	GPUs       []string  `json:"gpus,omitempty"` // the GPUs it was asked to use
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	Queued     time.Time `json:"queued"`
	Started    time.Time `json:"started,omitzero"`
	Deadline   time.Time `json:"deadline,omitzero"`
	Finished   time.Time `json:"finished,omitzero"`
	Passed     *int      `json:"passed,omitempty"`
	Questions  int       `json:"questions,omitempty"`
	// A task run's result: its metric and value (null: no valid submission).
	Metric string   `json:"metric,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Dir    string   `json:"dir"`
	// Waiting says, for a queued run, its place and what it waits for.
	Waiting string `json:"waiting,omitempty"`
	// Paused is when a pause of the run began, while it lasts (sealrun pause); Deadline moves
	// when it ends.
	Paused time.Time `json:"paused,omitzero"`
	// Person and Proctors are a human run's (RunRequest.Person, .Proctors).
	Person   *Person  `json:"person,omitempty"`
	Proctors []string `json:"proctors,omitempty"`
	// Amendments are what was found about the run after it ended (sealrun amend), from the
	// host's ledger; GET /runs/{id} only.
	Amendments []Amendment `json:"amendments,omitempty"`
}

// Amendment is one amendment of a run, as its ledger entry says it.
type Amendment struct {
	Time      time.Time `json:"time"`
	Action    string    `json:"action"`
	Reason    string    `json:"reason"`
	Link      string    `json:"link,omitempty"`
	Amendment string    `json:"amendment"` // SHA-256 (hex) of the signed statement
}

// PauseRequest is the body of POST /v1/runs/{id}/pause: why (shown in the audit log, the
// attestation and the leaderboard's row) and for how long at most (a Go duration; empty: what
// the track's human.pauses leaves).
type PauseRequest struct {
	Reason string `json:"reason"`
	For    string `json:"for,omitempty"`
}

// AmendRequest asks sealrund to amend a run that ended (POST /runs/{id}/amend; sealrun amend):
// a signed amendment (attest/PREDICATE.md, "Amendments") and its ledger entry.
type AmendRequest struct {
	Action string `json:"action"` // invalidate, legacy or note (ledger.Action*)
	Reason string `json:"reason"` // why, for a reader: 1 to 1024 bytes, no control characters
	Link   string `json:"link,omitempty"`
	// Rerun queues a rerun of an invalidated run once the amendment is in the ledger.
	Rerun bool `json:"rerun,omitempty"`
	// Draft: make the amendment's statement and answer it unsigned (Amended.Draft), for a
	// reviewer to sign, where the run's track asks for a reviewer's signature; nothing is
	// signed or appended.
	Draft bool `json:"draft,omitempty"`
	// Reviewed is such a draft with the reviewer's signature (sealrun amend review): sealrund
	// checks it is the statement it would make, signs it, and appends it. Action, reason and
	// link are then the draft's (given too, they must be the same).
	Reviewed json.RawMessage `json:"reviewed,omitempty"`
}

// Amended is sealrund's answer to an AmendRequest.
type Amended struct {
	Run       string `json:"run"`
	Action    string `json:"action"`
	Amendment string `json:"amendment"`    // SHA-256 (hex) of the signed statement: its ledger entry's
	Path      string `json:"path"`         // the signed amendment (a DSSE envelope) on this host
	Entry     uint64 `json:"ledger_entry"` // its index in the host's ledger
	Rerun     string `json:"rerun,omitempty"`
	// Reviewer is the key id of the reviewer who signed it beside the host, where the run's
	// track asks for one.
	Reviewer string `json:"reviewer,omitempty"`
	// Draft is, for a draft request, the unsigned amendment (a DSSE envelope with no
	// signature) for a reviewer; Amendment is then its statement's SHA-256 and nothing else is set.
	Draft json.RawMessage `json:"draft,omitempty"`
}

// MaxPauseReason bounds a pause's reason, in bytes.
const MaxPauseReason = 300

// CheckPauseReason says what is wrong with a pause's reason: it is text a reader of the published
// run sees, one line of 1 to MaxPauseReason bytes of UTF-8 without control characters.
func CheckPauseReason(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New("none given: a pause is published with its reason (\"fire alarm\")")
	case len(s) > MaxPauseReason:
		return fmt.Errorf("the reason is %d bytes; at most %d", len(s), MaxPauseReason)
	case !utf8.ValidString(s):
		return fmt.Errorf("the reason is not UTF-8 text")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("the reason holds a control character (%U): write it on one line of plain text", r)
		}
	}
	return nil
}

// Score is the run's result in a few words: "7/12" for an exam run, "Accuracy 0.95" (or
// "Accuracy: invalid submission") for a task run, "" before there is one.
func (r Record) Score() string {
	switch {
	case r.Metric != "" && r.Value != nil:
		return fmt.Sprintf("%s %.4g", r.Metric, *r.Value)
	case r.Metric != "" && r.State == StateGraded:
		return r.Metric + ": invalid submission"
	case r.Metric != "":
		return r.Metric + ": none"
	case r.Passed != nil:
		return fmt.Sprintf("%d/%d", *r.Passed, r.Questions)
	}
	return ""
}

// Final reports whether the run has ended.
func (r Record) Final() bool {
	return r.State == StateGraded || r.State == StateFailed || r.State == StateInvalid
}

// RunRequest is POST /v1/runs.
type RunRequest struct {
	Track     string `json:"track"`      // the track file's content
	TrackName string `json:"track_name"` // its path, for messages
	Agent     string `json:"agent"`      // PROVIDER/MODEL[@EFFORT]
	Seed      int64  `json:"seed"`
	Rerun     bool   `json:"rerun"` // run a seed again that already has a run
	// For a run an outside scheduler (Slurm) dispatched; deploy/slurm/README.md.
	// GPUs are the host GPUs the run must use — the scheduler's allocation — as CDI names among
	// the daemon's [resources] gpus: at least the track's count; the run takes the first ones.
	GPUs []string `json:"gpus,omitempty"`
	// CPUs and Memory (bytes) are the scheduler's allocation of the job: a track that needs
	// more per run is refused, so that a run never overcommits what the scheduler gave.
	CPUs   int64 `json:"cpus,omitempty"`
	Memory int64 `json:"memory,omitempty"`
	// RerunOf names the invalid run this one reruns, on this host or another (the shared results
	// directory says which); it is linked in the attestation. It implies Rerun.
	RerunOf string `json:"rerun_of,omitempty"`
	// Dispatcher names the scheduler's job ("slurm job 812_3"). Such a run is not rerun here
	// when it ends invalid: the scheduler's resubmission is the rerun.
	Dispatcher string `json:"dispatcher,omitempty"`
	// Person is who a human run (agent human/HANDLE) is for: only they attach to its terminal.
	// Absent: the account named HANDLE, where the host has one.
	Person *Person `json:"person,omitempty"`
	// Proctors are the accounts that may watch a human run (beside the operators).
	Proctors []string `json:"proctors,omitempty"`
}

// Person is a human run's person as the host authenticates them: a unix account on the host
// and, for people who reach it over ssh sharing that account, the SHA-256 fingerprint of the
// key they authenticate with (ssh-keygen -lf's "SHA256:..." form).
type Person struct {
	Account string `json:"account"`
	Key     string `json:"key,omitempty"`
}

// String names the person as messages do: "bob", or "bob with key SHA256:...".
func (p Person) String() string {
	if p.Key != "" {
		return p.Account + " with key " + p.Key
	}
	return p.Account
}

// MaxProctors bounds the proctors named for one run.
const MaxProctors = 16

// CheckAccount checks a unix account's name as a run names it (what useradd accepts by
// default: a lowercase letter or _, then up to 31 lowercase letters, digits, _ and -).
func CheckAccount(name string) error {
	if !attest.ValidAccount(name) {
		return fmt.Errorf("%.40q is not an account name: a lowercase letter or _, then up to 31 lowercase letters, digits, _ or -", name)
	}
	return nil
}

// CheckKeyFingerprint checks an ssh key's fingerprint as ssh-keygen -lf prints it by default
// ("SHA256:" and 43 characters of unpadded base64).
func CheckKeyFingerprint(fp string) error {
	if !attest.ValidKeyFingerprint(fp) {
		return fmt.Errorf("%.60q is not an ssh key's fingerprint: SHA256: and 43 characters of base64, as ssh-keygen -lf prints it", fp)
	}
	return nil
}

// CheckPeople checks a request's person and proctors.
func (r *RunRequest) CheckPeople() error {
	if r.Person != nil {
		if err := CheckAccount(r.Person.Account); err != nil {
			return &opt.Error{Option: "person", Err: err}
		}
		if r.Person.Key != "" {
			if err := CheckKeyFingerprint(r.Person.Key); err != nil {
				return &opt.Error{Option: "person.key", Err: err}
			}
		}
	}
	if len(r.Proctors) > MaxProctors {
		return opt.Field("proctors", fmt.Sprintf("%d; at most %d a run", len(r.Proctors), MaxProctors))
	}
	seen := map[string]bool{}
	for _, a := range r.Proctors {
		if err := CheckAccount(a); err != nil {
			return &opt.Error{Option: "proctors", Err: err}
		}
		if seen[a] {
			return opt.Field("proctors", a+" is named twice")
		}
		seen[a] = true
	}
	return nil
}

// APIError is every error body: {"error": "..."}.
type APIError struct {
	Error string `json:"error"`
	// Code names the kind of answer for a client to branch on (the Code* constants; the message
	// may change, the code does not). Absent from answers of sealrund before codes: a client
	// then takes CodeOf the status.
	Code string `json:"code,omitempty"`
	// Option is the request's field the answer is about (its JSON name: "seed", "rerun_of",
	// "person.key"), where it is about one: the message begins with it, and a client may name
	// it as its own input (sealrun run names its flag).
	Option string `json:"option,omitempty"`
	// Needs are the request's other fields the answer says to give with it (the message ends
	// "; give NEEDS").
	Needs []string `json:"needs,omitempty"`
}

// The codes of sealrund's error answers (daemon/API.md).
const (
	CodeBadRequest      = "bad_request"      // 400: the request is malformed
	CodeNotFound        = "not_found"        // 404: no such run or path
	CodeConflict        = "conflict"         // 409: not in this run's state
	CodeTooLarge        = "too_large"        // 413
	CodeRefused         = "refused"          // 422: a run refused (a pin mismatch, a seed already run)
	CodeUpgradeRequired = "upgrade_required" // 426: attach without the upgrade
	CodeTooMany         = "too_many"         // 429: a bound on attaches reached
	CodeInternal        = "internal"         // 500: the daemon's own failure
	CodeUnavailable     = "unavailable"      // 503: the daemon takes no new runs
	// Attach's own, each a 409.
	CodeNotYetRunning = "not_yet_running" // the run's terminal opens once it is running: attach again
	CodeRunEnded      = "run_ended"       // the run has ended: no terminal
	CodeNotHuman      = "not_human"       // an agent's run: no terminal
	// Attach's refusals of who asks, each a 403.
	CodeNotYourRun = "not_your_run" // a human run's terminal is its person's (an operator may take it over)
	CodeNotProctor = "not_proctor"  // watching a human run is for its proctors and the operators
	// A person's account (sealrun-people) asked for anything but an attach: a 403.
	CodeOperatorsOnly = "operators_only"
)

// CodeOf is the code an answer of that HTTP status has when it names none.
func CodeOf(status int) string {
	switch status {
	case 400:
		return CodeBadRequest
	case 403:
		return CodeNotYourRun
	case 404:
		return CodeNotFound
	case 409:
		return CodeConflict
	case 413:
		return CodeTooLarge
	case 422:
		return CodeRefused
	case 426:
		return CodeUpgradeRequired
	case 429:
		return CodeTooMany
	case 503:
		return CodeUnavailable
	}
	if status >= 500 {
		return CodeInternal
	}
	return ""
}

// Error is sealrund's error answer to a request: its HTTP status, its code and its message
// (what is wrong; the fix). Clients branch on Code (errors.As, or IsCode), never on the message.
type Error struct {
	Status  int
	Code    string
	Message string
	Option  string   // APIError.Option
	Needs   []string // APIError.Needs
}

func (e *Error) Error() string { return e.Message }

// IsCode reports whether err is sealrund's answer with that code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// AnswerError reads an error answer: its JSON's message and code, or the status alone.
func AnswerError(status int, statusText string, body []byte, what string) *Error {
	e := &Error{Status: status}
	var a APIError
	if json.Unmarshal(body, &a) == nil && a.Error != "" {
		e.Message, e.Code, e.Option, e.Needs = a.Error, a.Code, a.Option, a.Needs
	} else {
		e.Message = what + "sealrund answered " + statusText
	}
	if e.Code == "" {
		e.Code = CodeOf(status)
	}
	return e
}

// KitPath is where a kit is kept: by its kit hash (kits/KIT.md).
func KitPath(state string, hash digest.Hex) string {
	return filepath.Join(state, "kits", string(hash))
}

// ContentPath is where a pinned blob (the hidden exam) is kept: by its sha256.
func ContentPath(stateDir string, sha digest.Hex) string {
	return filepath.Join(stateDir, "content", "sha256", string(sha))
}

// TreePath is where the content store keeps a directory by its tree hash (airs.TreeHash): an
// AIRS task directory or its raw data directory (sealrun content add DIR).
func TreePath(stateDir string, hash digest.Hex) string {
	return filepath.Join(stateDir, "content", "tree", string(hash))
}

// Event is one line of the journal: a run's state change or notable event. Events are appended
// and fsynced before anything that depends on them is acknowledged.
type Event struct {
	Time   time.Time       `json:"time"`
	Run    string          `json:"run"`
	Kind   EventKind       `json:"kind"`
	State  string          `json:"state,omitempty"` // for kind "state"
	Reason string          `json:"reason,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// MaxEventBytes bounds one event: a journal line, a line of the events stream.
const MaxEventBytes = 1 << 20
