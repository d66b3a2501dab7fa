package publish

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
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
