package tpm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// The boot's event log: what the firmware and the boot loader measured into PCRs before the
// kernel ran, as the TCG PC Client Platform Firmware Profile lays it out (the kernel gives it as
// /sys/kernel/security/tpmN/binary_bios_measurements). Only the crypto-agile form is read (a
// first event "Spec ID Event03", then TCG_PCR_EVENT2 records, little-endian): a SHA-1-only log
// (the TPM 1.2 form) has no SHA-256 digests to replay.

// MaxBootLogBytes bounds a boot event log (real ones are tens of kilobytes).
const MaxBootLogBytes = 1 << 20

const (
	evNoAction     = 0x00000003
	algSHA1        = 0x0004
	algSHA256      = 0x000b
	specIDEvent    = "Spec ID Event03\x00"
	startupLocSign = "StartupLocality\x00"
)

// BootEvent is one measurement of the boot's event log: its PCR, its type and the SHA-256
// digest extended (none for an EV_NO_ACTION event, which is logged, not extended).
type BootEvent struct {
	PCR    int    `json:"pcr"`
	Type   uint32 `json:"type"`
	SHA256 []byte `json:"sha256,omitempty"`
	Data   []byte `json:"-"`
}

// ParseBootLog reads a crypto-agile TCG event log.
func ParseBootLog(b []byte) ([]BootEvent, error) {
	if len(b) > MaxBootLogBytes {
		return nil, fmt.Errorf("a boot event log of %d bytes; at most %d", len(b), MaxBootLogBytes)
	}
	r := &logReader{b: b}
	// The first event, in the SHA-1 form: its data says which digests every later event has.
	pcr, typ := r.u32(), r.u32()
	r.skip(20)
	data := r.bytes(int(r.u32()))
	if r.err != nil {
		return nil, fmt.Errorf("the first event: %w", r.err)
	}
	if pcr != 0 || typ != evNoAction || !bytes.HasPrefix(data, []byte(specIDEvent)) {
		return nil, errors.New("not a crypto-agile event log (no Spec ID Event03 first): a SHA-1-only log, with no SHA-256 to replay")
	}
	sizes, err := specAlgorithms(data)
	if err != nil {
		return nil, err
	}
	if _, ok := sizes[algSHA256]; !ok {
		return nil, errors.New("the log has no SHA-256 digests (its Spec ID event names no SHA-256 bank)")
	}
	var out []BootEvent
	for n := 2; r.more(); n++ {
		if len(out) >= 1<<16 {
			return nil, errors.New("more than 65,536 events")
		}
		e := BootEvent{PCR: int(r.u32()), Type: r.u32()}
		count := r.u32()
		if r.err == nil && count > uint32(len(sizes)) {
			return nil, fmt.Errorf("event %d: %d digests; the log's Spec ID event names %d banks", n, count, len(sizes))
		}
		for range count {
			alg := r.u16()
			size, ok := sizes[alg]
			if r.err == nil && !ok {
				return nil, fmt.Errorf("event %d: a digest of algorithm %#04x, which the Spec ID event does not name", n, alg)
			}
			d := r.bytes(size)
			if alg == algSHA256 {
				e.SHA256 = d
			}
		}
		e.Data = r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("event %d: %w", n, r.err)
		}
		if e.PCR < 0 || e.PCR >= MaxPCRs {
			return nil, fmt.Errorf("event %d: PCR %d", n, e.PCR)
		}
		if e.SHA256 == nil && e.Type != evNoAction {
			return nil, fmt.Errorf("event %d (type %#x, PCR %d) has no SHA-256 digest", n, e.Type, e.PCR)
		}
		out = append(out, e)
	}
	return out, nil
}

// specAlgorithms reads a Spec ID event's digest sizes by algorithm.
func specAlgorithms(data []byte) (map[uint16]int, error) {
	r := &logReader{b: data}
	r.skip(len(specIDEvent) + 4 + 4) // signature, platformClass, version and errata, uintnSize
	n := r.u32()
	if r.err == nil && (n == 0 || n > 16) {
		return nil, fmt.Errorf("the Spec ID event names %d algorithms", n)
	}
	out := map[uint16]int{}
	for range n {
		alg, size := r.u16(), r.u16()
		if size == 0 || size > 64 {
			return nil, fmt.Errorf("the Spec ID event gives algorithm %#04x %d-byte digests", alg, size)
		}
		out[alg] = int(size)
	}
	if r.err != nil {
		return nil, fmt.Errorf("the Spec ID event: %w", r.err)
	}
	if s, ok := out[algSHA256]; ok && s != sha256.Size {
		return nil, fmt.Errorf("the Spec ID event gives SHA-256 %d-byte digests", s)
	}
	return out, nil
}

// resetValue is a PCR's SHA-256 value at a TPM reset: zero, but all ones for PCRs 17 to 22 (the
// dynamic root's, until it runs).
func resetValue(pcr int) []byte {
	v := make([]byte, sha256.Size)
	if pcr >= 17 && pcr <= 22 {
		for i := range v {
			v[i] = 0xff
		}
	}
	return v
}

// ReplayBoot is the SHA-256 value each PCR has after the boot's events, from its value at a TPM
// reset (for PCR 0, the locality a StartupLocality event names).
func ReplayBoot(events []BootEvent) [MaxPCRs][]byte {
	var out [MaxPCRs][]byte
	for p := range out {
		out[p] = resetValue(p)
	}
	for _, e := range events {
		if e.Type == evNoAction {
			if e.PCR == 0 && len(e.Data) == len(startupLocSign)+1 && bytes.HasPrefix(e.Data, []byte(startupLocSign)) {
				out[0][sha256.Size-1] = e.Data[len(startupLocSign)]
			}
			continue
		}
		h := sha256.New()
		h.Write(out[e.PCR])
		h.Write(e.SHA256)
		out[e.PCR] = h.Sum(nil)
	}
	return out
}

// CheckBootPCRs holds PCR values (by index) to what the boot's events give them: the first that
// differs is an error naming it, both values and its events. skip is a PCR that is not the
// boot's (sealrund's own), which the boot must not have extended.
func CheckBootPCRs(events []BootEvent, values map[int][]byte, skip int) error {
	counts := map[int]int{}
	for _, e := range events {
		if e.Type != evNoAction {
			counts[e.PCR]++
		}
	}
	if counts[skip] > 0 {
		return fmt.Errorf("the boot's event log extends PCR %d, where sealrund measures itself", skip)
	}
	replayed := ReplayBoot(events)
	for _, p := range sorted(mapKeys(values)) {
		if p != skip && !bytes.Equal(values[p], replayed[p]) {
			return fmt.Errorf("PCR %d is %x, but the boot's event log (%d events of it) gives %x", p, values[p], counts[p], replayed[p])
		}
	}
	return nil
}

func mapKeys(m map[int][]byte) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// logReader reads little-endian fields, remembering the first overrun.
type logReader struct {
	b   []byte
	off int
	err error
}

func (r *logReader) more() bool { return r.err == nil && r.off < len(r.b) }

func (r *logReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = fmt.Errorf("%d bytes at offset %d run past the log's end (%d bytes)", n, r.off, len(r.b))
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *logReader) skip(n int) { r.bytes(n) }

func (r *logReader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (r *logReader) u16() uint16 {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}
