package verify

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/publish"
)

// witnessedRuns checks each published run's witnessed.json against the host's keys and the
// witnesses ws: a reader's check, from one run's own files, that the quorum saw it end with
// its attestation.
func (c *checker) witnessedRuns(meta publish.Publication, ks []leaderboard.Key, ws []*witness.Verifier, quorum int) {
	vs := make([]signature.Verifier, len(ks))
	for i, k := range ks {
		vs[i] = k.Verifier
	}
	ok := 0
	by := map[string]bool{}
	for _, id := range meta.Runs {
		v := c.verified[id]
		if v == nil {
			continue // runs named it
		}
		rel := "runs/" + id + "/" + witness.RunProofFile
		full := filepath.Join(c.dir, filepath.FromSlash(rel))
		_, serr := os.Stat(full)
		b, err := fileio.ReadLimited(full, "witnessed proof", witness.MaxRunProofBytes)
		if errors.Is(serr, os.ErrNotExist) {
			c.bad("%s: missing: run %s was not under a head the witnesses cosigned when this was published (the operator publishes again once they have)", rel, id)
			continue
		}
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		p, err := witness.ParseRunProof(b)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		got, err := p.Check(id, v.Payload, v.Statement.Predicate.Ledger, vs, ws, quorum)
		if err != nil {
			c.bad("%s: %v", rel, err)
			continue
		}
		ok++
		c.claim(rel)
		for _, w := range got.By {
			by[w] = true
		}
	}
	var names []string
	for _, w := range ws {
		if by[w.Name()] {
			names = append(names, w.Name())
		}
	}
	fmt.Fprintf(c.w, "witnessed: %d of %d runs each queued and ended, with its attestation, under a head %d or more of the witnesses cosigned (%s)\n", ok, len(meta.Runs), quorum, strings.Join(names, ", "))
}

// keep keeps what runs found of a run, for the checks after it.
func (c *checker) keep(id string, v *attest.Verified) {
	if c.verified == nil {
		c.verified = map[string]*attest.Verified{}
	}
	c.verified[id] = v
}
