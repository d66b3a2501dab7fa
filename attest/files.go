package attest

import (
	"errors"
	"fmt"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/policy"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Files are what a verification reads besides the attestation: the signer's public key (PEM,
// required) and, each optional, the graded bundle, report.json, the audit log and the track file.
type Files struct {
	Key, Bundle, Report, Audit, Track string
	// Verifier is the key already loaded (then Key is not read); Heads opens ledger heads once
	// each across many verifications (attest.WithHeads).
	Verifier signature.Verifier
	Heads    *ledger.Heads
}

// VerifyFile verifies the attestation at path (a result.att.json or a Sigstore bundle holding
// one) with Verify, checking the subjects against the bundle and report, the audit log's head and
// entries, and the track's id and pins, for each file given. A *VerificationFailure is the
// verdict; any other error is about reading the files (it names the file).
func VerifyFile(path string, f Files) (*Verified, error) {
	v := f.Verifier
	if v == nil {
		if f.Key == "" {
			return nil, errors.New("give the signer's public key (for example sealrun.pub)")
		}
		var err error
		if v, _, err = LoadVerifier(f.Key); err != nil {
			return nil, err
		}
	}
	env, err := fileio.ReadLimited(path, "attestation", MaxEnvelopeBytes+64<<10) // a bundle wraps the envelope
	if err != nil {
		return nil, err
	}
	if env, err = EnvelopeOf(env); err != nil {
		return nil, err
	}
	opts := []VerifyOption{WithHeads(f.Heads)}
	for _, c := range []struct {
		path string
		opt  func(string) VerifyOption
	}{{f.Bundle, WithBundleDigest}, {f.Report, WithReportDigest}} {
		if c.path == "" {
			continue
		}
		sum, err := fileio.SHA256(c.path)
		if err != nil {
			return nil, err
		}
		opts = append(opts, c.opt(sum))
	}
	if f.Audit != "" {
		af, err := fileio.OpenRegular(f.Audit, "audit log")
		if err != nil {
			return nil, err
		}
		defer af.Close()
		opts = append(opts, WithAuditLog(af))
	}
	if f.Track != "" {
		t, err := policy.Load(f.Track)
		if err != nil {
			return nil, fmt.Errorf("the track: %w", err)
		}
		opts = append(opts, WithTrack(t))
	}
	return Verify(env, v, opts...)
}
