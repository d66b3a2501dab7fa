package main

import (
	"fmt"
	"os"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
)

// timestampVerdict is what --tsa-chain found: the earliest time a timestamp of the signature
// says the attestation existed by, and the authority.
type timestampVerdict struct {
	Bundle string    `json:"bundle"`
	Time   time.Time `json:"existed_before"`
	TSA    string    `json:"tsa"`
}

// checkTimestamps checks the RFC 3161 timestamps of the attestation at path (a Sigstore bundle
// itself, or the bundle beside an envelope) with the authority's chain.
func checkTimestamps(path, chainPath string) (*timestampVerdict, error) {
	chain, err := attest.LoadTSAChain(chainPath)
	if err != nil {
		return nil, ioError(fmt.Errorf("--tsa-chain: %w", err))
	}
	data, err := fileio.ReadLimited(path, "attestation", attest.MaxEnvelopeBytes)
	if err != nil {
		return nil, ioError(err)
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
			return nil, ioError(err)
		}
		if benv, err := attest.EnvelopeOf(data); err != nil || !attest.SameEnvelope(benv, env) {
			return nil, &attest.VerificationFailure{Reason: attest.ReasonTimestamp, Detail: fmt.Sprintf("%s carries another envelope than %s", bundle, path)}
		}
	}
	sig, err := attest.EnvelopeSignature(env)
	if err != nil {
		return nil, err
	}
	tokens, err := attest.BundleTimestamps(data)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonTimestamp, Detail: fmt.Sprintf("%s carries no RFC 3161 timestamp (the host names no [timestamp] authority, or it failed: sealrun logs RUN says)", bundle)}
	}
	var best *timestampVerdict
	var first error
	for i, tok := range tokens {
		at, name, err := attest.CheckTimestamp(tok, sig, chain)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("rfc3161Timestamps[%d]: %w", i, err)
			}
			continue
		}
		if best == nil || at.Before(best.Time) {
			best = &timestampVerdict{Bundle: bundle, Time: at.UTC(), TSA: name}
		}
	}
	if best == nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonTimestamp, Detail: fmt.Sprintf("%s: no timestamp checks with %s: %v", bundle, chainPath, first)}
	}
	return best, nil
}
