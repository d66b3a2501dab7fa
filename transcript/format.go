package transcript

import (
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/policy"
)

// Format is the format and version of transcript.json. A reader refuses a format it does not
// know; a change that removes or retypes a field is a new version.
const Format = "sealrun-transcript/v1"

// Limits of what a transcript carries of one text (a message part, a call's output): the first
// HeadBytes and the last TailBytes, with the count of what lies between (the body itself, whole,
// is beside it and hashed in the audit log).
const (
	HeadBytes = 48 << 10
	TailBytes = 16 << 10
)

// Transcript is transcript.json: one run, reassembled.
type Transcript struct {
	Format string `json:"format"`
	Run    Run    `json:"run"`
	Totals Totals `json:"totals"`
	Bodies Counts `json:"bodies"`
	// Through is the sequence number of the last audit entry read: a live reader asks for the
	// entries after it.
	Through int     `json:"through"`
	Events  []Event `json:"events"`
	// Amendments are what was found about the run after it ended (sealrun amend), as the signed
	// amendments beside it say (attest/PREDICATE.md, "Amendments"), oldest first.
	Amendments []Amendment `json:"amendments,omitempty"`
}

// Amendment is one amendment of the run.
type Amendment struct {
	Time      time.Time `json:"time"`
	Action    string    `json:"action"` // invalidate, legacy or note
	Reason    string    `json:"reason"`
	Link      string    `json:"link,omitempty"`
	Amendment string    `json:"amendment"` // SHA-256 (hex) of its signed statement
}

// Run is what the transcript says of the run as a whole: from its attestation once it has
// ended, from the daemon's record while it runs.
type Run struct {
	ID           string `json:"id"`
	Track        string `json:"track"`
	TrackVersion string `json:"track_version,omitempty"`
	TrackID      string `json:"track_id,omitempty"`
	Agent        string `json:"agent"` // PROVIDER/MODEL[@EFFORT] or MODEL[@EFFORT]
	Scaffold     string `json:"scaffold,omitempty"`
	Seed         int64  `json:"seed"`
	// State is queued, preparing, running, grading, graded, failed or invalid.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Result string `json:"result,omitempty"` // the score in words ("7/12", "Accuracy 0.95")
	// The clock: the run's start, when the reserve window opens (deadline - reserve), the
	// deadline, and the end (zero while it runs).
	Started   time.Time `json:"started,omitzero"`
	ReserveAt time.Time `json:"reserve_at,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	Wall      string    `json:"wall,omitempty"`
	CallLimit string    `json:"call_limit,omitempty"`
	Reserve   string    `json:"reserve,omitempty"`
	// AuditHead is the head of the audit log's hash chain through Through (the attestation's
	// audit.head once the run has ended).
	AuditHead string `json:"audit_head,omitempty"`
	Live      bool   `json:"live,omitempty"` // built while the run had not ended
	// Price is the host's price of the run's model (the attestation's usage.cost.price): each
	// exchange's and the run's cost are their tokens at it. MaxTokens and MaxCost are the
	// track's bounds on the model, when it has them.
	Price     *policy.Price `json:"price,omitempty"`
	MaxTokens int64         `json:"max_tokens,omitempty"`
	MaxCost   string        `json:"max_cost,omitempty"`
}

// Totals sum the run's activity.
type Totals struct {
	Exchanges        int   `json:"exchanges"`
	Refused          int   `json:"refused"`
	Retries          int   `json:"retries"`
	ProviderLostMS   int64 `json:"provider_lost_ms"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
	CachedTokens     int64 `json:"cached_tokens"`      // of the prompt tokens, read from the provider's cache
	CacheWriteTokens int64 `json:"cache_write_tokens"` // of the prompt tokens, written to it
	// Cost is the run's tokens at Run.Price (absent without a price).
	Cost        float64 `json:"cost,omitempty"`
	BodyBytes   int64   `json:"body_bytes"` // the requests' and responses' bytes, as the audit log counts them
	Calls       int     `json:"calls"`
	FailedCalls int     `json:"failed_calls"`
	Submissions int     `json:"submissions"`
}

// Counts are the bodies of the run by state (Body.State).
type Counts struct {
	Intact   int `json:"intact"`
	Withheld int `json:"withheld"`
	Missing  int `json:"missing"`
	Altered  int `json:"altered"`
}

// Body states.
const (
	BodyIntact   = "intact"   // kept, and its SHA-256 is the one the audit entry carries
	BodyWithheld = "withheld" // not published, by the operator's choice (publish --redact)
	BodyMissing  = "missing"  // no file where the run keeps it
	BodyAltered  = "altered"  // a file whose SHA-256 (or size) is not the audit entry's
)

