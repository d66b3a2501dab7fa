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

// Entry kinds: a run is appended when the daemon accepts it and again when it ends.
const (
	KindQueued = "queued"
	KindEnded  = "ended"
)

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
	State       outcome.Outcome `json:"state,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Attestation digest.Hex      `json:"attestation,omitempty"` // sha256 hex of the signed statement
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
	for _, s := range []struct{ f, v string }{{"track_name", e.TrackName}, {"scaffold", e.Scaffold}, {"agent", e.Agent}, {"reason", e.Reason}} {
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
	default:
		return bad("kind", "%q is not %s or %s", e.Kind, KindQueued, KindEnded)
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
