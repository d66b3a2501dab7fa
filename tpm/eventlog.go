package tpm

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/sealrun/sealrun/internal/fileio"
)

// Reasons a run's quote is refused beside those of its parts.
const (
	ReasonEventLog = "event-log" // the event log does not replay to the quoted PCR, or is of another boot
	ReasonSealrund = "sealrund"  // the sealrund measured is not the build the attestation records
)

// EventSealrund is the type of the event sealrund logs when it measures its own binary at start.
const EventSealrund = "sealrund"

// Event is one measurement sealrund made into a PCR: its event log has a JSON line each, and what
// is extended is the SHA-256 of that line's bytes (PCR := SHA-256(PCR || SHA-256(line))), as the
// kernel's IMA extends a template's hash: every member of the event is measured, none can be
// edited after. SHA256 is what was measured: for a sealrund event, the SHA-256 of sealrund's
// binary, which the run's build record names too.
type Event struct {
	PCR    int    `json:"pcr"`
	SHA256 string `json:"sha256"`
	Type   string `json:"type"`
	// ResetCount is the TPM's count of resets (boots) when the event was measured: a quote
	// carries it too, so a log of another boot is told apart.
	ResetCount uint32    `json:"reset_count"`
	Version    string    `json:"version,omitempty"`
	Commit     string    `json:"commit,omitempty"`
	Time       time.Time `json:"time"`
}

// Event log bounds: a line, and the events of one boot.
const (
	maxEventLine = 4 << 10
	MaxEvents    = 4096
)

// ReadEventLog reads an event log (missing: none yet), strictly: every line an Event with no
// unknown member, within the bounds. It returns the lines, as they were measured.
func ReadEventLog(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, maxEventLine), maxEventLine)
	var out []string
	for n := 1; sc.Scan(); n++ {
		if _, err := ParseEvent(sc.Text()); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		if len(out) == MaxEvents {
			return nil, fmt.Errorf("%s: more than %d events", path, MaxEvents)
		}
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v (a line is at most %d bytes)", path, err, maxEventLine)
	}
	return out, nil
}

// ParseEvent reads one event line strictly: an Event, no unknown member, nothing after it, its
// SHA256 a digest.
func ParseEvent(line string) (*Event, error) {
	if len(line) > maxEventLine {
		return nil, fmt.Errorf("an event of %d bytes; at most %d", len(line), maxEventLine)
	}
	var e Event
	if err := decodeStrict([]byte(line), &e); err != nil {
		return nil, fmt.Errorf("not an event: %v", err)
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%q is not a SHA-256 digest", e.SHA256)
	}
	// What a reader's verdict prints of it: printable text, never a terminal's control codes.
	for _, f := range []struct{ name, v string }{{"type", e.Type}, {"version", e.Version}, {"commit", e.Commit}} {
		if len(f.v) > 200 || strings.IndexFunc(f.v, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			return nil, fmt.Errorf("its %s %q is not printable ASCII of at most 200 bytes", f.name, f.v)
		}
	}
	return &e, nil
}

// eventLine is the line an event is logged and measured as.
func eventLine(e Event) (string, error) {
	b, err := json.Marshal(e)
	return string(b), err
}

// Replay is the value the event lines of pcr give it from its value at a TPM reset (zero; PCRs
// 17 to 22, the dynamic root's, are all ones until it runs): each line's SHA-256 extended.
func Replay(lines []string, pcr int) ([]byte, error) {
	v := resetValue(pcr)
	for i, l := range lines {
		e, err := ParseEvent(l)
		if err != nil {
			return nil, fmt.Errorf("event %d: %v", i+1, err)
		}
		if e.PCR != pcr {
			continue
		}
		d := sha256.Sum256([]byte(l))
		h := sha256.New()
		h.Write(v)
		h.Write(d[:])
		v = h.Sum(v[:0])
	}
	return v, nil
}