// Event kinds.
const (
	KindStart       = "start"                 // the clock starts
	KindModel       = "model"                 // one model exchange through the gateway
	KindCall        = audit.KindCall          // one compute call
	KindSubmit      = audit.KindSubmit        // a candidate submitted
	KindRefusedSub  = audit.KindSubmitRefused // a submission refused
	KindValidation  = audit.KindValidation    // a candidate's validation score
	KindEvaluated   = audit.KindEvaluated     // a task submission's evaluation
	KindPromote     = audit.KindPromote
	KindFinalize    = audit.KindFinalize
	KindSealed      = audit.KindSealed      // the pass vector sealed
	KindTaskPrepare = audit.KindTaskPrepare // a task's preparation
	KindReserve     = "reserve"             // the reserve window opens
	KindDeadline    = "deadline"
	KindEnd         = "end" // the run's end: its state and reason
	KindOther       = "other"
)

// Event is one thing on the run's time axis. Seq is its audit entry's sequence number (0 for the
// clock's events); At is milliseconds since the run's start. Failed marks what a reader jumps
// to: a refused or failed request, a retry, a call that did not exit 0, a call killed at a limit,
// a refused submission, a validation score below the best before it, an invalid end.
type Event struct {
	Seq        int         `json:"seq"`
	Kind       string      `json:"kind"`
	Time       time.Time   `json:"time,omitzero"`
	At         int64       `json:"at_ms"`
	Failed     bool        `json:"failed,omitempty"`
	Text       string      `json:"text,omitempty"` // a one-line summary
	Model      *Exchange   `json:"model,omitempty"`
	Call       *Call       `json:"call,omitempty"`
	Submission *Submission `json:"submission,omitempty"`
	Terminal   *Terminal   `json:"terminal,omitempty"`
}

// Terminal is one segment of a human run's terminal recording (an asciicast v2 stream, the
// segments in order; docs/TRANSCRIPT.md, "Human runs"): its span in seconds since the recording
// began, what was typed and shown in it, and its body, checked like any.
type Terminal struct {
	Segment     int     `json:"segment"`
	From        float64 `json:"from"`
	To          float64 `json:"to"`
	Events      int     `json:"events"`
	InputBytes  int64   `json:"input_bytes"`
	OutputBytes int64   `json:"output_bytes"`
	NotRecorded int64   `json:"not_recorded,omitempty"`
	// NotRecordedInput: typed past the recording's input cap, not kept.
	NotRecordedInput int64 `json:"not_recorded_input,omitempty"`
	Body             Body  `json:"body,omitzero"` // absent when the segment could not be kept (the event is failed)
	// Cast is the segment itself (its asciicast lines; the first segment's begins with the
	// header), for the page's player: present when the body is intact and the run's recording so
	// far is within MaxInlineCast; CastCut says it was left out for that bound.
	Cast    string `json:"cast,omitempty"`
	CastCut bool   `json:"cast_cut,omitempty"`
}

// MaxInlineCast bounds the recording a transcript carries inline (the page's player); past it
// the segments are in the run directory alone (played with asciinema).
const MaxInlineCast = 16 << 20

// Exchange is one model request and its response.
type Exchange struct {
	N              int    `json:"n"` // the gateway's request number
	Method         string `json:"method"`
	Path           string `json:"path"`
	API            string `json:"api,omitempty"` // APIChat, APIResponses, APIMessages, APIGemini; "" when not read
	Model          string `json:"model,omitempty"`
	Status         int    `json:"status"`
	Refused        string `json:"refused,omitempty"`
	Error          string `json:"error,omitempty"`
	Streamed       bool   `json:"streamed,omitempty"`
	LatencyMS      int64  `json:"latency_ms"`
	ProviderLostMS int64  `json:"provider_lost_ms,omitempty"`
	Tries          []Try  `json:"tries,omitempty"`
	Usage          Usage  `json:"usage"`
	// Cost is Usage at Run.Price (absent without a price, or when the exchange used nothing).
	Cost     float64 `json:"cost,omitempty"`
	Request  Body    `json:"request,omitzero"`
	Response Body    `json:"response,omitzero"`
	// The request's conversation: Messages in all, of which the first Shared are the messages
	// of exchange Extends (its request, then its output) said again; then, for a scaffold that
	// drops the middle of its history, Extends' last Kept messages (the Dropped before them
	// left out); Added are the rest.
	Messages int       `json:"messages"`
	Extends  int       `json:"extends,omitempty"`
	Shared   int       `json:"shared,omitempty"`
	Dropped  int       `json:"dropped,omitempty"`
	Kept     int       `json:"kept,omitempty"`
	Added    []Message `json:"added"`
	// Tools are the names of the tools the request offers, when they differ from the extended
	// exchange's (or it extends none).
	Tools  []string  `json:"tools,omitempty"`
	Output []Message `json:"output"`
	Stop   string    `json:"stop,omitempty"` // the finish or stop reason
	// Note says what could not be read of the bodies (a body withheld, not JSON, a shape this
	// version does not know): the bodies themselves are still checked.
	Note string `json:"note,omitempty"`
}

