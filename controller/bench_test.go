package controller

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/controller/scriptedmodel"
)

// BenchmarkGatewayAddedLatency: the same small chat completion straight to the fake provider and
// through the gateway (pinning, headers, audit entry with fsync), alternating; p50 of each and
// the difference.
func BenchmarkGatewayAddedLatency(b *testing.B) {
	x := newGW(b, KindOpenAI, "openai/gpt-x@high", 3)
	body := `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`
	call := func(url string) time.Duration {
		t0 := time.Now()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0)
	}
	var direct, via []time.Duration
	for i := 0; i < b.N; i++ {
		direct = append(direct, call(x.prov.URL+"/v1/chat/completions"))
		via = append(via, call(x.srv.URL+"/v1/chat/completions"))
	}
	p50 := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	d, v := p50(direct), p50(via)
	b.ReportMetric(float64(d.Microseconds())/1000, "direct-ms")
	b.ReportMetric(float64(v.Microseconds())/1000, "gateway-ms")
	b.ReportMetric(float64((v-d).Microseconds())/1000, "added-ms")
}

// BenchmarkGatewayStreaming: a 64 MiB server-sent event stream through the gateway.
func BenchmarkGatewayStreaming(b *testing.B) {
	x := newGW(b, KindOpenAI, "openai/gpt-x", 3, WithSizeLimits(8<<20, 1<<30))
	chunk := `{"choices":[{"delta":{"content":"` + strings.Repeat("x", 8000) + `"}}]}`
	events := make([]string, 8192) // about 64 MiB
	for i := range events {
		events[i] = chunk
	}
	var rates []float64
	for i := 0; i < b.N; i++ {
		x.prov.Queue(scriptedmodel.Response{Events: events})
		t0 := time.Now()
		resp, err := http.Post(x.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		rates = append(rates, float64(n)/(1<<20)/time.Since(t0).Seconds())
	}
	sort.Float64s(rates)
	b.ReportMetric(rates[len(rates)/2], "MiB/s")
}