// Clock is the TPM's count of resets (boots) and restarts, as TPM2_ReadClock and quotes give it.
func (k *Keys) Clock() (resets, restarts uint32, err error) {
	r, err := tpm2.ReadClock{}.Execute(k.t)
	if err != nil {
		return 0, 0, fmt.Errorf("TPM2_ReadClock: %w", err)
	}
	return r.CurrentTime.ClockInfo.ResetCount, r.CurrentTime.ClockInfo.RestartCount, nil
}

// PCRValue reads one PCR's SHA-256 bank.
func (k *Keys) PCRValue(pcr int) ([]byte, error) {
	sel, err := selection([]int{pcr})
	if err != nil {
		return nil, err
	}
	v, err := tpm2.PCRRead{PCRSelectionIn: sel}.Execute(k.t)
	if err != nil {
		return nil, fmt.Errorf("TPM2_PCR_Read %d: %w", pcr, err)
	}
	if len(v.PCRValues.Digests) != 1 {
		return nil, fmt.Errorf("TPM2_PCR_Read %d gave no SHA-256 value (is the bank allocated?)", pcr)
	}
	return v.PCRValues.Digests[0].Buffer, nil
}

// Measure measures e into e.PCR and logs it in the event log at path, which holds every
// extension of that PCR since the TPM's last reset: events of an earlier boot are dropped, and a
// PCR whose value the log of this boot does not give is refused, since a quote of it could not
// be read. The event is logged (fsynced) before it is extended; an event logged and never
// extended (a crash in between) is dropped at the next start. It returns the log of this boot,
// e last.
func (k *Keys) Measure(path string, e Event) ([]string, error) {
	resets, _, err := k.Clock()
	if err != nil {
		return nil, err
	}
	e.ResetCount = resets
	line, err := eventLine(e)
	if err != nil {
		return nil, err
	}
	if _, err := ParseEvent(line); err != nil {
		return nil, fmt.Errorf("the measurement: %v", err)
	}
	all, err := ReadEventLog(path)
	if err != nil {
		return nil, fmt.Errorf("the event log: %w (it is sealrund's own; remove it only after a reboot)", err)
	}
	var boot []string
	for _, old := range all {
		if ev, _ := ParseEvent(old); ev.ResetCount == resets {
			boot = append(boot, old)
		}
	}
	cur, err := k.PCRValue(e.PCR)
	if err != nil {
		return nil, err
	}
	want, _ := Replay(boot, e.PCR)
	if !bytes.Equal(want, cur) {
		short, _ := Replay(boot[:max(len(boot)-1, 0)], e.PCR)
		if len(boot) == 0 || !bytes.Equal(short, cur) {
			return nil, fmt.Errorf("PCR %d is %x, but the event log %s gives %x for this boot (TPM reset %d): something other than sealrund extended PCR %d, or the log was lost or edited. A quote of it could not be read: give [tpm] sealrund_pcr a PCR nothing else uses, or reboot", e.PCR, cur, path, want, resets, e.PCR)
		}
		boot = boot[:len(boot)-1] // logged, never extended
	}
	if len(boot) >= MaxEvents {
		return nil, fmt.Errorf("the event log %s has %d events this boot, the most a reader takes; reboot", path, len(boot))
	}
	appendOnly := slices.Equal(all, boot)
	boot = append(boot, line)
	if err := writeEvents(path, boot, appendOnly); err != nil {
		return nil, fmt.Errorf("log the measurement in %s: %w", path, err)
	}
	d := sha256.Sum256([]byte(line))
	if err := k.Extend(e.PCR, d[:]); err != nil {
		return nil, err
	}
	return boot, nil
}

