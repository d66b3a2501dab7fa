package verify

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
)

// Timestamp is what --tsa-chain found: the earliest time a timestamp of the signature
// says the attestation existed by, and the authority.
type Timestamp struct {
	Bundle string    `json:"bundle"`
	Time   time.Time `json:"existed_before"`
	TSA    string    `json:"tsa"`
}

// checkTimestamps checks the RFC 3161 timestamps of the attestation at path (a Sigstore bundle
// itself, or the bundle beside an envelope) with the authority's chain.
func checkTimestamps(path, chainPath string) (*Timestamp, error) {
	chain, err := attest.LoadTSAChain(chainPath)
	if err != nil {
		return nil, ioErr(opt.Wrap("verify.RunOptions", "TSAChain", err))
	}
	data, err := fileio.ReadLimited(path, "attestation", attest.MaxEnvelopeBytes)
	if err != nil {
		return nil, ioErr(err)
	}
	env, err := attest.EnvelopeOf(data)
	if err != nil {
		return nil, err
	}
	bundle := path
	if string(env) == string(data) { // an envelope: its bundle is beside it
		bundle = attest.BundlePath(path)
		if _, err := os.Stat(bundle); os.IsNotExist(err) {
			return nil, &attest.VerificationFailure{Reason: attest.ReasonTimestamp, Detail: fmt.Sprintf("no Sigstore bundle beside it (%s): the timestamp travels there", bundle)}
		}
		if data, err = fileio.ReadLimited(bundle, "Sigstore bundle", attest.MaxEnvelopeBytes); err != nil {
			return nil, ioErr(err)
		}
	}
	at, tsa, err := attest.CheckBundleTimestamps(data, env, chain)
	if err != nil {
		var vf *attest.VerificationFailure
		if errors.As(err, &vf) {
			vf.Detail = fmt.Sprintf("%s: %s", bundle, vf.Detail)
		}
		return nil, err
	}
	return &Timestamp{Bundle: bundle, Time: at, TSA: tsa}, nil
}
