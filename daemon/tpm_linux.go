package daemon

// [tpm]: sealrund measures its own binary into a PCR at start (logging it in its event log), and
// quotes each run's statement with the TPM's attestation key (docs/TPM.md).

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/tpm"
)

// TPMEventLog is sealrund's event log in its state directory: each measurement it made into
// its PCR since the TPM's last reset.
const TPMEventLog = "tpm-events.jsonl"

// HostTPM is the host's TPM as [tpm] configures it: its keys (checked against the enrollment),
// the PCRs each run's quote covers, and sealrund's event log of this boot, its own start last.
type HostTPM struct {
	mu          sync.Mutex
	dev         io.Closer
	keys        *tpm.Keys
	pcrs        []int
	sealrundPCR int
	akID        string
	events      []string
	bootLog     []byte // the boot's TCG event log, where the kernel gives one
}

// OpenTPM opens keys.signing's TPM, checks its keys are the enrollment's and measures sealrund
// (build b) into [tpm] sealrund_pcr. The TPM stays open for as long as sealrund runs.
func OpenTPM(cfg *hostconfig.Config, b *attest.Build) (_ *HostTPM, err error) {
	dev := strings.TrimPrefix(cfg.Keys.Signing, attest.TPMPrefix)
	t, err := tpm.Open(dev)
	if err != nil {
		return nil, fmt.Errorf("%s:keys.signing: TPM %s: %w", cfg.File, dev, err)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	keys, err := tpm.LoadKeys(t)
	if err != nil {
		return nil, fmt.Errorf("%s:keys.signing: TPM %s: %w", cfg.File, dev, err)
	}
	h := &HostTPM{dev: t, keys: keys, pcrs: cfg.TPM.QuotePCRs(), sealrundPCR: cfg.TPM.MeasurePCR()}
	if err := checkEnrolled(keys, cfg.TPM.Enrollment); err != nil {
		return nil, fmt.Errorf("%s:tpm.enrollment: %w", cfg.File, err)
	}
	if h.akID, err = tpm.AttestationKeyID(keys.AttestationKey()); err != nil {
		return nil, err
	}
	if h.bootLog, err = readBootLog(bootLogPath(dev), keys, h.pcrs, h.sealrundPCR); err != nil {
		return nil, fmt.Errorf("%s:tpm.pcrs: %w", cfg.File, err)
	}
	h.events, err = keys.Measure(filepath.Join(cfg.StateDir, TPMEventLog), tpm.Event{PCR: h.sealrundPCR, SHA256: b.DaemonSHA256, Type: tpm.EventSealrund,
		Version: b.Version, Commit: b.Commit, Time: time.Now().UTC()})
	if err != nil {
		return nil, fmt.Errorf("measure sealrund into TPM %s: %w", dev, err)
	}
	return h, nil
}

// bootLogPath is where the kernel gives the boot's event log of the TPM device dev (/dev/tpmrmN:
// /sys/kernel/security/tpmN/binary_bios_measurements); "" for a software TPM's socket.
func bootLogPath(dev string) string {
	base := filepath.Base(dev)
	n, ok := strings.CutPrefix(base, "tpmrm")
	if !ok {
		n, ok = strings.CutPrefix(base, "tpm")
	}
	if !ok || n == "" || strings.Trim(n, "0123456789") != "" || !strings.HasPrefix(dev, "/dev/") {
		return ""
	}
	return filepath.Join("/sys/kernel/security", "tpm"+n, "binary_bios_measurements")
}

// readBootLog reads the boot's event log at path (none: "" or missing) and checks that it gives
// the PCRs quoted their values now: a quote whose PCRs the log does not explain would fail every
// reader's check, so such a PCR is refused at start, by name.
func readBootLog(path string, keys *tpm.Keys, pcrs []int, sealrundPCR int) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	b, err := fileio.ReadLimited(path, "the boot's event log", tpm.MaxBootLogBytes)
	if err != nil {
		return nil, err
	}
	events, err := tpm.ParseBootLog(b)
	if err != nil {
		// A log readers could not replay (a SHA-1 one): quotes carry none, and say the boot's
		// PCRs are unexplained.
		return nil, nil
	}
	now := map[int][]byte{}
	for _, p := range pcrs {
		if p != sealrundPCR {
			if now[p], err = keys.PCRValue(p); err != nil {
				return nil, err
			}
		}
	}
	if err := tpm.CheckBootPCRs(events, now, sealrundPCR); err != nil {
		return nil, fmt.Errorf("%v (%s): something extended it after the boot (leave it out of [tpm] pcrs, which readers hold to that log)", err, path)
	}
	return b, nil
}

// checkEnrolled refuses a TPM whose keys are not the ones the enrollment names: every quote
// and signature would fail the readers' checks against what the operator published.
func checkEnrolled(keys *tpm.Keys, path string) error {
	e, err := tpm.ReadEnrollment(path)
	if err != nil {
		return err
	}
	got, err := tpm.VerifyEnrollment(e, nil, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !got.AttestationKey.Equal(keys.AttestationKey()) || !got.SigningKey.Equal(keys.SigningKey()) {
		return fmt.Errorf("%s is another TPM's enrollment, or of keys its hierarchies no longer make (cleared): enroll this TPM again (sealrun tpm enroll) and publish that", path)
	}
	return nil
}

// Close closes the TPM.
func (h *HostTPM) Close() error { return h.dev.Close() }

// Info is what a run's statement says of its quote.
func (h *HostTPM) Info() *attest.TPMInfo {
	return &attest.TPMInfo{AttestationKey: h.akID, PCRs: h.pcrs, SealrundPCR: h.sealrundPCR}
}

// Quote quotes the PCRs with the SHA-256 of a statement's bytes as qualifying data.
func (h *HostTPM) Quote(payload []byte) (*tpm.RunQuote, error) {
	sum := sha256.Sum256(payload)
	h.mu.Lock()
	defer h.mu.Unlock()
	q, err := h.keys.Quote(sum[:], h.pcrs)
	if err != nil {
		return nil, err
	}
	return &tpm.RunQuote{Format: tpm.RunQuoteFormat, Quote: *q, Events: h.events, BootLog: h.bootLog}, nil
}

// quote quotes the run's signed statement and writes result.tpm.json beside its attestation.
func (rs *runState) quote(env []byte) error {
	payload, err := attest.EnvelopePayload(env)
	if err != nil {
		return err
	}
	rq, err := rs.x.TPM.Quote(payload)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(rq, "", "  ")
	if err != nil {
		return err
	}
	if err := fileio.WriteAtomic(filepath.Join(rs.io.dir, attest.TPMQuoteFile), 0o644, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
		return errors.New("write " + attest.TPMQuoteFile + ": " + err.Error())
	}
	return nil
}
