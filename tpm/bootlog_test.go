package tpm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// Real machines' boot event logs (the ones go-attestation keeps as test data: GCE shielded VMs,
// laptops; from the Go module proxy), replayed by ParseBootLog and ReplayBoot, give every
// SHA-256 PCR value tpm2-tools' tpm2_eventlog (nobody here wrote either) computes of them; the
// SHA-1-only and broken ones are refused with their reason.
func TestBootLogAgainstTPM2Eventlog(t *testing.T) {
	eventlog := testenv.RequireTool(t, "tpm2_eventlog", "tpm2-tools")
	dir := filepath.Join(testenv.GoModuleDir(t, "github.com/google/go-attestation", "v0.6.4"), "attest", "testdata")
	logs, _ := filepath.Glob(filepath.Join(dir, "*_eventlog"))
	if len(logs) < 5 {
		t.Fatalf("go-attestation's test data: %d event logs in %s", len(logs), dir)
	}
	agile := 0
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		events, perr := ParseBootLog(b)
		out, terr := exec.Command(eventlog, p).CombinedOutput()
		want := sha256PCRs(string(out))
		switch {
		case terr != nil:
			if perr == nil {
				t.Errorf("%s: tpm2_eventlog refuses it (%v), ParseBootLog reads it", filepath.Base(p), terr)
			}
			continue
		case len(want) == 0:
			// tpm2_eventlog reads it and has no SHA-256 bank: a SHA-1 log.
			if perr == nil || !strings.Contains(perr.Error(), "SHA-") {
				t.Errorf("%s: a log without SHA-256: %v", filepath.Base(p), perr)
			}
			continue
		case perr != nil:
			t.Errorf("%s: %v", filepath.Base(p), perr)
			continue
		}
		agile++
		got := ReplayBoot(events)
		for pcr, v := range want {
			if hex.EncodeToString(got[pcr]) != v {
				t.Errorf("%s: PCR %d replays to %x; tpm2_eventlog: %s", filepath.Base(p), pcr, got[pcr], v)
			}
		}
		t.Logf("%s: %d events; PCRs %d, as tpm2_eventlog", filepath.Base(p), len(events), len(want))
	}
	if agile == 0 {
		t.Error("no crypto-agile log was compared")
	}
}

var pcrLine = regexp.MustCompile(`^\s+(\d+)\s*: 0x([0-9A-Fa-f]{64})$`)

// sha256PCRs reads the sha256 bank of tpm2_eventlog's closing "pcrs:" section.
func sha256PCRs(out string) map[int]string {
	_, rest, ok := strings.Cut(out, "\npcrs:\n")
	if !ok {
		return nil
	}
	_, bank, ok := strings.Cut(rest, "  sha256:\n")
	if !ok {
		return nil
	}
	want := map[int]string{}
	for _, l := range strings.Split(bank, "\n") {
		m := pcrLine.FindStringSubmatch(l)
		if m == nil {
			break
		}
		n, _ := strconv.Atoi(m[1])
		want[n] = strings.ToLower(m[2])
	}
	return want
}

