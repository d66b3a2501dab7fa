package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger/witness"
)

// Witnessed is what --witness found: the cosigned head the run's entries are under.
type Witnessed struct {
	File     string   `json:"file"`
	Origin   string   `json:"origin"`
	HeadSize uint64   `json:"head_size"`
	Queued   uint64   `json:"queued_index"`
	Ended    uint64   `json:"ended_index"`
	By       []string `json:"by"`
	NotBy    []string `json:"not_by"`
}

// checkWitnessed checks the run's witnessed proof (--witnessed, or witnessed.json beside the
// attestation) with the host's key and the witnesses' keys.
func checkWitnessed(attPath string, o *RunOptions, got *attest.Verified) (*Witnessed, error) {
	path := o.Witnessed
	if path == "" {
		path = filepath.Join(filepath.Dir(attPath), witness.RunProofFile)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonWitnessed, Detail: fmt.Sprintf("no witnessed proof at %s: a publication carries one beside each run its ledger's cosigned head covers (name another with the option Witnessed)", path)}
	}
	b, err := fileio.ReadLimited(path, "witnessed proof", witness.MaxRunProofBytes+1)
	if err != nil {
		return nil, ioErr(err)
	}
	p, err := witness.ParseRunProof(b)
	if err != nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonWitnessed, Detail: fmt.Sprintf("%s: %v", path, err)}
	}
	v, _, err := attest.LoadVerifier(o.Key)
	if err != nil {
		return nil, ioErr(err)
	}
	p2 := got.Statement.Predicate
	w, err := p.Check(p2.Run.ID, got.Payload, p2.Ledger, []signature.Verifier{v}, o.Witnesses, o.Quorum)
	if err != nil {
		return nil, &attest.VerificationFailure{Reason: attest.ReasonWitnessed, Detail: fmt.Sprintf("%s: %v", path, err)}
	}
	return &Witnessed{File: path, Origin: p.Origin, HeadSize: w.Head.Size, Queued: p.Queued.Index, Ended: p.Ended.Index, By: w.By, NotBy: w.NotBy}, nil
}
