package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/tpm"
)

// TPMOptions are what a reader trusts of a host's TPM: its enrollment (what sealrun tpm enroll
// wrote, as the operator published it) and the TPM maker's CAs its EK certificate must chain to,
// or AllowUncheckedEK, the reader's word that an unchecked EK certificate will do.
type TPMOptions struct {
	Enrollment       string
	EKRoots          []string
	EKIntermediates  []string
	AllowUncheckedEK bool
}

// TPM is what the check "tpm" found: the enrolled keys, the quote and what they allow a reader
// to conclude, in words, and what not.
type TPM struct {
	SigningKey     string         `json:"signing_key"`     // its key id
	AttestationKey string         `json:"attestation_key"` // SHA-256 of its PKIX DER
	EK             string         `json:"ek"`              // the EK certificate's issuer, or why unchecked
	Quoted         *tpm.RunQuoted `json:"quoted"`
	Concluded      []string       `json:"concluded"`
	NotConcluded   []string       `json:"not_concluded"`
}

// hostTPM is an enrollment that verified, loaded once for every run checked against it.
type hostTPM struct {
	enrolled *tpm.Enrolled
	skID     string
	akID     string
	ek       string
}

// openTPM is loadTPM for a check: an enrollment that does not verify is the check's failure
// (failed), not an error; nil, nil without --tpm.
func openTPM(o TPMOptions) (*hostTPM, *attest.VerificationFailure, error) {
	h, err := loadTPM(o)
	var vf *attest.VerificationFailure
	if errors.As(err, &vf) {
		return nil, vf, nil
	}
	return h, nil, err
}

// loadTPM reads and verifies the enrollment o names; a usage error where the options are
// incomplete, a *attest.VerificationFailure where it does not verify.
func loadTPM(o TPMOptions) (*hostTPM, error) {
	if o.Enrollment == "" {
		return nil, nil
	}
	roots, err := tpm.CertPool(o.EKRoots)
	if err != nil {
		return nil, ioErr(err)
	}
	inter, err := tpm.CertPool(o.EKIntermediates)
	if err != nil {
		return nil, ioErr(err)
	}
	switch {
	case roots == nil && !o.AllowUncheckedEK:
		return nil, usageErr(opt.New("verify.TPMOptions", "EKRoots", "none given: the enrollment's EK certificate cannot be checked without the TPM maker's CA (from the maker, not the operator); give it, or accept the EK unchecked", "AllowUncheckedEK"))
	case inter != nil && roots == nil:
		return nil, usageErr(opt.New("verify.TPMOptions", "EKIntermediates", "go with the maker's root CA", "EKRoots"))
	}
	e, err := tpm.ReadEnrollment(o.Enrollment)
	if err != nil {
		return nil, ioErr(err)
	}
	got, err := tpm.VerifyEnrollment(e, roots, inter)
	if err != nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonTPM, Detail: fmt.Sprintf("the enrollment %s: %v", o.Enrollment, err)}
	}
	h := &hostTPM{enrolled: got, ek: "unchecked (the reader gave no TPM maker's CA and accepted that)"}
	if got.EK != nil {
		h.ek = fmt.Sprintf("issued by %s (serial %s), chained to the maker's CA given", got.EK.Issuer, got.EK.SerialNumber)
	}
	if h.skID, err = attest.KeyID(got.SigningKey); err != nil {
		return nil, err
	}
	if h.akID, err = tpm.AttestationKeyID(got.AttestationKey); err != nil {
		return nil, err
	}
	return h, nil
}