// The APIs an exchange is read as.
const (
	APIChat      = "openai-chat-completions"
	APIResponses = "openai-responses"
	APIMessages  = "anthropic-messages"
	APIGemini    = "google-gemini"
)

// Try is one attempt at the provider, as the gateway's audit entry has it.
type Try = audit.Try

// Usage is the token usage the provider reported, as the gateway's audit entry has it: Prompt
// counts every input token (CachedPrompt and CacheWrite are parts of it), Completion every output
// token (Reasoning is part of it).
type Usage = audit.Usage

// Body is one kept body: where the run keeps it (relative to the run directory), what the audit
// entry says of it, and its state. A log cut at its cap has Kept and KeptSHA256 (what the audit
// entry says the log holds) beside Bytes and SHA256 (everything).
type Body struct {
	Path       string `json:"path"`
	Bytes      int64  `json:"bytes"`
	SHA256     string `json:"sha256"`
	Kept       int64  `json:"kept,omitempty"`
	KeptSHA256 string `json:"kept_sha256,omitempty"`
	State      string `json:"state"`
}

// Message is one message of a conversation, in one shape for every API.
type Message struct {
	Role  string `json:"role"` // system, developer, user, assistant, tool
	Parts []Part `json:"parts"`
}

// Part types.
const (
	PartText       = "text"
	PartReasoning  = "reasoning" // a reasoning summary or thinking text the API returned
	PartToolCall   = "tool_call"
	PartToolResult = "tool_result"
	PartImage      = "image"
	PartOther      = "other" // an item of another kind: its type in Name, its JSON in Text
)

// Part is one piece of a message. Text is at most HeadBytes; a longer text is cut there and
// its last TailBytes kept in Tail, with Cut the bytes between. Text and Tail are valid UTF-8
// (other bytes are U+FFFD).
type Part struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Tail  string `json:"tail,omitempty"`
	Cut   int64  `json:"cut,omitempty"`
	Name  string `json:"name,omitempty"` // a tool's name; an other part's type
	ID    string `json:"id,omitempty"`   // a tool call's id, which its result names
	Error bool   `json:"error,omitempty"`
}

// Call is one compute call.
type Call struct {
	N              int       `json:"n"`
	Argv           []string  `json:"argv"`
	Cwd            string    `json:"cwd"`
	Status         string    `json:"status"` // exited, limit, cancelled, infra_error
	Exit           int       `json:"exit"`
	Limit          string    `json:"limit,omitempty"`
	LimitHit       bool      `json:"limit_hit,omitempty"`
	OOMKilled      bool      `json:"oom_killed,omitempty"`
	PidsLimitEnded bool      `json:"pids_limit_ended,omitempty"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	DurationMS     int64     `json:"duration_ms"`
	CPUSeconds     float64   `json:"cpu_seconds,omitempty"`
	MemoryPeak     uint64    `json:"memory_peak,omitempty"`
	Error          string    `json:"error,omitempty"`
	Output         Body      `json:"output,omitzero"`
	// The output as text: the first HeadBytes, the last TailBytes of what the log keeps, and
	// the bytes between.
	Text string `json:"text,omitempty"`
	Tail string `json:"tail,omitempty"`
	Cut  int64  `json:"cut,omitempty"`
}

// Submission is a submission, its refusal, its validation or evaluation, a promotion, the
// finalize or the sealed pass vector.
type Submission struct {
	Candidate digest.Digest `json:"candidate,omitempty"`
	Dir       string        `json:"dir,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Size      int64         `json:"size,omitempty"`
	Files     int           `json:"files,omitempty"`
	Passed    *int          `json:"passed,omitempty"`
	Questions int           `json:"questions,omitempty"`
	Score     *float64      `json:"score,omitempty"` // percent, or a task's metric value
	Best      *float64      `json:"best,omitempty"`  // the best validation score before this one
}
