package grader

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/audit"
)

// The kinds of history entries.
const (
	KindSubmit     = "submit"     // a candidate was packed and stored
	KindValidation = "validation" // its validation score (feedback only)
	KindRefused    = "refused"    // a submission refused, with the reason
	KindPromote    = "promote"    // the candidate the hidden exam will grade
	KindFinalize   = "finalize"   // the agent ended the run
)

// HistoryEntry is one line of history.jsonl (besides the chain's seq and prev). Fields not used
// by a kind are omitted.
type HistoryEntry struct {
	Kind      string    `json:"kind"`
	Time      time.Time `json:"time"`
	Candidate string    `json:"candidate,omitempty"` // sha256:<hex>
	Size      int64     `json:"size,omitempty"`      // gzipped bytes
	RawBytes  int64     `json:"raw_bytes,omitempty"`
	Files     int       `json:"files,omitempty"`
	Passed    *int      `json:"passed,omitempty"`
	Questions int       `json:"questions,omitempty"`
	Score     *float64  `json:"score,omitempty"` // validation percent
	Reason    string    `json:"reason,omitempty"`
	Dir       string    `json:"dir,omitempty"` // what the agent submitted (refused entries)
}

// CandidateInfo is one candidate as the history knows it.
type CandidateInfo struct {
	ID        string // sha256:<hex>
	Time      time.Time
	Size      int64
	Validated bool
	Passed    int
	Questions int
	Score     float64 // validation percent (0 until validated)
	Note      string  // why validation did not score it, if so
	Promoted  bool    // was ever promoted
}

// History is a run's append-only, hash-chained submission history (history.jsonl): every
// submission, refusal, validation score, promotion and finalization, each appended and fsynced
// before the agent hears of it. Its head goes into report.json, which the attestation binds.
type History struct {
	mu        sync.Mutex
	log       *audit.Log
	cands     []*CandidateInfo
	byID      map[string]*CandidateInfo
	promoted  string
	finalized bool
}

// OpenHistory opens (or creates) history.jsonl and replays it. A file whose chain or lines do
// not check is refused: the history is evidence, never repaired.
func OpenHistory(path string) (*History, error) {
	l, err := audit.Open(path)
	if err != nil {
		return nil, err
	}
	h := &History{log: l, byID: map[string]*CandidateInfo{}}
	f, err := os.Open(path)
	if err != nil {
		l.Close()
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), audit.MaxLineBytes+1)
	for n := 1; sc.Scan(); n++ {
		var e HistoryEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			l.Close()
			return nil, fmt.Errorf("history %s:%d: %v", path, n, err)
		}
		h.apply(e)
	}
	if err := sc.Err(); err != nil {
		l.Close()
		return nil, fmt.Errorf("history %s: %w", path, err)
	}
	return h, nil
}

func (h *History) apply(e HistoryEntry) {
	switch e.Kind {
	case KindSubmit:
		if h.byID[e.Candidate] == nil {
			c := &CandidateInfo{ID: e.Candidate, Time: e.Time, Size: e.Size}
			h.cands = append(h.cands, c)
			h.byID[e.Candidate] = c
		}
	case KindValidation:
		if c := h.byID[e.Candidate]; c != nil {
			c.Validated, c.Questions, c.Note = true, e.Questions, e.Reason
			if e.Passed != nil {
				c.Passed = *e.Passed
			}
			if e.Score != nil {
				c.Score = *e.Score
			}
		}
	case KindPromote:
		if c := h.byID[e.Candidate]; c != nil {
			c.Promoted, h.promoted = true, e.Candidate
		}
	case KindFinalize:
		if c := h.byID[e.Candidate]; c != nil {
			c.Promoted, h.promoted = true, e.Candidate
		}
		h.finalized = true
	}
}

// Append records e (its Time set by the caller) and applies it.
func (h *History) Append(e HistoryEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.appendLocked(e)
}

func (h *History) appendLocked(e HistoryEntry) error {
	// The chain's envelope carries the kind; the body holds the other fields.
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil {
		return err
	}
	delete(body, "kind")
	if _, _, err := h.log.Append(e.Kind, body); err != nil {
		return err
	}
	h.apply(e)
	return nil
}

// AppendSubmission records a submission, unless the run was finalized meanwhile (then nothing is
// recorded and the error says so).
func (h *History) AppendSubmission(e HistoryEntry) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finalized {
		return fmt.Errorf("the run was finalized while the submission was packed; it is not recorded")
	}
	return h.appendLocked(e)
}

