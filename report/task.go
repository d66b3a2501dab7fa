package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// TaskFormat identifies report.json of a task run.
const TaskFormat = "sealrun-task-report/v1"

// Task is report.json of an AIRS task run (grader/REPORT.md): the promoted submission's
// metric from the task's evaluate.py, or why it yields none. Safe to publish: evaluate.py's
// stderr stays in the private grading directory.
type Task struct {
	Format      string          `json:"format"`
	Status      outcome.Outcome `json:"status"` // graded, or failed: no candidate promoted
	Reason      string          `json:"reason,omitempty"`
	Track       Track           `json:"track"`
	Task        TaskInfo        `json:"task"`
	Candidate   Candidate       `json:"candidate"`
	Metric      string          `json:"metric"`
	Value       *float64        `json:"value"`             // null: no valid submission
	Valid       bool            `json:"valid_submission"`  // evaluate.py gave a finite number
	Invalid     string          `json:"invalid,omitempty"` // why not
	Result      json.RawMessage `json:"result,omitempty"`  // evaluate.py's result JSON
	GraderImage string          `json:"grader_image"`
	Device      string          `json:"device"`
	Seconds     float64         `json:"evaluate_seconds"`
	HistoryHead string          `json:"history_head"`
	// Usage is the run's model use and cost (added by the daemon once the run has ended).
	Usage *policy.Usage `json:"usage,omitempty"`
}

// TaskInfo names the task a report scored.
type TaskInfo struct {
	Name          string     `json:"name"`
	SHA256        digest.Hex `json:"sha256"`
	DataSHA256    digest.Hex `json:"data_sha256"`
	LowerIsBetter bool       `json:"metric_lower_is_better"`
	SOTA          float64    `json:"sota_score"`
	Optimal       float64    `json:"optimal_score"`
	Worst         *float64   `json:"estimated_worst_score,omitempty"`
}

// UnknownMetric is the metric a task report or attestation names when the run ended before its
// task directory was verified (nothing says which metric it would have had).
const UnknownMetric = "unknown (the run ended before its task was verified)"

// NewTask is a task report with the track's pins and, from the task's metadata (nil when
// the task was never verified: UnknownMetric), the metric and its scoring; no candidate yet.
func NewTask(t *policy.Track, m *airs.Metadata, status outcome.Outcome, reason, image string) *Task {
	rep := &Task{Format: TaskFormat, Status: status, Reason: reason, Track: Track{ID: t.ID, Name: t.Name, Version: t.Version},
		Task: TaskInfo{Name: t.Task.Name, SHA256: t.Task.SHA256, DataSHA256: t.Task.DataSHA256}, Metric: UnknownMetric, GraderImage: image}
	if m != nil {
		rep.Task.LowerIsBetter, rep.Task.SOTA, rep.Task.Optimal, rep.Task.Worst = m.MetricLowerIsBetter, m.Info.SOTA.Score, airs.DirectionOptimum(m.MetricLowerIsBetter), m.Info.EstimatedWorstScore
		rep.Metric = m.Info.Metric
	}
	return rep
}

// WriteTask writes a task report atomically (indented JSON and a newline) and returns its
// sha256: what the attestation's report.json subject binds.
func WriteTask(path string, rep *Task) (string, error) {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	if err := fileio.WriteAtomic(path, 0o644, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return "", fmt.Errorf("write report: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
