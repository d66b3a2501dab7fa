package witness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"

	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/ledger"
)

// Witnessed is what a reader's check of a ledger against witnesses found: the largest head of
// it that at least the quorum of the given witnesses cosigned, who did and who did not.
type Witnessed struct {
	Head   ledger.Checkpoint
	Signed string   // that head with its signatures
	By     []string // the witnesses (key names) whose cosignatures verify on it
	NotBy  []string // the others given
	After  uint64   // entries after it: not yet shown to the quorum
}

// CheckLedger finds the largest head in l (a ledger read and verified with the host's keys)
// signed by one of hostKeys and cosigned by at least quorum of ws. It fails, naming what it
// found, when no head is.
func CheckLedger(l *ledger.Ledger, hostKeys []signature.Verifier, ws []*Verifier, quorum int) (*Witnessed, error) {
	if quorum < 1 || quorum > len(ws) {
		return nil, opt.New("witness", "Quorum", fmt.Sprintf("a quorum of %d with %d witness keys given: give 1 to %d", quorum, len(ws), len(ws)))
	}
	var host []note.Verifier
	for _, k := range hostKeys {
		v, err := ledger.NewVerifier(l.Origin, k)
		if err != nil {
			return nil, err
		}
		host = append(host, v)
	}
	best := map[string]uint64{} // witness -> largest size it cosigned here
	for i := len(l.Heads) - 1; i >= 0; i-- {
		signed := l.Heads[i]
		if _, err := note.Open([]byte(signed), note.VerifierList(host...)); err != nil {
			continue // not the host's (the reader's keys): counts for nothing
		}
		body, _, _ := strings.Cut(signed, "\n\n")
		cp, err := ledger.ParseCheckpoint(body + "\n")
		if err != nil {
			continue
		}
		by, notBy := Cosigned(signed, ws)
		for _, w := range by {
			best[w] = max(best[w], cp.Size)
		}
		if len(by) >= quorum {
			return &Witnessed{Head: cp, Signed: signed, By: by, NotBy: notBy, After: l.Head.Size - cp.Size}, nil
		}
	}
	var seen []string
	for _, w := range ws {
		if s, ok := best[w.Name()]; ok {
			seen = append(seen, fmt.Sprintf("%s cosigned size %d", w.Name(), s))
		} else {
			seen = append(seen, w.Name()+" cosigned nothing here")
		}
	}
	slices.Sort(seen)
	return nil, fmt.Errorf("ledger %s: no head carries %d cosignatures of the given witnesses (%s); the host has not shown this ledger to them, or showed them another", l.Name, quorum, strings.Join(seen, "; "))
}

// signedBody is a signed note's text and its blank line, without the signature lines; sigLines
// the signature lines.
func signedBody(signed string) string {
	body, _, _ := strings.Cut(signed, "\n\n")
	return body + "\n\n"
}

func sigLines(signed string) string {
	_, sigs, _ := strings.Cut(signed, "\n\n")
	return sigs
}
