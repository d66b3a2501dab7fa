package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/jsonpass"
	"github.com/sealrun/sealrun/outcome"
)

// Entry kinds: a run is appended when the daemon accepts it and again when it ends; an
// amendment of a run that ended is appended when the operator makes it (sealrun amend).
const (
	KindQueued  = "queued"
	KindEnded   = "ended"
	KindAmended = "amended"
)

// What an amendment does to a run's record (sealrun amend): take it out of every mean
// (invalidate), label it as graded under a superseded protocol (legacy), or add a note.
const (
	ActionInvalidate = "invalidate"
	ActionLegacy     = "legacy"
	ActionNote       = "note"
)

// MaxNotes bounds the notes one run carries.
const MaxNotes = 16

// Entry is one leaf of the ledger. A queued entry names the run and its row (track, scaffold,
// agent, seed) and, for a rerun, the run it replaces; an ended entry names the run, how it
// ended and the SHA-256 of its signed attestation statement (the DSSE payload).
type Entry struct {
	Kind  string    `json:"kind"`
	Run   string    `json:"run"`
	Time  time.Time `json:"time"`
	Track string    `json:"track,omitempty"` // track id
	// TrackName is "name version", for a reader.
	TrackName string `json:"track_name,omitempty"`
	Scaffold  string `json:"scaffold,omitempty"` // "name version"
	Agent     string `json:"agent,omitempty"`    // provider/model[@effort]
	Seed      int64  `json:"seed"`
	RerunOf   string `json:"rerun_of,omitempty"`
	// Ended only.
	State  outcome.Outcome `json:"state,omitempty"`
	Reason string          `json:"reason,omitempty"` // ended and amended
	// Ended: the sha256 hex of the run's signed statement; amended: the one it amends.
	Attestation digest.Hex `json:"attestation,omitempty"`
	// Amended only: what it does, the sha256 hex of the signed amendment statement, and a link
	// to the report it rests on. (A rerun of an invalidated run is queued after it, rerun_of it.)
	Action    string     `json:"action,omitempty"`
	Amendment digest.Hex `json:"amendment,omitempty"`
	Link      string     `json:"link,omitempty"`
}

// MaxEntryBytes bounds one entry.
const MaxEntryBytes = 16 << 10

var runRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Check says what is wrong with an entry, naming the field.
func (e *Entry) Check() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...))
	}
	if !runRE.MatchString(e.Run) {
		return bad("run", "%q is not a run id", e.Run)
	}
	if e.Time.IsZero() {
		return bad("time", "is missing")
	}
	for _, s := range []struct{ f, v string }{{"track_name", e.TrackName}, {"scaffold", e.Scaffold}, {"agent", e.Agent}, {"reason", e.Reason}, {"link", e.Link}} {
		if len(s.v) > 1024 || strings.ContainsFunc(s.v, unicode.IsControl) {
			return bad(s.f, "is longer than 1024 bytes or holds control characters")
		}
	}
	switch e.Kind {
	case KindQueued:
		if !digest.IsHex(e.Track) {
			return bad("track", "%q is not a track id (64 lowercase hex)", e.Track)
		}
		if e.Agent == "" || e.Scaffold == "" {
			return bad("agent", "a queued entry names its agent and scaffold")
		}
		if e.Seed < 0 {
			return bad("seed", "is %d; seeds are 0 or more", e.Seed)
		}
		if e.RerunOf != "" && (!runRE.MatchString(e.RerunOf) || e.RerunOf == e.Run) {
			return bad("rerun_of", "%q is not another run's id", e.RerunOf)
		}
		if e.State != "" || e.Attestation != "" {
			return bad("state", "a queued entry has no state and no attestation")
		}
		if e.Action != "" || e.Amendment != "" || e.Link != "" {
			return bad("action", "a queued entry has no amendment fields")
		}
	case KindEnded:
		if _, err := outcome.Parse(string(e.State)); err != nil {
			return bad("state", "%v", err)
		}
		if e.Attestation != "" && !digest.IsHex(string(e.Attestation)) {
			return bad("attestation", "%q is not 64 lowercase hex", e.Attestation)
		}
		if e.Attestation == "" && e.State != outcome.Invalid {
			return bad("attestation", "a %s run has an attestation", e.State)
		}
		if e.Action != "" || e.Amendment != "" || e.Link != "" {
			return bad("action", "an ended entry has no amendment fields")
		}
	case KindAmended:
		switch e.Action {
		case ActionInvalidate, ActionLegacy, ActionNote:
		default:
			return bad("action", "%q is not %s, %s or %s", e.Action, ActionInvalidate, ActionLegacy, ActionNote)
		}
		if !digest.IsHex(string(e.Attestation)) {
			return bad("attestation", "%q is not the amended run's attestation (64 lowercase hex)", e.Attestation)
		}
		if !digest.IsHex(string(e.Amendment)) {
			return bad("amendment", "%q is not the amendment's digest (64 lowercase hex)", e.Amendment)
		}
		if strings.TrimSpace(e.Reason) == "" {
			return bad("reason", "an amendment says why")
		}
		if e.Link != "" && !strings.HasPrefix(e.Link, "https://") && !strings.HasPrefix(e.Link, "http://") {
			return bad("link", "%q is not an http(s) URL", e.Link)
		}
		if e.Track != "" || e.TrackName != "" || e.Scaffold != "" || e.Agent != "" || e.Seed != 0 || e.RerunOf != "" || e.State != "" {
			return bad("kind", "an amended entry names its run, its attestation and the amendment only")
		}
	default:
		return bad("kind", "%q is not %s, %s or %s", e.Kind, KindQueued, KindEnded, KindAmended)
	}
	return nil
}