// Hostile logs: each refused with its reason, none read past its end.
func TestBootLogHostile(t *testing.T) {
	le := func(vs ...any) []byte {
		var b bytes.Buffer
		for _, v := range vs {
			binary.Write(&b, binary.LittleEndian, v)
		}
		return b.Bytes()
	}
	spec := append([]byte(specIDEvent), le(uint32(0), uint8(0), uint8(2), uint8(0), uint8(2), uint32(1), uint16(algSHA256), uint16(32), uint8(0))...)
	first := append(le(uint32(0), uint32(evNoAction)), make([]byte, 20)...)
	first = append(first, le(uint32(len(spec)))...)
	first = append(first, spec...)
	event := func(pcr uint32, count uint32, alg uint16, digest []byte, data []byte) []byte {
		b := le(pcr, uint32(0xd), count, alg)
		b = append(b, digest...)
		b = append(b, le(uint32(len(data)))...)
		return append(b, data...)
	}
	good := append(append([]byte{}, first...), event(4, 1, algSHA256, make([]byte, 32), []byte("grub"))...)
	if evs, err := ParseBootLog(good); err != nil || len(evs) != 1 {
		t.Fatalf("a good log: %v %v", evs, err)
	}
	for name, c := range map[string]struct {
		b    []byte
		want string
	}{
		"empty":              {nil, "the first event"},
		"a SHA-1 log":        {append(le(uint32(0), uint32(8)), make([]byte, 28)...), "SHA-1-only"},
		"cut short":          {good[:len(good)-3], "past the log's end"},
		"a huge data size":   {append(append([]byte{}, first...), le(uint32(4), uint32(0xd), uint32(1), uint16(algSHA256))[:14]...), "past the log's end"},
		"an unknown bank":    {append(append([]byte{}, first...), event(4, 1, 0x0012, make([]byte, 32), nil)...), "algorithm 0x0012"},
		"too many digests":   {append(append([]byte{}, first...), event(4, 9, algSHA256, make([]byte, 32), nil)...), "9 digests"},
		"a PCR out of range": {append(append([]byte{}, first...), event(99, 1, algSHA256, make([]byte, 32), nil)...), "PCR 99"},
		"oversized":          {make([]byte, MaxBootLogBytes+1), "at most"},
	} {
		if _, err := ParseBootLog(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
}

func FuzzParseBootLog(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		events, err := ParseBootLog(b)
		if err == nil {
			ReplayBoot(events)
		}
	})
}

// A TPM booted as a real machine's firmware booted (each SHA-256 digest of go-attestation's
// crypto-agile log extended into swtpm), then sealrund measured and the run quoted with the log:
// the quote verifies, its boot PCRs explained by the log; another machine's log, or this one
// with a digest changed, is refused (event-log).
func TestRunQuoteWithBootLog(t *testing.T) {
	dir := filepath.Join(testenv.GoModuleDir(t, "github.com/google/go-attestation", "v0.6.4"), "attest", "testdata")
	boot, err := os.ReadFile(filepath.Join(dir, "crypto_agile_eventlog"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := ParseBootLog(boot)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := open(t)
	for _, e := range events {
		if e.Type != evNoAction && e.PCR >= 1 && e.PCR <= 7 {
			if err := k.Extend(e.PCR, e.SHA256); err != nil {
				t.Fatal(err)
			}
		}
	}
	lines, err := k.Measure(filepath.Join(t.TempDir(), "events.jsonl"), sealrundEvent("sealrund"))
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"statement":1}`)
	nonce := sha256Sum(payload)
	pcrs := []int{2, 4, 7, 23}
	q, err := k.Quote(nonce, pcrs)
	if err != nil {
		t.Fatal(err)
	}
	akID, _ := AttestationKeyID(k.AttestationKey())
	bound := Bound{AttestationKey: akID, PCRs: pcrs, SealrundPCR: 23, SealrundSHA256: sealrundEvent("sealrund").SHA256}
	rq := RunQuote{Format: RunQuoteFormat, Quote: *q, Events: lines, BootLog: boot}
	got, err := VerifyRunQuote(&rq, k.AttestationKey(), payload, bound)
	if err != nil {
		t.Fatal(err)
	}
	if got.BootEvents[4] == 0 || got.BootEvents[7] == 0 {
		t.Errorf("boot events by PCR: %v", got.BootEvents)
	}
	other, _ := os.ReadFile(filepath.Join(dir, "ubuntu_2104_shielded_vm_no_secure_boot_eventlog"))
	edited := bytes.Clone(boot)
	var e4 BootEvent
	for _, e := range events {
		if e.PCR == 4 && e.Type != evNoAction {
			e4 = e
			break
		}
	}
	i := bytes.Index(edited, e4.SHA256)
	edited[i] ^= 1
	for name, log := range map[string][]byte{"another machine's boot log": other, "a digest changed": edited, "not a log": []byte("junk")} {
		c := rq
		c.BootLog = log
		if _, err := VerifyRunQuote(&c, k.AttestationKey(), payload, bound); err == nil || reason(t, err) != ReasonEventLog {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
