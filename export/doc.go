// Package export writes sealed runs in the formats readers' own tools open: an ATIF trajectory
// (Harbor's Agent Trajectory Interchange Format, read by Harbor's viewer, Docent, Inspect Scout
// and Phoenix) and an Inspect eval log (read by inspect view, Docent, Vivaria and Hawk). Each export is derived from the run's transcript.json alone and says so: the run,
// transcript.json's SHA-256, the attested audit head and the sealrun version (Source), so that a
// reader holding the run can recompute it byte for byte (sealrun verify --export). It is
// portable, like attest and transcript: it reads files, never a daemon.
package export

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sealrun/sealrun/transcript"
)

// Format names what Source's fields are, in every export's extra.
const Format = "sealrun-export/v1"

// Source is what an export was derived from.
type Source struct {
	TranscriptSHA256 string // of transcript.json's bytes
	AuditHead        string // the audit log's head the attestation binds ("" when the transcript has none)
	Version          string // the sealrun that exported it
}

// SourceOf is the Source of a transcript.json's bytes exported by sealrun version.
func SourceOf(transcriptJSON []byte, t *transcript.Transcript, version string) Source {
	s := sha256.Sum256(transcriptJSON)
	return Source{TranscriptSHA256: hex.EncodeToString(s[:]), AuditHead: t.Run.AuditHead, Version: version}
}

// fields is the source as an export's extra carries it, with the run's row.
func (s Source) fields(t *transcript.Transcript) map[string]any {
	f := map[string]any{"format": Format, "run": t.Run.ID, "transcript_sha256": s.TranscriptSHA256, "sealrun_version": s.Version,
		"track": t.Run.Track, "track_version": t.Run.TrackVersion, "track_id": t.Run.TrackID, "agent": t.Run.Agent, "scaffold": t.Run.Scaffold,
		"seed": t.Run.Seed, "state": t.Run.State, "result": t.Run.Result}
	if s.AuditHead != "" {
		f["audit_head"] = s.AuditHead
	}
	if t.Run.Reason != "" {
		f["reason"] = t.Run.Reason
	}
	if !t.Run.Started.IsZero() {
		f["started"] = stamp(t.Run.Started)
		f["finished"] = stamp(t.Run.Finished)
	}
	if len(t.Amendments) > 0 {
		f["amendments"] = t.Amendments // what was found after the run ended (sealrun amend)
	}
	return f
}
