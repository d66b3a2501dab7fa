package witness

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// A client, as the limiter counts it: an IPv4 address, or an IPv6 /64 (the least a site is
// given: a client owns every address of its /64, so a /128 would be no limit at all). IPv4 in
// IPv6 (::ffff:a.b.c.d) is the IPv4 address.
type clientKey [16]byte

func keyOf(a netip.Addr) clientKey {
	a = a.Unmap()
	if a.Is4() {
		return netip.AddrFrom16(netip.AddrFrom4(a.As4()).As16()).As16()
	}
	p, _ := a.WithZone("").Prefix(64)
	return p.Addr().As16()
}

// String is the key as a refusal names it: the address, or the /64.
func (k clientKey) String() string {
	a := netip.AddrFrom16(k).Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a, 64).String()
}

// DefaultMaxClients is how many clients a witness's limiter keeps a budget for.
const DefaultMaxClients = 1 << 16

// limiter is a token bucket per key (a client, a log) with a bounded number of buckets: past
// max, the bucket of the key least recently seen is forgotten. Every step is O(1) under one
// lock; its memory is max buckets, however many keys come.
//
// A forgotten key that comes back starts with a full bucket: many more than max clients, each
// within its rate, are then limited only by their number. That errs toward letting requests in
// (each costs at most a signature check): it never refuses one client for others' traffic.
type limiter[K comparable] struct {
	mu      sync.Mutex
	rate    float64 // tokens a second
	burst   float64
	max     int
	index   map[K]int32
	slots   []slot[K]
	newest  int32 // the list of slots by last use, newest first; -1 when empty
	oldest  int32
	evicted uint64
}

type slot[K comparable] struct {
	key        K
	tokens     float64
	at         int64 // Unix nanoseconds
	prev, next int32 // toward newest, toward oldest; -1 at the ends
}

func newLimiter[K comparable](rate, burst float64, max int) *limiter[K] {
	if max < 1 {
		max = 1
	}
	return &limiter[K]{rate: rate, burst: burst, max: max, index: map[K]int32{}, newest: -1, oldest: -1}
}

// allow takes a token from key's bucket, if it has one.
func (l *limiter[K]) allow(key K, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, ok := l.index[key]
	switch {
	case ok:
		l.unlink(i)
	case len(l.slots) < l.max:
		i = int32(len(l.slots))
		l.slots = append(l.slots, slot[K]{})
	default: // full: the least recently seen key's slot is reused
		i = l.oldest
		l.unlink(i)
		delete(l.index, l.slots[i].key)
		l.evicted++
	}
	if !ok {
		l.slots[i] = slot[K]{key: key, tokens: l.burst, at: now.UnixNano()}
		l.index[key] = i
	}
	s := &l.slots[i]
	if d := now.UnixNano() - s.at; d > 0 {
		s.tokens = min(l.burst, s.tokens+float64(d)/1e9*l.rate)
		s.at = now.UnixNano()
	}
	l.pushNewest(i)
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

func (l *limiter[K]) unlink(i int32) {
	s := &l.slots[i]
	if s.prev >= 0 {
		l.slots[s.prev].next = s.next
	} else {
		l.newest = s.next
	}
	if s.next >= 0 {
		l.slots[s.next].prev = s.prev
	} else {
		l.oldest = s.prev
	}
	s.prev, s.next = -1, -1
}

func (l *limiter[K]) pushNewest(i int32) {
	s := &l.slots[i]
	s.prev, s.next = -1, l.newest
	if l.newest >= 0 {
		l.slots[l.newest].prev = i
	}
	l.newest = i
	if l.oldest < 0 {
		l.oldest = i
	}
}

// size is how many keys have a bucket.
func (l *limiter[K]) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.index)
}

// clientOf is the client a request counts against: the peer's address, or, when the peer is one
// of the trusted proxies, the address that proxy says it took the request from (X-Forwarded-For,
// read from the right: the nearest address no trusted proxy has, each proxy having appended the
// one it saw). A header from anyone else is ignored: any client can write one. fromProxy says the
// request carried the header from a peer not trusted (a proxy the operator did not name).
func clientOf(r *http.Request, trusted []netip.Prefix) (key clientKey, fromProxy bool, err error) {
	peer, err := peerAddr(r.RemoteAddr)
	if err != nil {
		return clientKey{}, false, err
	}
	xff := r.Header.Values("X-Forwarded-For")
	if !isTrusted(peer, trusted) {
		return keyOf(peer), len(xff) > 0, nil
	}
	if len(xff) == 0 {
		return keyOf(peer), false, nil
	}
	// The header's lines are one list; walk it from its end.
	hops := strings.Split(strings.Join(xff, ","), ",")
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, perr := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if perr != nil {
			// Not an address: written by whoever the last trusted hop took it from, which is
			// the client that hop saw. Count it as that hop.
			break
		}
		client = a
		if !isTrusted(a, trusted) {
			break
		}
	}
	return keyOf(client), false, nil
}

func peerAddr(remote string) (netip.Addr, error) {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr(), nil
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("the connection's address %q is not an IP address", remote)
	}
	return a, nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap().WithZone("")
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseProxies reads trusted proxies: addresses or CIDR prefixes (--trusted-proxy).
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		for f := range strings.SplitSeq(s, ",") {
			f = strings.TrimSpace(f)
			if p, err := netip.ParsePrefix(f); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(f)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("trusted proxy %q is not an IP address or prefix (like 127.0.0.1, ::1 or 10.0.0.0/8)", f)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out, nil
}

// refusals logs refusals at a bounded rate: a flood writes a few lines a second, each saying how
// many refusals went unlogged since the last.
type refusals struct {
	log     *slog.Logger
	limit   *limiter[struct{}]
	mu      sync.Mutex
	dropped uint64
}

func newRefusals(log *slog.Logger, perSecond float64) *refusals {
	return &refusals{log: log, limit: newLimiter[struct{}](perSecond, 2*perSecond, 1)}
}

func (r *refusals) note(now time.Time, msg string, args ...any) {
	if !r.limit.allow(struct{}{}, now) {
		r.mu.Lock()
		r.dropped++
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	n := r.dropped
	r.dropped = 0
	r.mu.Unlock()
	if n > 0 {
		args = append(args, "unlogged_before", n)
	}
	r.log.Info(msg, args...)
}