// Resolve maps what the agent typed (a hex prefix of at least 4 digits, with or without
// "sha256:") to a candidate id; an unknown or ambiguous prefix is an error listing the
// candidates it could mean.
func (h *History) Resolve(prefix string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resolveLocked(prefix)
}

func (h *History) resolveLocked(prefix string) (string, error) {
	p := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(prefix), "sha256:"))
	if len(p) < 4 || strings.Trim(p, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%q is not a candidate id; give at least 4 hex digits of one (runner history lists them)", prefix)
	}
	var match []string
	for _, c := range h.cands {
		if strings.HasPrefix(strings.TrimPrefix(c.ID, "sha256:"), p) {
			match = append(match, c.ID)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		var all []string
		for _, c := range h.cands {
			all = append(all, short(c.ID))
		}
		if len(all) == 0 {
			return "", fmt.Errorf("no candidate %s: nothing has been submitted yet (runner submit DIR)", prefix)
		}
		return "", fmt.Errorf("no candidate %s; the candidates are %s", prefix, strings.Join(all, ", "))
	}
	for i := range match {
		match[i] = short(match[i]) + "…"
	}
	return "", fmt.Errorf("%s is ambiguous: it could be %s; give more digits", prefix, strings.Join(match, " or "))
}

// Promote resolves prefix and records the promotion.
func (h *History) Promote(prefix string, now time.Time) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finalized {
		return "", fmt.Errorf("the run is finalized; nothing more can be promoted")
	}
	id, err := h.resolveLocked(prefix)
	if err != nil {
		return "", err
	}
	return id, h.appendLocked(HistoryEntry{Kind: KindPromote, Time: now, Candidate: id})
}

// Finalize records the end of the run by the agent, promoting prefix first when given. A second
// finalize is refused.
func (h *History) Finalize(prefix string, now time.Time) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.finalized {
		return "", fmt.Errorf("the run is already finalized")
	}
	id := ""
	if prefix != "" {
		var err error
		if id, err = h.resolveLocked(prefix); err != nil {
			return "", err
		}
	}
	if err := h.appendLocked(HistoryEntry{Kind: KindFinalize, Time: now, Candidate: id}); err != nil {
		return "", err
	}
	return h.promoted, nil
}

// Promoted is the candidate the hidden exam grades ("" when none was promoted).
func (h *History) Promoted() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.promoted
}

// Finalized reports whether the agent finalized the run.
func (h *History) Finalized() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.finalized
}

// Candidates returns every candidate in submission order (copies).
func (h *History) Candidates() []CandidateInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]CandidateInfo, len(h.cands))
	for i, c := range h.cands {
		out[i] = *c
	}
	return out
}

// Candidate returns one candidate by id.
func (h *History) Candidate(id string) (CandidateInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.byID[id]
	if !ok {
		return CandidateInfo{}, false
	}
	return *c, true
}

// Head is the chain head and entry count of history.jsonl.
func (h *History) Head() (string, int) { return h.log.Head() }

// Close closes the file.
func (h *History) Close() error { return h.log.Close() }

// Table is the history as the agent sees it (runner history).
func (h *History) Table(start time.Time) string {
	cands := h.Candidates()
	head, n := h.Head()
	var b strings.Builder
	if len(cands) == 0 {
		b.WriteString("no candidates yet (runner submit DIR)\n")
	} else {
		fmt.Fprintf(&b, "%-14s %-9s %-10s %-22s %s\n", "CANDIDATE", "AT", "SIZE", "VALIDATION", "PROMOTED")
		promoted := h.Promoted()
		sorted := append([]CandidateInfo(nil), cands...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Time.Before(sorted[j].Time) })
		for _, c := range sorted {
			val := "-"
			switch {
			case c.Validated && c.Note == "":
				val = fmt.Sprintf("%d/%d (%.1f%%)", c.Passed, c.Questions, c.Score)
			case c.Validated:
				val = fmt.Sprintf("%d/%d (%.1f%%)*", c.Passed, c.Questions, c.Score)
			}
			mark := ""
			switch {
			case c.ID == promoted:
				mark = "yes (graded)"
			case c.Promoted:
				mark = "earlier"
			}
			row := fmt.Sprintf("%-14s %-9s %-10s %-22s %s", short(c.ID), offset(c.Time.Sub(start)), iec(c.Size), val, mark)
			b.WriteString(strings.TrimRight(row, " ") + "\n")
		}
	}
	fmt.Fprintf(&b, "history: %d entries, head %s\n", n, head[:16])
	return b.String()
}

// short is the first 12 hex digits of a candidate id.
func short(id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

func offset(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("+%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
