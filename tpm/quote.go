package tpm

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/google/go-tpm/tpm2"
)

// Quote is a TPM2_Quote by the attestation key: the TPMS_ATTEST the TPM signed, its signature,
// and the values of the PCRs it covers (SHA-256 bank), which a reader checks against the quoted
// digest and then against the event log that says what was measured.
type Quote struct {
	Attest    []byte `json:"attest"`    // TPMS_ATTEST, as the TPM produced it
	Signature []byte `json:"signature"` // TPMT_SIGNATURE
	PCRs      []PCR  `json:"pcrs"`      // in index order
}

// PCR is one PCR's SHA-256 bank value.
type PCR struct {
	Index  int    `json:"index"`
	SHA256 string `json:"sha256"` // hex
}

// MaxPCRs bounds the PCRs one quote covers (a PC Client TPM has 24).
const MaxPCRs = 24

// Quote quotes the SHA-256 bank of pcrs with qualifying data nonce (what binds the quote to a
// run: its statement's digest, say), and reads their values.
func (k *Keys) Quote(nonce []byte, pcrs []int) (*Quote, error) {
	sel, err := selection(pcrs)
	if err != nil {
		return nil, err
	}
	ak, _, err := k.load(&k.ak)
	if err != nil {
		return nil, fmt.Errorf("make the attestation key: %w", err)
	}
	r, err := tpm2.Quote{SignHandle: ak.auth(), QualifyingData: tpm2.TPM2BData{Buffer: nonce}, InScheme: tpm2.TPMTSigScheme{Scheme: tpm2.TPMAlgNull}, PCRSelect: sel}.Execute(k.t)
	k.unload(ak)
	if err != nil {
		return nil, fmt.Errorf("TPM2_Quote: %w", err)
	}
	q := &Quote{Attest: r.Quoted.Bytes(), Signature: tpm2.Marshal(&r.Signature)}
	// The values, read after the quote: a reader holds them to the quoted digest, so a PCR
	// extended in between makes the quote fail, never pass.
	idx := sorted(pcrs)
	for len(q.PCRs) < len(idx) {
		part := idx[len(q.PCRs):]
		s, _ := selection(part)
		v, err := tpm2.PCRRead{PCRSelectionIn: s}.Execute(k.t)
		if err != nil {
			return nil, fmt.Errorf("TPM2_PCR_Read: %w", err)
		}
		if len(v.PCRValues.Digests) == 0 {
			return nil, fmt.Errorf("TPM2_PCR_Read of %v gave no value", part)
		}
		for i, d := range v.PCRValues.Digests {
			q.PCRs = append(q.PCRs, PCR{Index: part[i], SHA256: hex.EncodeToString(d.Buffer)})
		}
	}
	return q, nil
}

func sorted(pcrs []int) []int {
	out := append([]int(nil), pcrs...)
	sort.Ints(out)
	return out
}

func selection(pcrs []int) (tpm2.TPMLPCRSelection, error) {
	if len(pcrs) == 0 || len(pcrs) > MaxPCRs {
		return tpm2.TPMLPCRSelection{}, fmt.Errorf("quote 1 to %d PCRs, not %d", MaxPCRs, len(pcrs))
	}
	seen := map[int]bool{}
	var idx []uint
	for _, p := range pcrs {
		if p < 0 || p >= MaxPCRs || seen[p] {
			return tpm2.TPMLPCRSelection{}, fmt.Errorf("PCR %d: each of 0 to %d, once", p, MaxPCRs-1)
		}
		seen[p] = true
		idx = append(idx, uint(p))
	}
	return tpm2.TPMLPCRSelection{PCRSelections: []tpm2.TPMSPCRSelection{{Hash: tpm2.TPMAlgSHA256, PCRSelect: tpm2.PCClientCompatible.PCRs(idx...)}}}, nil
}

// VerifyQuote checks q with the attestation key ak: its signature, that its qualifying data is
// nonce (a quote made for another run, or replayed, has other), and that the PCR values it
// carries are the ones quoted (one PCR changed changes their digest).
func VerifyQuote(q *Quote, ak *ecdsa.PublicKey, nonce []byte) error {
	_, err := verifyQuote(q, ak, nonce)
	return err
}

// verifyQuote is VerifyQuote, returning the TPMS_ATTEST it verified.
func verifyQuote(q *Quote, ak *ecdsa.PublicKey, nonce []byte) (*tpm2.TPMSAttest, error) {
	a, err := checkAttest(q.Attest, q.Signature, ak, tpm2.TPMSTAttestQuote)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(a.ExtraData.Buffer, nonce) {
		return nil, failf(ReasonNonce, "the quote's qualifying data is %x, not %x: a quote made for something else, or replayed", a.ExtraData.Buffer, nonce)
	}
	info, err := a.Attested.Quote()
	if err != nil {
		return nil, failf(ReasonForm, "not a quote: %v", err)
	}
	want, err := selection(pcrIndexes(q.PCRs))
	if err != nil {
		return nil, failf(ReasonPCR, "the PCR values given: %v", err)
	}
	if !bytes.Equal(tpm2.Marshal(&info.PCRSelect), tpm2.Marshal(&want)) {
		return nil, failf(ReasonPCR, "the quote covers other PCRs than the values given (%v)", pcrIndexes(q.PCRs))
	}
	h := sha256.New()
	for i, p := range q.PCRs {
		if i > 0 && p.Index <= q.PCRs[i-1].Index {
			return nil, failf(ReasonPCR, "PCR values out of index order")
		}
		v, err := hex.DecodeString(p.SHA256)
		if err != nil || len(v) != sha256.Size {
			return nil, failf(ReasonPCR, "PCR %d: %q is not a SHA-256 value", p.Index, p.SHA256)
		}
		h.Write(v)
	}
	if !bytes.Equal(h.Sum(nil), info.PCRDigest.Buffer) {
		return nil, failf(ReasonPCR, "the PCR values given are not the ones quoted (their digest differs): a PCR was changed")
	}
	return a, nil
}

func pcrIndexes(ps []PCR) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Index
	}
	return out
}
