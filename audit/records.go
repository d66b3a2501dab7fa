package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/policy"
)

// The records of a run's audit log: one type per kind, written by its one writer and read by
// every reader (transcript, attest's usage, the bodies a gather checks) — the only definition of
// each. The envelope (seq, prev, kind) is Entry's; a record's fields follow it on the same line.
// Field order is the order on the line, so a record keeps its bytes: the grader's records are
// in the order of their keys (they were written from maps).

// The kinds of entries, and who writes them.
const (
	KindGateway       = "gateway"        // Gateway: the model gateway (controller), one a request
	KindCall          = "call"           // Call: the runner, one a compute call
	KindSubmit        = "submit"         // Submit: the grader, a candidate accepted
	KindSubmitRefused = "submit_refused" // SubmitRefused: the grader, a submission refused
	KindValidation    = "validation"     // Validation: the grader, a candidate's validation score
	KindEvaluated     = "evaluated"      // Evaluated: the grader, a task candidate's evaluation
	KindPromote       = "promote"        // Promote: the grader, the candidate the agent promoted
	KindFinalize      = "finalize"       // Finalize: the grader, the agent's end of the run
	KindSealed        = "sealed"         // Sealed: the grader, the hidden exam's pass vector
	KindTaskPrepare   = "task_prepare"   // TaskPrepare: the daemon, a task's own preparation
	KindTerminal      = "terminal"       // Terminal: the controller, one segment of a human run's recording
	KindAttach        = "attach"         // Attach: the daemon, a person attaching to or leaving a human run
	KindPause         = "pause"          // Pause: the daemon, a pause of a human run beginning or ending
)

// Gateway is the record of one model request through the gateway (kind "gateway").
type Gateway struct {
	Request        int        `json:"request"`
	Time           time.Time  `json:"time"`
	Method         string     `json:"method"`
	Path           string     `json:"path"`
	Model          string     `json:"model"`
	Effort         string     `json:"effort"`
	Status         int        `json:"status"`
	Refused        string     `json:"refused,omitempty"`
	Tries          []Try      `json:"tries"`
	LatencyMS      int64      `json:"latency_ms"`
	ProviderLostMS int64      `json:"provider_lost_ms"`
	RequestBytes   int64      `json:"request_bytes"`
	RequestSHA256  digest.Hex `json:"request_sha256"`
	ResponseBytes  int64      `json:"response_bytes"`
	ResponseSHA256 digest.Hex `json:"response_sha256"`
	Streamed       bool       `json:"streamed"`
	Usage          Usage      `json:"usage"`
	Error          string     `json:"error,omitempty"`
	// BodyError: a body the entry hashes could not be kept (the run is invalid for it).
	BodyError string `json:"body_error,omitempty"`
}

// Try is one attempt at the provider.
type Try struct {
	Status    int    `json:"status,omitempty"`
	Error     string `json:"error,omitempty"`
	LatencyMS int64  `json:"latency_ms"`
	WaitMS    int64  `json:"wait_ms,omitempty"` // backoff after it
}

// Usage is the token usage the provider reported. Prompt counts every input token, cached ones
// included (Anthropic's input_tokens plus its cache reads and writes); CachedPrompt and
// CacheWrite are parts of it. Completion counts every output token; Reasoning is part of it.
type Usage struct {
	Prompt       int64 `json:"prompt"`
	Completion   int64 `json:"completion"`
	Reasoning    int64 `json:"reasoning"`
	CachedPrompt int64 `json:"cached_prompt,omitempty"`
	CacheWrite   int64 `json:"cache_write,omitempty"`
}

// Tokens is u as a track's budget and the price table count it.
func (u Usage) Tokens() policy.Tokens {
	return policy.Tokens{Input: u.Prompt, CachedInput: u.CachedPrompt, CacheWrite: u.CacheWrite, Output: u.Completion, Reasoning: u.Reasoning}
}