// writeEvents appends the last of lines (fsynced) where the log holds the others, and otherwise
// writes the log anew, atomically.
func writeEvents(path string, lines []string, appendLast bool) error {
	if appendLast {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteString(lines[len(lines)-1] + "\n"); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return fileio.WriteAtomic(path, 0o644, func(w io.Writer) error {
		for _, l := range lines {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunQuoteFormat is the version of a RunQuote's JSON.
const RunQuoteFormat = "sealrun-tpm-quote/v1"

// MaxRunQuoteBytes bounds a run's quote file.
const MaxRunQuoteBytes = 4 << 20

// RunQuote is what a run carries beside its attestation (result.tpm.json): the TPM's quote,
// whose qualifying data is the SHA-256 of the attestation's payload (the statement), and
// sealrund's event log of that boot up to the quote, each event the line that was measured.
type RunQuote struct {
	Format string   `json:"format"`
	Quote  Quote    `json:"quote"`
	Events []string `json:"events"`
	// BootLog is the boot's TCG event log as the kernel gave it when sealrund started
	// (binary_bios_measurements), where it has one: it explains the other PCRs quoted.
	BootLog []byte `json:"boot_log,omitempty"`
}

// Bound is what a run's statement says of its quote (its predicate's tpm member): the
// attestation key's SHA-256 (of its PKIX DER, hex), the PCRs quoted and where sealrund measured
// itself.
type Bound struct {
	AttestationKey string
	PCRs           []int
	SealrundPCR    int
	// SealrundSHA256 is the SHA-256 of sealrund the statement's build record names.
	SealrundSHA256 string
}

// RunQuoted is what a run's quote that verified shows.
type RunQuoted struct {
	ResetCount   uint32 `json:"reset_count"`
	RestartCount uint32 `json:"restart_count"`
	PCRs         []PCR  `json:"pcrs"`
	// Starts is every sealrund measured in that boot up to the quote, the one that made the run
	// last.
	Starts []Event `json:"sealrund_starts"`
	// BootEvents counts the boot event log's events by PCR, where the quote carries one: the
	// other PCRs quoted are what those events give.
	BootEvents map[int]int `json:"boot_events,omitempty"`
}

// AttestationKeyID is the SHA-256 (hex) of a public key's PKIX DER: how a statement names the
// attestation key its quote is by.
func AttestationKeyID(ak *ecdsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(ak)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(der)
	return hex.EncodeToString(s[:]), nil
}

// VerifyRunQuote checks a run's quote: made by the attestation key ak (which the statement
// names), over the statement whose payload is given, of the PCRs the statement names; the event
// log of the boot the quote was taken in, replayed, gives the sealrund PCR's quoted value; and
// the sealrund measured last (the one running when the quote was taken) is the build the
// statement records.
func VerifyRunQuote(rq *RunQuote, ak *ecdsa.PublicKey, payload []byte, b Bound) (*RunQuoted, error) {
	if rq.Format != RunQuoteFormat {
		return nil, failf(ReasonForm, "format %q; expected %s", rq.Format, RunQuoteFormat)
	}
	if id, err := AttestationKeyID(ak); err != nil || id != b.AttestationKey {
		return nil, failf(ReasonKey, "the statement names attestation key %s, not the enrollment's (%s)", b.AttestationKey, id)
	}
	nonce := sha256.Sum256(payload)
	a, err := verifyQuote(&rq.Quote, ak, nonce[:])
	if err != nil {
		return nil, err
	}
	if got := pcrIndexes(rq.Quote.PCRs); !slices.Equal(got, sorted(b.PCRs)) {
		return nil, failf(ReasonPCR, "the quote covers PCRs %v; the statement names %v", got, b.PCRs)
	}
	out := &RunQuoted{ResetCount: a.ClockInfo.ResetCount, RestartCount: a.ClockInfo.RestartCount, PCRs: rq.Quote.PCRs}
	if len(rq.Events) > MaxEvents {
		return nil, failf(ReasonEventLog, "%d events; a boot's log holds at most %d", len(rq.Events), MaxEvents)
	}
	var starts []Event
	for i, l := range rq.Events {
		e, err := ParseEvent(l)
		if err != nil {
			return nil, failf(ReasonEventLog, "event %d: %v", i+1, err)
		}
		starts = append(starts, *e)
		if e.ResetCount != out.ResetCount {
			return nil, failf(ReasonEventLog, "event %d was measured in the TPM's boot %d; the quote is of boot %d: a log of another boot", i+1, e.ResetCount, out.ResetCount)
		}
		if e.PCR != b.SealrundPCR {
			return nil, failf(ReasonEventLog, "event %d is of PCR %d; sealrund's log is of PCR %d", i+1, e.PCR, b.SealrundPCR)
		}
		if e.Type != EventSealrund {
			return nil, failf(ReasonEventLog, "event %d is of type %q; sealrund's log has %q events only", i+1, e.Type, EventSealrund)
		}
	}
	v, err := Replay(rq.Events, b.SealrundPCR)
	if err != nil {
		return nil, failf(ReasonEventLog, "%v", err)
	}
	var quoted string
	for _, p := range rq.Quote.PCRs {
		if p.Index == b.SealrundPCR {
			quoted = p.SHA256
		}
	}
	switch {
	case quoted == "":
		return nil, failf(ReasonPCR, "the quote leaves out PCR %d, where sealrund measured itself", b.SealrundPCR)
	case quoted != hex.EncodeToString(v):
		return nil, failf(ReasonEventLog, "the event log (%d events) replays PCR %d to %x; the TPM quoted %s: an event was edited, left out or added, or something else extended it", len(rq.Events), b.SealrundPCR, v, quoted)
	case len(rq.Events) == 0:
		return nil, failf(ReasonSealrund, "no sealrund was measured in the boot the quote is of")
	}
	if err := checkBoot(rq, b, out); err != nil {
		return nil, err
	}
	last := starts[len(starts)-1]
	if last.SHA256 != b.SealrundSHA256 {
		return nil, failf(ReasonSealrund, "the sealrund measured last before the quote has SHA-256 %s (version %s); the attestation's build record names %s: the run was not made by the sealrund the host measured", last.SHA256, last.Version, b.SealrundSHA256)
	}
	out.Starts = starts
	return out, nil
}

// ReadRunQuote reads a run's quote file strictly (bounded, no unknown member, nothing after).
func ReadRunQuote(path string) (*RunQuote, error) {
	b, err := fileio.ReadLimited(path, "a run's TPM quote", MaxRunQuoteBytes)
	if err != nil {
		return nil, err
	}
	return ParseRunQuote(path, b)
}

// ParseRunQuote reads a run's quote file's bytes strictly; path names it in errors.
func ParseRunQuote(path string, b []byte) (*RunQuote, error) {
	if len(b) > MaxRunQuoteBytes {
		return nil, fmt.Errorf("%s: %d bytes; a run's TPM quote is at most %d", path, len(b), MaxRunQuoteBytes)
	}
	var rq RunQuote
	if err := decodeStrict(b, &rq); err != nil {
		return nil, fmt.Errorf("%s: not a run's TPM quote: %v", path, err)
	}
	return &rq, nil
}

// checkBoot holds the quoted PCRs other than sealrund's to the boot's event log, where the quote
// carries one: each must be what its events give.
func checkBoot(rq *RunQuote, b Bound, out *RunQuoted) error {
	if rq.BootLog == nil {
		return nil
	}
	events, err := ParseBootLog(rq.BootLog)
	if err != nil {
		return failf(ReasonEventLog, "the boot's event log: %v", err)
	}
	out.BootEvents = map[int]int{}
	for _, e := range events {
		if e.Type != evNoAction {
			out.BootEvents[e.PCR]++
		}
	}
	quoted := map[int][]byte{}
	for _, p := range rq.Quote.PCRs {
		quoted[p.Index], _ = hex.DecodeString(p.SHA256) // VerifyQuote checked them
	}
	if err := CheckBootPCRs(events, quoted, b.SealrundPCR); err != nil {
		return failf(ReasonEventLog, "as quoted, %v: the log is not this boot's, or was edited", err)
	}
	return nil
}
