package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/report"
)

// metrics are sealrund's Prometheus metrics, served only on the opt-in loopback listener.
type metrics struct {
	reg             *prometheus.Registry
	calls           *prometheus.CounterVec
	callSeconds     prometheus.Histogram
	gatewayRequests *prometheus.CounterVec
	gatewayRetries  prometheus.Counter
	gradingSeconds  prometheus.Histogram
	runsEnded       *prometheus.CounterVec
}

func newMetrics(d *Daemon) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sealrun_calls_total", Help: "Compute calls of ended runs, by how they ended."}, []string{"status"})
	m.callSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sealrun_call_seconds", Help: "Wall time of compute calls.", Buckets: prometheus.ExponentialBuckets(0.1, 4, 9)})
	m.gatewayRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sealrun_gateway_requests_total", Help: "Model requests through the gateway, by HTTP status class."}, []string{"class"})
	m.gatewayRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "sealrun_gateway_retries_total", Help: "Provider tries after the first."})
	m.gradingSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sealrun_grading_seconds", Help: "Hidden-exam grading time (both phases).", Buckets: prometheus.ExponentialBuckets(1, 3, 8)})
	m.runsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sealrun_runs_ended_total", Help: "Runs that ended, by state."}, []string{"state"})
	byState := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sealrun_runs_active", Help: "Runs queued, preparing, running or grading."}, func() float64 {
		n := 0
		for _, r := range d.Runs() {
			if !r.Final() {
				n++
			}
		}
		return float64(n)
	})
	broken := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sealrun_daemon_broken", Help: "1 when the daemon could not write its journal or ledger and takes no new runs (the log says why)."}, func() float64 {
		if d.Broken() != nil {
			return 1
		}
		return 0
	})
	ledgerSize := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sealrun_ledger_entries", Help: "Entries in the host's run ledger."}, func() float64 {
		if d.ledger == nil {
			return 0
		}
		return float64(d.ledger.Size())
	})
	states := prometheus.NewDesc("sealrun_runs", "Runs known to the daemon, by state.", []string{"state"}, nil)
	m.reg.MustRegister(m.calls, m.callSeconds, m.gatewayRequests, m.gatewayRetries, m.gradingSeconds, m.runsEnded, byState, broken, ledgerSize,
		collectorFunc{desc: states, collect: func(ch chan<- prometheus.Metric) {
			count := map[string]int{}
			for _, s := range []string{api.StateQueued, api.StatePreparing, api.StateRunning, api.StateGrading, api.StateGraded, api.StateFailed, api.StateInvalid} {
				count[s] = 0
			}
			for _, r := range d.Runs() {
				count[r.State]++
			}
			for s, n := range count {
				ch <- prometheus.MustNewConstMetric(states, prometheus.GaugeValue, float64(n), s)
			}
		}})
	return m
}

type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// observeRun adds an ended run's calls, requests and grading to the counters, from its audit
// log and report.
func (m *metrics) observeRun(dir, state string) {
	m.runsEnded.WithLabelValues(state).Inc()
	f, err := os.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		_, rec, err := audit.ParseRecord(sc.Bytes())
		if err != nil {
			continue
		}
		switch e := rec.(type) {
		case *audit.Call:
			m.calls.WithLabelValues(e.Status).Inc()
			m.callSeconds.Observe(e.End.Sub(e.Start).Seconds())
		case *audit.Gateway:
			m.gatewayRequests.WithLabelValues(string(rune('0'+e.Status/100)) + "xx").Inc()
			if len(e.Tries) > 1 {
				m.gatewayRetries.Add(float64(len(e.Tries) - 1))
			}
		}
	}
	var rep report.Exam // a task's report.json (report.Task) has no timings: nothing observed
	if b, err := os.ReadFile(filepath.Join(dir, "report.json")); err == nil && json.Unmarshal(b, &rep) == nil && rep.Timings.AnswersMS > 0 {
		m.gradingSeconds.Observe(float64(rep.Timings.AnswersMS+rep.Timings.BitsMS) / 1000)
	}
}

// serveMetrics serves /metrics on addr (loopback) until ctx ends.
func (m *metrics) serve(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