// The statuses of a compute call.
const (
	CallExited    = "exited"
	CallLimit     = "limit"
	CallCancelled = "cancelled"
	CallInfra     = "infra_error" // the host's failure: no log is kept
)

// Call is the record of one compute call (kind "call").
type Call struct {
	Call        int       `json:"call"`
	Argv        []string  `json:"argv"`
	Cwd         string    `json:"cwd"`
	EnvKeys     []string  `json:"env_keys"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	StartOffset string    `json:"start_offset"` // since the run's start, monotonic
	EndOffset   string    `json:"end_offset"`
	Limit       string    `json:"limit"`
	Status      string    `json:"status"` // CallExited, CallLimit, CallCancelled, CallInfra
	Exit        int       `json:"exit"`
	LimitHit    bool      `json:"limit_hit"`
	OOMKilled   bool      `json:"oom_killed"`
	// PidsLimitEnded: the call's container ended at its pids limit (under gVisor only, whose
	// sandbox ends there; under runc the fork fails and the call goes on).
	PidsLimitEnded bool       `json:"pids_limit_ended,omitempty"`
	OutputBytes    int64      `json:"output_bytes"`
	OutputSHA256   digest.Hex `json:"output_sha256"`
	LogTruncated   bool       `json:"log_truncated"`
	// LogBytes and LogSHA256 are of exactly what calls/<n>.log keeps, when it is cut at the
	// runner's log cap (LogTruncated); a log kept whole is output_bytes and output_sha256.
	LogBytes   int64      `json:"log_bytes,omitempty"`
	LogSHA256  digest.Hex `json:"log_sha256,omitempty"`
	CPUSeconds float64    `json:"cpu_seconds"`
	MemoryPeak uint64     `json:"memory_peak"`
	Container  string     `json:"container"`
	Error      string     `json:"error,omitempty"`
	// StartRetried: the call's first container never ran (the runtime failed to start it:
	// the host's fault, nothing of the agent's ran) and it was started once more; why.
	StartRetried string `json:"start_retried,omitempty"`
}

// Submit is a candidate the grader accepted (kind "submit"): its id, the directory it was
// packed from (task runs), its packed and raw size and file count.
type Submit struct {
	Candidate digest.Digest `json:"candidate"`
	Dir       string        `json:"dir,omitempty"`
	Files     int           `json:"files"`
	RawBytes  int64         `json:"raw_bytes"`
	Size      int64         `json:"size"`
	Time      time.Time     `json:"time"`
}

// SubmitRefused is a submission the grader refused (kind "submit_refused").
type SubmitRefused struct {
	Dir    string    `json:"dir"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// Validation is a candidate's score on the validation set (kind "validation"): questions
// passed, of how many, and the count of each outcome.
type Validation struct {
	Candidate digest.Digest  `json:"candidate"`
	Outcomes  map[string]int `json:"outcomes"`
	Passed    *int           `json:"passed"`
	Questions int            `json:"questions"`
	Time      time.Time      `json:"time"`
}

// Evaluated is a task candidate's evaluation by the task's evaluate.py (kind "evaluated"): the
// task's metric and its value (null: no valid submission, and why in Invalid).
type Evaluated struct {
	Candidate       digest.Digest `json:"candidate"`
	Invalid         string        `json:"invalid,omitempty"`
	Metric          string        `json:"metric"`
	Time            time.Time     `json:"time"`
	ValidSubmission bool          `json:"valid_submission"`
	Value           *float64      `json:"value"`
}

// Promote is the candidate the agent promoted (kind "promote").
type Promote struct {
	Candidate digest.Digest `json:"candidate"`
	Time      time.Time     `json:"time"`
}

// Finalize is the agent's end of the run (kind "finalize"), with the candidate promoted then.
type Finalize struct {
	Candidate digest.Digest `json:"candidate"`
	Time      time.Time     `json:"time"`
}

// Sealed is the hidden exam's pass vector of the graded candidate (kind "sealed").
type Sealed struct {
	Candidate        digest.Digest `json:"candidate"`
	PassVectorSHA256 digest.Hex    `json:"pass_vector_sha256"`
	Passed           int           `json:"passed"`
	Questions        int           `json:"questions"`
	Time             time.Time     `json:"time"`
}

// TaskPrepare is a task's own preparation, run by the daemon before the clock (kind
// "task_prepare").
type TaskPrepare struct {
	Exit     int     `json:"exit"`
	OOM      bool    `json:"oom"`
	Script   string  `json:"script"`
	Seconds  float64 `json:"seconds"`
	TimedOut bool    `json:"timed_out"`
}

// Terminal is the record of one segment of a human run's terminal recording (kind
// "terminal"): the asciicast v2 lines of the segment (the first segment begins with the
// header), kept whole at TerminalSegmentPath, gzip-compressed, and hashed here as they are
// uncompressed. The recording is the segments in order.
type Terminal struct {
	Segment int `json:"segment"` // 1, 2, ...
	// From and To are the segment's first and last event, in seconds since the recording began
	// (its header's timestamp).
	From   float64 `json:"from"`
	To     float64 `json:"to"`
	Events int     `json:"events"`
	// InputBytes and OutputBytes are what the person typed and what the terminal showed in it.
	InputBytes  int64      `json:"input_bytes"`
	OutputBytes int64      `json:"output_bytes"`
	Bytes       int64      `json:"bytes"`
	SHA256      digest.Hex `json:"sha256"`
	// NotRecorded counts the terminal's output past the recording's cap, shown but not kept
	// (the recording says so in a marker).
	NotRecorded int64 `json:"not_recorded,omitempty"`
	// NotRecordedInput counts what the person typed past the recording's input cap: it reached
	// the shell, and is not kept (the recording says so in a marker).
	NotRecordedInput int64 `json:"not_recorded_input,omitempty"`
	// BodyError: the segment could not be kept (the run is invalid for it).
	BodyError string `json:"body_error,omitempty"`
}

// The events of a human run's attachments.
const (
	AttachStart   = "attach"  // a person took the terminal
	AttachEnd     = "detach"  // they left it (detached, or their connection dropped)
	AttachWatch   = "watch"   // a proctor began watching, read-only
	AttachUnwatch = "unwatch" // and stopped
)

// Attach is the record of a person attaching to or leaving a human run's terminal, or a proctor
// watching it (kind "attach").
type Attach struct {
	Time   time.Time `json:"time"`
	Offset string    `json:"offset"` // on the run's clock
	Event  string    `json:"event"`  // AttachStart, AttachEnd, AttachWatch, AttachUnwatch
	User   string    `json:"user"`   // who, as the admin socket's peer credentials name them
	Reason string    `json:"reason,omitempty"`
}

// The events of a pause.
const (
	PauseStart = "pause"  // the operator paused the run: the clock, the shell and compute stop
	PauseEnd   = "resume" // the pause ended: the deadline moved by its length
)

// Pause is the record of a pause of a human run beginning (PauseStart: who granted it, why, for
// how long at most) or ending (PauseEnd: who or what ended it, its length, the deadline it moved
// to) (kind "pause").
type Pause struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
	By       string    `json:"by"`
	Reason   string    `json:"reason"`
	For      string    `json:"for,omitempty"`     // PauseStart: its longest length (the allowance left, or less)
	Length   string    `json:"length,omitempty"`  // PauseEnd
	Deadline time.Time `json:"deadline,omitzero"` // PauseEnd: the run's deadline now
	Left     string    `json:"allowance_left"`    // what the track's human.pauses leaves after it
}

