package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sigstore/sigstore/pkg/signature"
)

// cosignedHead is the largest head of l that carries a signature line of a key other than the
// log's own (a witness's cosignature, as sealrun ledger export --witnessed places it), or "".
// Which witnesses they are, and whether they verify, is the reader's check.
func cosignedHead(l *ledger.Ledger) string {
	for i := len(l.Heads) - 1; i >= 0; i-- {
		_, sigs, _ := strings.Cut(l.Heads[i], "\n\n")
		for _, line := range strings.Split(sigs, "\n") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "— "), " ")
			if strings.HasPrefix(line, "— ") && name != l.Origin {
				return l.Heads[i]
			}
		}
	}
	return ""
}

// proveRuns writes, for each published run under a cosigned head of its host's ledger, the
// proof of that (runs/<id>/witnessed.json); it says on log which runs are not witnessed. It
// returns how many runs it proved.
func proveRuns(tmp string, in *leaderboard.Inputs, meta Publication, log io.Writer) (int, error) {
	if len(meta.Ledgers) == 0 {
		return 0, nil
	}
	ks, err := leaderboard.LoadKeys([]string{filepath.Join(tmp, "keys")})
	if err != nil {
		return 0, err
	}
	var paths []string
	for _, l := range meta.Ledgers {
		paths = append(paths, filepath.Join(tmp, filepath.FromSlash(l)))
	}
	ls, err := leaderboard.LoadLedgers(paths, ks)
	if err != nil {
		return 0, nil // the accounting names it
	}
	heads := make([]string, len(ls))
	for i, l := range ls {
		heads[i] = cosignedHead(l)
	}
	n := 0
	var late []string
	for _, e := range in.Entries {
		id := e.Predicate.Run.ID
		dst := filepath.Join(tmp, "runs", id, witness.RunProofFile)
		os.Remove(dst) // a gathered directory's own copy is not this publication's
		for i, l := range ls {
			if _, ok := l.Queued[id]; !ok || heads[i] == "" {
				continue
			}
			p, err := witness.Prove(l, heads[i], id)
			if err != nil {
				late = append(late, id)
				break
			}
			p.Ledger = meta.Ledgers[i]
			b, _ := json.MarshalIndent(p, "", "  ")
			if err := writeFileSync(dst, append(b, '\n')); err != nil {
				return 0, err
			}
			n++
			break
		}
	}
	if len(late) > 0 {
		fmt.Fprintf(log, "  not witnessed (they end after the cosigned head the ledgers carry; export the ledger again with --witnessed once the witnesses have cosigned): %s\n", strings.Join(late, ", "))
	}
	return n, nil
}

// witnessedRuns checks each published run's witnessed.json against the host's keys and the
// witnesses ws: a reader's check, from one run's own files, that the quorum saw it end with
// its attestation.
func (c *checker) witnessedRuns(meta Publication, ks []leaderboard.Key, ws []*witness.Verifier, quorum int) {
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
		b, err := os.ReadFile(filepath.Join(c.dir, filepath.FromSlash(rel)))
		if errors.Is(err, os.ErrNotExist) {
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
