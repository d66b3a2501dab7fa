package api

import "github.com/sealrun/sealrun/audit"

// EventKind is the kind of a journal event (Event.Kind), or of a line of a run's events stream:
// the one list of them. The journal's kinds are what the daemon replays; the stream's own
// (EventRecord, EventHeartbeat, EventActivity) are never written to the journal.
type EventKind string

// What the daemon replays from the journal: a run's request, its states and its result.
const (
	EventSubmitted EventKind = "submitted" // Data: the run's request as queued
	EventState     EventKind = "state"     // State, Reason: the run's state now
	EventResult    EventKind = "result"    // Data: the run's Result (its end's report and attestation)
)

// A human run's clock: the record's Started, Deadline, Paused and Waiting follow them.
const (
	EventHumanWaiting     EventKind = "human_waiting"      // the run waits for its person (Reason: until when)
	EventHumanStartPassed EventKind = "human_start_passed" // no one attached within human.start: the clock starts
	EventClockStarted     EventKind = "clock_started"      // Data: {"started", "deadline"}
	EventPaused           EventKind = "paused"
	EventResumed          EventKind = "resumed" // Data: {"deadline": the run's deadline now}
	// A person attaching or leaving, a proctor watching (Reason: who, and an operator's why):
	// the audit log's attach events.
	EventAttach  EventKind = audit.AttachStart
	EventDetach  EventKind = audit.AttachEnd
	EventWatch   EventKind = audit.AttachWatch
	EventUnwatch EventKind = audit.AttachUnwatch
)

// What happened on a run's way, for its reader (Reason says it in words).
const (
	EventCheckNote           EventKind = "check_note"            // a note of the track's or kit's check before the run
	EventTaskPrepared        EventKind = "task_prepared"         // a task's prepare script ran
	EventHold                EventKind = "hold"                  // a test build held the run at a point (test seams only)
	EventControllerRestarted EventKind = "controller_restarted"  // the scaffold never ran (the host's fault) and was started again
	EventDeadline            EventKind = "deadline"              // the run's clock ran out
	EventFinalized           EventKind = "finalized"             // the agent ended its run
	EventAgentExited         EventKind = "agent_exited"          // the scaffold ended before the deadline
	EventGatewayRequestsLeft EventKind = "gateway_requests_left" // model requests still running when the gateway closed
	EventSealed              EventKind = "sealed"                // Data: the hidden exam's pass vector's hash and count
	EventReportHTMLFailed    EventKind = "report_html_failed"    // report.html could not be written
	EventTranscriptFailed    EventKind = "transcript_failed"     // the transcript could not be written
	// EventTeardownFailed: the run's containers, cgroups, mounts or network namespace could
	// not all be removed after it ended; Reason says what is left.
	EventTeardownFailed EventKind = "teardown_failed"
	// EventTimestampFailed: the host's timestamp authority did not timestamp the run's
	// attestation (three tries); Reason says why. The run is attested all the same, its
	// Sigstore bundle without a timestamp.
	EventTimestampFailed EventKind = "timestamp_failed"
)

// The events stream's own lines (never in the journal).
const (
	EventRecord    EventKind = "record"    // Data: the run's record, first on the stream
	EventHeartbeat EventKind = "heartbeat" // Data: the run's record, while nothing else happens
	EventActivity  EventKind = "activity"  // Reason: one audit entry in words (transcript.Activity)
)