// Record is one entry's record: a value of one of the types above, which names its kind.
type Record interface{ Kind() string }

func (Gateway) Kind() string       { return KindGateway }
func (Call) Kind() string          { return KindCall }
func (Submit) Kind() string        { return KindSubmit }
func (SubmitRefused) Kind() string { return KindSubmitRefused }
func (Validation) Kind() string    { return KindValidation }
func (Evaluated) Kind() string     { return KindEvaluated }
func (Promote) Kind() string       { return KindPromote }
func (Finalize) Kind() string      { return KindFinalize }
func (Sealed) Kind() string        { return KindSealed }
func (TaskPrepare) Kind() string   { return KindTaskPrepare }
func (Terminal) Kind() string      { return KindTerminal }
func (Attach) Kind() string        { return KindAttach }
func (Pause) Kind() string         { return KindPause }

// newRecord is a new, empty record of kind (a pointer to its type: *Call for KindCall), or nil
// for a kind this package does not own.
func newRecord(kind string) Record {
	switch kind {
	case KindGateway:
		return new(Gateway)
	case KindCall:
		return new(Call)
	case KindSubmit:
		return new(Submit)
	case KindSubmitRefused:
		return new(SubmitRefused)
	case KindValidation:
		return new(Validation)
	case KindEvaluated:
		return new(Evaluated)
	case KindPromote:
		return new(Promote)
	case KindFinalize:
		return new(Finalize)
	case KindSealed:
		return new(Sealed)
	case KindTaskPrepare:
		return new(TaskPrepare)
	case KindTerminal:
		return new(Terminal)
	case KindAttach:
		return new(Attach)
	case KindPause:
		return new(Pause)
	}
	return nil
}

