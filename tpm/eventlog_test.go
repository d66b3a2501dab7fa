package tpm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sealrundEvent(binary string) Event {
	s := sha256.Sum256([]byte(binary))
	return Event{PCR: 23, SHA256: hex.EncodeToString(s[:]), Type: EventSealrund, Version: "v1", Commit: "abc", Time: time.Unix(1, 0).UTC()}
}

// sealrund measures itself into PCR 23 at each start and logs it; the log replays to the PCR.
// An event logged and never extended (a crash between the two) is dropped at the next start,
// and so is an earlier boot's; a PCR something else extended is refused, naming it.
func TestMeasure(t *testing.T) {
	k, _ := open(t)
	log := filepath.Join(t.TempDir(), "tpm-events.jsonl")
	if lines, err := k.Measure(log, sealrundEvent("sealrund 1")); err != nil || len(lines) != 1 {
		t.Fatalf("first start: %v %v", lines, err)
	}
	if lines, err := k.Measure(log, sealrundEvent("sealrund 2")); err != nil || len(lines) != 2 {
		t.Fatalf("second start: %v %v", lines, err)
	}
	check := func(what string, want int) {
		t.Helper()
		got, err := ReadEventLog(log)
		if err != nil || len(got) != want {
			t.Fatalf("%s: log %v %v; want %d events", what, got, err, want)
		}
		v, _ := Replay(got, 23)
		cur, _ := k.PCRValue(23)
		if hex.EncodeToString(v) != hex.EncodeToString(cur) {
			t.Fatalf("%s: the log replays to %x; PCR 23 is %x", what, v, cur)
		}
	}
	check("two starts", 2)

	// A crash after the log was written, before the extend.
	resets, _, _ := k.Clock()
	e := sealrundEvent("crashed")
	e.ResetCount = resets
	l, _ := eventLine(e)
	f, _ := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(l + "\n")
	f.Close()
	if _, err := k.Measure(log, sealrundEvent("sealrund 3")); err != nil {
		t.Fatalf("after a crash between log and extend: %v", err)
	}
	check("the unextended event dropped", 3)

	// An earlier boot's events are dropped.
	e.ResetCount = resets + 100
	old, _ := eventLine(e)
	b, _ := os.ReadFile(log)
	os.WriteFile(log, append([]byte(old+"\n"), b...), 0o644)
	if _, err := k.Measure(log, sealrundEvent("sealrund 4")); err != nil {
		t.Fatalf("with an earlier boot's event: %v", err)
	}
	check("the earlier boot dropped", 4)

	// Something else extends PCR 23: sealrund refuses to start on it.
	other := sha256.Sum256([]byte("not sealrund"))
	k.Extend(23, other[:])
	if _, err := k.Measure(log, sealrundEvent("sealrund 5")); err == nil || !strings.Contains(err.Error(), "something other than sealrund extended PCR 23") {
		t.Errorf("a PCR extended by another: %v", err)
	}
	// Hostile logs: junk, an unknown member, an oversized line.
	for name, text := range map[string]string{"junk": "not json\n", "unknown member": `{"pcr":23,"sha256":"` + strings.Repeat("0", 64) + `","type":"sealrund","reset_count":1,"time":"2026-01-01T00:00:00Z","extra":1}` + "\n",
		"oversized": strings.Repeat("x", 5000) + "\n", "a terminal's escape": `{"pcr":23,"sha256":"` + strings.Repeat("0", 64) + `","type":"sealrund","version":"\u001b[2J","reset_count":1,"time":"2026-01-01T00:00:00Z"}` + "\n", "bad digest": `{"pcr":23,"sha256":"zz","type":"sealrund","reset_count":1,"time":"2026-01-01T00:00:00Z"}` + "\n"} {
		p := filepath.Join(t.TempDir(), "log")
		os.WriteFile(p, []byte(text), 0o644)
		if _, err := ReadEventLog(p); err == nil {
			t.Errorf("%s: read", name)
		}
	}
}

