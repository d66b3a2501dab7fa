package daemon

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// The metrics read an ended run's audit log through audit's records (written here by the
// writers' own types, through a real audit log) and its report.json through the grader's
// Report (written by report.WriteExam): calls by status, requests by class, grading time.
func TestMetricsReadTheAuditRecords(t *testing.T) {
	dir := t.TempDir()
	r, err := transcripttest.New(dir, time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Exchange("/v1/chat/completions", []byte(`{"model":"m"}`), []byte(`{}`), false, 200)
	r.Exchange("/v1/chat/completions", []byte(`{"model":"m"}`), []byte(`{}`), false, 529)
	r.Call([]string{"python3", "a.py"}, []byte("x\n"), 0)
	r.Call([]string{"python3", "b.py"}, []byte("y\n"), 2)
	r.Record(audit.KindSubmit, audit.Submit{Candidate: "sha256:" + "ab", Time: r.Now})
	if _, err := report.WriteExam(filepath.Join(dir, "report.json"), &report.Exam{Timings: report.Timings{AnswersMS: 1500, BitsMS: 500}}); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(&Daemon{runs: map[string]*api.Record{}})
	m.observeRun(dir, api.StateGraded)
	value := func(c prometheus.Metric) float64 {
		var d dto.Metric
		if err := c.Write(&d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			return d.Counter.GetValue()
		case d.Histogram != nil:
			return d.Histogram.GetSampleSum()
		}
		return -1
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"calls exited", value(m.calls.WithLabelValues(audit.CallExited)), 2},
		{"call seconds", value(m.callSeconds), 6},
		{"2xx requests", value(m.gatewayRequests.WithLabelValues("2xx")), 1},
		{"5xx requests", value(m.gatewayRequests.WithLabelValues("5xx")), 1},
		{"grading seconds", value(m.gradingSeconds), 2},
		{"runs graded", value(m.runsEnded.WithLabelValues(api.StateGraded)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v; want %v", c.name, c.got, c.want)
		}
	}
}