// Decode reads the record of an entry of kind from its line (the whole entry, envelope and
// all) as kind's type: *Call for KindCall, and so on. A kind this package does not own is
// (nil, nil): readers show it by its name.
func Decode(kind string, line []byte) (Record, error) {
	r := newRecord(kind)
	if r == nil {
		return nil, nil
	}
	if err := json.Unmarshal(line, r); err != nil {
		return nil, err // the caller names the entry: its line and kind
	}
	return r, nil
}

// ParseRecord reads one entry's line: its kind and its record (nil for a kind this package does
// not own), with one JSON decoding where the line is as Append writes it (its kind found by
// KindOf) and two otherwise.
func ParseRecord(line []byte) (kind string, r Record, err error) {
	kind, ok := KindOf(line)
	if !ok {
		e, r, err := Parse(line)
		return e.Kind, r, err
	}
	if r, err = Decode(kind, line); err != nil {
		return kind, nil, fmt.Errorf("a %s record: %w", kind, err)
	}
	return kind, r, nil
}

// KindOf is the kind of an entry's line in the form Append writes it: {"seq":N,"prev":"HEX",
// "kind":"KIND", …, with "kind": nowhere else in the line (JSON takes the last of a repeated
// key, so a line that repeats it is not read here). ok is false for any other line: read it
// with Parse.
func KindOf(line []byte) (kind string, ok bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"seq":`))
	if !ok {
		return "", false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 {
		return "", false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"prev":"`)); !ok {
		return "", false
	}
	i = 0
	for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] >= 'a' && rest[i] <= 'f') {
		i++
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`","kind":"`)); !ok {
		return "", false
	}
	i = 0
	for i < len(rest) && (rest[i] >= 'a' && rest[i] <= 'z' || rest[i] == '_') {
		i++
	}
	if i == 0 || i == len(rest) || rest[i] != '"' || bytes.Count(line, []byte(`"kind":`)) != 1 {
		return "", false
	}
	return string(rest[:i]), true
}

// Parse reads one entry's line: its envelope and its record (nil for a kind this package does
// not own).
func Parse(line []byte) (Entry, Record, error) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return e, nil, fmt.Errorf("not a JSON audit entry: %w", err)
	}
	r, err := Decode(e.Kind, line)
	if err != nil {
		return e, nil, fmt.Errorf("a %s record: %w", e.Kind, err)
	}
	return e, r, nil
}