// A run's quote verifies against its statement, its attestation key and the build it records;
// each forgery is refused with its reason.
func TestVerifyRunQuote(t *testing.T) {
	k, _ := open(t)
	log := filepath.Join(t.TempDir(), "tpm-events.jsonl")
	k.Measure(log, sealrundEvent("old sealrund"))
	lines, err := k.Measure(log, sealrundEvent("sealrund"))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"a statement":1}`)
	nonce := sha256.Sum256(payload)
	q, err := k.Quote(nonce[:], []int{0, 23})
	if err != nil {
		t.Fatal(err)
	}
	rq := &RunQuote{Format: RunQuoteFormat, Quote: *q, Events: lines}
	akID, _ := AttestationKeyID(k.AttestationKey())
	bound := Bound{AttestationKey: akID, PCRs: []int{0, 23}, SealrundPCR: 23, SealrundSHA256: sealrundEvent("sealrund").SHA256}
	got, err := VerifyRunQuote(rq, k.AttestationKey(), payload, bound)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Starts) != 2 || got.Starts[1].SHA256 != bound.SealrundSHA256 {
		t.Errorf("starts %+v", got.Starts)
	}
	// Through its JSON, strictly read.
	p := filepath.Join(t.TempDir(), "result.tpm.json")
	b, _ := json.Marshal(rq)
	os.WriteFile(p, b, 0o644)
	if back, err := ReadRunQuote(p); err != nil {
		t.Fatal(err)
	} else if _, err := VerifyRunQuote(back, k.AttestationKey(), payload, bound); err != nil {
		t.Fatal(err)
	}

	edit := func(f func(*RunQuote, *Bound) []byte) (*RunQuote, Bound, []byte) {
		c := *rq
		c.Events = append([]string(nil), rq.Events...)
		c.Quote.PCRs = append([]PCR(nil), rq.Quote.PCRs...)
		bb := bound
		pl := f(&c, &bb)
		if pl == nil {
			pl = payload
		}
		return &c, bb, pl
	}
	other, _ := open(t)
	for _, c := range []struct {
		name, reason string
		f            func(*RunQuote, *Bound) []byte
	}{
		{"an event edited (its version)", ReasonEventLog, func(r *RunQuote, _ *Bound) []byte {
			r.Events[1] = strings.Replace(r.Events[1], `"version":"v1"`, `"version":"v2"`, 1)
			return nil
		}},
		{"an event left out", ReasonEventLog, func(r *RunQuote, _ *Bound) []byte { r.Events = r.Events[1:]; return nil }},
		{"an event added", ReasonEventLog, func(r *RunQuote, _ *Bound) []byte { r.Events = append(r.Events, r.Events[1]); return nil }},
		{"the log emptied", ReasonEventLog, func(r *RunQuote, _ *Bound) []byte { r.Events = nil; return nil }},
		{"a sealrund that is not the recorded build", ReasonSealrund, func(_ *RunQuote, b *Bound) []byte {
			b.SealrundSHA256 = sealrundEvent("old sealrund").SHA256
			return nil
		}},
		{"another statement (a replayed quote)", ReasonNonce, func(*RunQuote, *Bound) []byte { return []byte(`{"another":1}`) }},
		{"a PCR value changed", ReasonPCR, func(r *RunQuote, _ *Bound) []byte {
			r.Quote.PCRs[0].SHA256 = strings.Repeat("1", 64)
			return nil
		}},
		{"other PCRs than the statement names", ReasonPCR, func(_ *RunQuote, b *Bound) []byte { b.PCRs = []int{23}; return nil }},
		{"another attestation key named", ReasonKey, func(_ *RunQuote, b *Bound) []byte { b.AttestationKey = strings.Repeat("a", 64); return nil }},
		{"another format", ReasonForm, func(r *RunQuote, _ *Bound) []byte { r.Format = "v0"; return nil }},
	} {
		r, b, pl := edit(c.f)
		if _, err := VerifyRunQuote(r, k.AttestationKey(), pl, b); err == nil || reason(t, err) != c.reason {
			t.Errorf("%s: %v; want reason %s", c.name, err, c.reason)
		}
	}
	// Another TPM's quote of the same statement: its key is not the one named, and with its own
	// key named, the signature is not the enrolled key's.
	oq, _ := other.Quote(nonce[:], []int{0, 23})
	if _, err := VerifyRunQuote(&RunQuote{Format: RunQuoteFormat, Quote: *oq, Events: lines}, k.AttestationKey(), payload, bound); err == nil || reason(t, err) != ReasonSignature {
		t.Errorf("another TPM's quote: %v", err)
	}
	// A log of another boot (its reset count differs from the quote's).
	e, _ := ParseEvent(lines[1])
	e.ResetCount += 7
	l, _ := eventLine(*e)
	if _, err := VerifyRunQuote(&RunQuote{Format: RunQuoteFormat, Quote: *q, Events: []string{lines[0], l}}, k.AttestationKey(), payload, bound); err == nil || reason(t, err) != ReasonEventLog || !strings.Contains(err.Error(), "another boot") {
		t.Errorf("another boot's event: %v", err)
	}
}