// Encode is the entry's leaf bytes: its JSON, as the ledger file holds it.
func (e *Entry) Encode() ([]byte, error) {
	if err := e.Check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxEntryBytes {
		return nil, fmt.Errorf("entry of %d bytes; at most %d", len(b), MaxEntryBytes)
	}
	return b, nil
}

// decodeEntryJSON is DecodeEntry's reading by encoding/json: unknown fields refused, the first
// value read.
func decodeEntryJSON(b []byte, e *Entry) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(e)
}

// DecodeEntry reads leaf bytes strictly: unknown fields are refused.
func DecodeEntry(b []byte) (*Entry, error) {
	if len(b) > MaxEntryBytes {
		return nil, fmt.Errorf("entry of %d bytes; at most %d", len(b), MaxEntryBytes)
	}
	var e Entry
	// In one pass where the entry is in jsonpass's subset (as sealrund writes every entry), else
	// by encoding/json, which decides; FuzzDecodeEntry holds the two to one reading.
	if !jsonpass.Decode(b, &e) {
		e = Entry{}
		if err := decodeEntryJSON(b, &e); err != nil {
			return nil, err
		}
	}
	if err := e.Check(); err != nil {
		return nil, err
	}
	return &e, nil
}

// Amendments are the amendments of each run a ledger holds, checked as they are appended or
// read: an amendment names a run that ended, by the attestation it ended with; a run has at most
// one invalidation or legacy label (two would conflict), none when the host already ended it
// invalid, and at most MaxNotes notes.
type Amendments struct {
	Status map[string]string // run -> invalidate or legacy
	Notes  map[string]int
	ByRun  map[string][]int    // run -> the indexes of its amended entries
	Seen   map[digest.Hex]bool // the amendments' digests: each is appended once
}

// NewAmendments returns an empty set.
func NewAmendments() *Amendments {
	return &Amendments{Status: map[string]string{}, Notes: map[string]int{}, ByRun: map[string][]int{}, Seen: map[digest.Hex]bool{}}
}

// Check says why e (an amended entry) cannot follow what is recorded, given the run's ended
// entry (nil: it never ended in this ledger).
func (a *Amendments) Check(e, ended *Entry) error {
	switch {
	case ended == nil:
		return fmt.Errorf("run %s is amended but never ended in this ledger: a host amends only runs it ran", e.Run)
	case ended.Attestation == "":
		return fmt.Errorf("run %s ended without an attestation: there is nothing to amend", e.Run)
	case ended.Attestation != e.Attestation:
		return fmt.Errorf("run %s ended with attestation %s; the amendment names %s (an amendment amends a run's attestation, never another amendment)", e.Run, short(ended.Attestation), short(e.Attestation))
	case a.Seen[e.Amendment]:
		return fmt.Errorf("amendment %s of run %s is in the ledger already: each amendment is appended once", short(e.Amendment), e.Run)
	}
	switch e.Action {
	case ActionInvalidate, ActionLegacy:
		if ended.State == outcome.Invalid {
			return fmt.Errorf("run %s ended invalid already: rerun it, or add a note", e.Run)
		}
		if s, ok := a.Status[e.Run]; ok {
			return fmt.Errorf("run %s is already amended %s: a run takes one invalidation or legacy label, not two; add a note instead", e.Run, past(s))
		}
	case ActionNote:
		if a.Notes[e.Run] >= MaxNotes {
			return fmt.Errorf("run %s has %d notes already, the most a run takes", e.Run, MaxNotes)
		}
	}
	return nil
}

// Add records e (checked) at index i.
func (a *Amendments) Add(e *Entry, i int) {
	if e.Action == ActionNote {
		a.Notes[e.Run]++
	} else {
		a.Status[e.Run] = e.Action
	}
	a.ByRun[e.Run] = append(a.ByRun[e.Run], i)
	a.Seen[e.Amendment] = true
}

func past(action string) string {
	if action == ActionInvalidate {
		return "invalidated"
	}
	return action
}

func short(h digest.Hex) string {
	if len(h) > 12 {
		return string(h[:12]) + "…"
	}
	return string(h)
}
