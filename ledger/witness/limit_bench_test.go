package witness

import (
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// The limiter at a million client addresses (a million IPv6 /64s, 1,000 new ones a millisecond):
// its memory after them, and the cost of a request, against what the limiter before it kept
// for them (a map from the address's text to a bucket, swept only of idle buckets, which a
// million fresh clients never are: a million buckets, and every request past 10,000 of them
// scanned the whole map under the lock).
func BenchmarkLimiterMillionClients(b *testing.B) {
	const n = 1_000_000
	keys := make([]clientKey, n)
	texts := make([]string, n)
	for i := range keys {
		var a [16]byte
		a[0], a[1], a[4], a[5], a[6], a[7] = 0x20, 0x01, byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		keys[i] = keyOf(netip.AddrFrom16(a))
		texts[i] = netip.AddrFrom16(a).String()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var ours, before float64
	var perReq time.Duration
	for b.Loop() {
		base := heap()
		l := newLimiter[clientKey](20, 40, DefaultMaxClients)
		now := time.Unix(1_000_000, 0)
		t0 := time.Now()
		for i, k := range keys {
			l.allow(k, now.Add(time.Duration(i)*time.Microsecond))
		}
		perReq = time.Since(t0) / n
		ours = float64(heap()-base) / (1 << 20)
		runtime.KeepAlive(l)

		base = heap()
		type bucket struct {
			tokens float64
			at     time.Time
		}
		old := make(map[string]*bucket)
		for i, s := range texts {
			old[s] = &bucket{tokens: 40, at: now.Add(time.Duration(i) * time.Microsecond)}
		}
		before = float64(heap()-base) / (1 << 20)
		runtime.KeepAlive(old)
	}
	b.ReportMetric(ours, "MiB")
	b.ReportMetric(before, "before-MiB")
	b.ReportMetric(float64(perReq.Nanoseconds()), "ns/request")
}