// check checks one run's quote (rq, nil where its file is missing) against its verified
// attestation v.
func (h *hostTPM) check(v *attest.Verified, rq *tpm.RunQuote, rebuilt bool) (*TPM, error) {
	p := v.Statement.Predicate
	fail := func(format string, a ...any) (*TPM, error) {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonTPM, Detail: fmt.Sprintf(format, a...)}
	}
	switch {
	case p.TPM == nil:
		return fail("the run's attestation says nothing of a TPM (made before hosts said so): no hardware root, and the host's enrollment was given")
	case p.TPM.None != "":
		return fail("the run has no TPM quote: its host says %q, and the host's enrollment was given", p.TPM.None)
	case v.KeyID != h.skID:
		return fail("the attestation is signed by key %s, not by the enrollment's TPM signing key %s: it was not signed in that TPM", v.KeyID, h.skID)
	case p.TPM.AttestationKey != h.akID:
		return fail("the run names attestation key %s; the enrollment's is %s: another TPM quoted it", p.TPM.AttestationKey, h.akID)
	case rq == nil:
		return fail("%s: missing: the run's attestation says the TPM quoted it, and the quote is not there", attest.TPMQuoteFile)
	}
	q, err := tpm.VerifyRunQuote(rq, h.enrolled.AttestationKey, v.Payload, tpm.Bound{AttestationKey: p.TPM.AttestationKey, PCRs: p.TPM.PCRs, SealrundPCR: p.TPM.SealrundPCR, SealrundSHA256: p.Build.DaemonSHA256})
	var tf *tpm.Failure
	if errors.As(err, &tf) {
		return fail("%s: %s (%s)", attest.TPMQuoteFile, tf.Msg, tf.Reason)
	} else if err != nil {
		return nil, err
	}
	last := q.Starts[len(q.Starts)-1]
	out := &TPM{SigningKey: h.skID, AttestationKey: h.akID, EK: h.ek, Quoted: q}
	out.Concluded = []string{
		"the attestation was signed by a key that exists only in a TPM (fixed to it, made inside it: its attestation key certified so)",
		fmt.Sprintf("that TPM quoted PCRs %s with this statement's SHA-256, in its boot %d, after the run ended", ints(p.TPM.PCRs), q.ResetCount),
		fmt.Sprintf("in that boot, sealrund %s (version %s, commit %s) measured itself into PCR %d at its start and was the last sealrund to start before the quote (%d start(s) that boot): the build the attestation records", short(last.SHA256), last.Version, shortCommit(last.Commit), p.TPM.SealrundPCR, len(q.Starts)),
	}
	if h.enrolled.EK != nil {
		out.Concluded = append(out.Concluded, "the TPM maker's CA certified an endorsement key of a TPM ("+h.ek+")")
	}
	if rebuilt {
		out.Concluded = append(out.Concluded, "that sealrund is what its commit builds from source (--rebuild)")
	}
	out.NotConcluded = []string{
		"anything not measured: sealrund measures itself, so a program that does not (another daemon, a kernel module loaded later, a GPU's firmware) is not in its log; a kernel with IMA measures every program it runs",
	}
	if rest := others(p.TPM.PCRs, p.TPM.SealrundPCR); rest != "" && q.BootEvents != nil {
		n := 0
		for _, c := range q.BootEvents {
			n += c
		}
		out.Concluded = append(out.Concluded, fmt.Sprintf("the boot's event log (%d measurements; tpm2_eventlog reads result.tpm.json's boot_log) gives PCR(s) %s exactly the values quoted: it says what the firmware and the boot loader measured", n, rest))
		out.NotConcluded = append(out.NotConcluded, "that what the boot measured is good firmware, a good boot loader and kernel: compare the log's digests with the values their makers publish")
	} else if rest != "" {
		out.NotConcluded = append(out.NotConcluded, "what the boot measured into PCR(s) "+rest+": they are quoted as it left them, and the host gave no event log of them")
	}
	var earlier []string
	for _, e := range q.Starts[:len(q.Starts)-1] {
		if e.SHA256 != last.SHA256 {
			earlier = append(earlier, short(e.SHA256)+" (version "+e.Version+")")
		}
	}
	if len(earlier) > 0 {
		out.NotConcluded = append(out.NotConcluded, fmt.Sprintf("what %d earlier start(s) that boot of another sealrund did before this one started: %s", len(earlier), strings.Join(earlier, ", ")))
	}
	if h.enrolled.EK == nil {
		out.NotConcluded = append(out.NotConcluded, "whose TPM it is: its EK certificate was not checked against the maker's CA (--ek-ca)")
	}
	out.NotConcluded = append(out.NotConcluded, "that the attestation key is in the TPM the EK certificate names: only that TPM's answer to a challenge shows it (sealrun tpm challenge)")
	if !rebuilt {
		out.NotConcluded = append(out.NotConcluded, "that the sealrund measured is what its commit's source builds: --rebuild checks that")
	}
	return out, nil
}

// WriteTPM writes what the check "tpm" concluded.
func WriteTPM(w io.Writer, t *TPM) {
	fmt.Fprintf(w, "  tpm        quote by attestation key %s, boot %d\n", short(t.AttestationKey), t.Quoted.ResetCount)
	fmt.Fprintf(w, "             may be concluded:\n")
	for _, c := range t.Concluded {
		fmt.Fprintf(w, "               - %s\n", c)
	}
	fmt.Fprintf(w, "             may not:\n")
	for _, c := range t.NotConcluded {
		fmt.Fprintf(w, "               - %s\n", c)
	}
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	if c == "" {
		return "none recorded"
	}
	return c
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func others(xs []int, but int) string {
	var rest []int
	for _, x := range xs {
		if x != but {
			rest = append(rest, x)
		}
	}
	return ints(rest)
}

// readRunQuote reads a run's quote file: nil, nil where it is missing.
func readRunQuote(path string) (*tpm.RunQuote, error) {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return tpm.ReadRunQuote(path)
}

// tpmRuns is the check "tpm" of a publication: every run verified carries a quote that checks
// against the host's enrollment. The log says once what that allows a reader to conclude.
func (c *checker) tpmRuns(meta publish.Publication, h *hostTPM) {
	quoted := 0
	var first *TPM
	for _, id := range meta.Runs {
		v := c.verified[id]
		if v == nil {
			continue // runs named it
		}
		rel := "runs/" + id + "/" + attest.TPMQuoteFile
		var rq *tpm.RunQuote
		b, missing, err := c.snap.read(rel, "TPM quote", tpm.MaxRunQuoteBytes)
		switch {
		case missing:
		case err != nil:
			c.bad("%s: %v", rel, err)
			continue
		default:
			if rq, err = tpm.ParseRunQuote(rel, b); err != nil {
				c.bad("%v", err)
				continue
			}
		}
		t, err := h.check(v, rq, false)
		var vf *attest.VerificationFailure
		if errors.As(err, &vf) {
			c.bad("runs/%s: %s", id, vf.Detail)
			continue
		} else if err != nil {
			c.bad("runs/%s: %v", id, err)
			continue
		}
		c.claim(rel)
		quoted++
		if first == nil {
			first = t
		}
	}
	if first != nil {
		fmt.Fprintf(c.w, "tpm: %d run(s) quoted by the enrolled TPM (attestation key %s; EK %s)\n", quoted, short(first.AttestationKey), first.EK)
		fmt.Fprintf(c.w, "tpm: for each, a reader may conclude:\n")
		for _, s := range first.Concluded[:1] {
			fmt.Fprintf(c.w, "  - %s\n", s)
		}
		fmt.Fprintf(c.w, "  - its TPM quoted its statement after it ended, and the sealrund measured last before the quote in that boot is the build it records\n")
		fmt.Fprintf(c.w, "tpm: and may not:\n")
		for _, s := range first.NotConcluded {
			fmt.Fprintf(c.w, "  - %s\n", s)
		}
	}
}
