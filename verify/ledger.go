package verify

import (
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/outcome"
)

// HeadTimestampSuffix names the RFC 3161 timestamp of a ledger export's witnessed head, written
// beside it (ledger-host.jsonl.tsr).
const HeadTimestampSuffix = ".tsr"

// LedgerOptions are what a ledger's check is given.
type LedgerOptions struct {
	Keys  []string // the host's public keys (PEM files or directories of *.pub / *.pem)
	Heads []string // signed heads seen before (files): the ledger must be consistent with each
	// Witnesses (Quorum of them, default all) must have cosigned a head of the ledger.
	Witnesses []*witness.Verifier
	Quorum    int
	// TSAChain is a timestamp authority's chain: the timestamp beside the ledger (Timestamp,
	// default LEDGER.tsr) must be over one of its heads.
	TSAChain  string
	Timestamp string
}

// LedgerDetails is what a ledger's check counted.
type LedgerDetails struct {
	Origin string                  `json:"origin,omitempty"`
	Size   uint64                  `json:"size"`
	Root   string                  `json:"root,omitempty"`
	Runs   int                     `json:"runs"`
	Ended  map[outcome.Outcome]int `json:"ended"`
	Open   []string                `json:"not_ended"`
	Reruns int                     `json:"reruns"`
	// Amended counts the amendments by action (invalidate, legacy, note).
	Amended map[string]int `json:"amended"`
	Heads   []string       `json:"heads_checked"`
	// Witnessed: the largest head the quorum of witnesses cosigned.
	Witnessed *LedgerWitnessed `json:"witnessed,omitempty"`
	// Timestamp: what the timestamp check found.
	Timestamp *HeadTimestamp `json:"timestamp,omitempty"`
}

// LedgerWitnessed is the largest head of a ledger the quorum cosigned.
type LedgerWitnessed struct {
	Size         uint64   `json:"size"`
	By           []string `json:"by"`
	NotBy        []string `json:"not_by"`
	EntriesAfter uint64   `json:"entries_after"`
}

// HeadTimestamp is what a ledger head's timestamp says.
type HeadTimestamp struct {
	File string    `json:"file"`
	Size uint64    `json:"head_size"`
	Time time.Time `json:"time"`
	TSA  string    `json:"tsa"`
}

// Ledger checks a published run ledger (sealrun ledger export): every line, every entry, each run
// queued once before it ends once, every head's root, the last head over all entries signed by a
// trusted key ("ledger"); then each head seen before ("heads"), the witnesses' cosignatures
// ("witnessed") and the head's timestamp ("timestamp"), as o asks.
func Ledger(path string, o LedgerOptions) (*Result, error) {
	if len(o.Keys) == 0 {
		return nil, usageErr(opt.New("verify.LedgerOptions", "Keys", "none given: give the host's public key (a PEM file or a directory of *.pub files)"))
	}
	if o.Timestamp != "" && o.TSAChain == "" {
		return nil, usageErr(opt.New("verify.LedgerOptions", "Timestamp", "is checked with the authority's chain (PEM)", "TSAChain"))
	}
	if o.Quorum == 0 {
		o.Quorum = len(o.Witnesses)
	}
	ks, err := leaderboard.LoadKeys(o.Keys)
	if err != nil {
		return nil, ioErr(err)
	}
	r := &Result{Kind: "ledger", Path: path}
	d := &LedgerDetails{Ended: map[outcome.Outcome]int{}, Open: []string{}, Heads: []string{}, Amended: map[string]int{}}
	l, err := readLedger(path, verifiersOf(ks))
	var bad *ledgerFailure
	switch {
	case errors.As(err, &bad):
		r.fail("ledger", Problem{File: path, Reason: bad.Error()})
		for _, c := range []string{"heads", "witnessed", "timestamp"} {
			r.skip(c, "the ledger did not verify")
		}
		return r.finish(), nil
	case err != nil:
		return nil, err
	}
	r.pass("ledger")
	r.Ledger = d
	d.Origin, d.Size, d.Root = l.Origin, l.Head.Size, hex.EncodeToString(l.Head.Root[:])
	for _, e := range l.Entries {
		switch e.Kind {
		case ledger.KindQueued:
			d.Runs++
			if e.RerunOf != "" {
				d.Reruns++
			}
			if _, ok := l.Ended[e.Run]; !ok {
				d.Open = append(d.Open, e.Run)
			}
		case ledger.KindEnded:
			d.Ended[e.State]++
		case ledger.KindAmended:
			d.Amended[e.Action]++
		}
	}

	if len(o.Heads) == 0 {
		r.skip("heads", "no head seen before given (--head)")
	} else {
		var ps []Problem
		for _, h := range o.Heads {
			b, err := fileio.ReadLimited(h, "head", ledger.MaxCheckpointBytes)
			if err != nil {
				return nil, ioErr(err)
			}
			c, err := ledger.OpenCheckpoint(string(b), l.Origin, verifiersOf(ks))
			if err != nil {
				ps = append(ps, Problem{Reason: fmt.Sprintf("head %s (given to check against): %v", h, err)})
				continue
			}
			if err := l.CheckHead(c, "the head in "+h); err != nil {
				ps = append(ps, Problem{Reason: err.Error()})
				continue
			}
			d.Heads = append(d.Heads, fmt.Sprintf("%s (size %d)", h, c.Size))
		}
		r.record("heads", ps)
	}

	if len(o.Witnesses) == 0 {
		r.skip("witnessed", "no witness's key given (--witness)")
	} else if w, err := witness.CheckLedger(l, verifiersOf(ks), o.Witnesses, o.Quorum); err != nil {
		r.fail("witnessed", Problem{File: path, Reason: err.Error()})
	} else {
		d.Witnessed = &LedgerWitnessed{Size: w.Head.Size, By: w.By, NotBy: w.NotBy, EntriesAfter: w.After}
		r.pass("witnessed")
	}

	if o.TSAChain == "" {
		r.skip("timestamp", "no timestamp authority's chain given (--tsa-chain)")
	} else {
		chain, err := attest.LoadTSAChain(o.TSAChain)
		if err != nil {
			return nil, usageErr(opt.Wrap("verify.LedgerOptions", "TSAChain", err))
		}
		tsr := o.Timestamp
		if tsr == "" {
			tsr = path + HeadTimestampSuffix
		}
		if d.Timestamp, err = CheckHeadTimestamp(l, tsr, chain); err != nil {
			r.fail("timestamp", Problem{File: tsr, Reason: err.Error()})
		} else {
			r.pass("timestamp")
		}
	}
	return r.finish(), nil
}

// record is pass or fail, as ps is empty or not.
func (r *Result) record(name string, ps []Problem) {
	if len(ps) > 0 {
		r.fail(name, ps...)
	} else {
		r.pass(name)
	}
}

type ledgerFailure struct{ err error }

func (e *ledgerFailure) Error() string { return e.err.Error() }

// readLedger reads and verifies the ledger at path; a ledger that does not verify is a
// *ledgerFailure.
func readLedger(path string, vs []signature.Verifier) (*ledger.Ledger, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ioErr(err)
	}
	defer f.Close()
	l, err := ledger.Read(io.LimitReader(f, leaderboard.MaxLedgerBytes), path, vs)
	if err != nil {
		return nil, &ledgerFailure{err}
	}
	return l, nil
}

func verifiersOf(ks []leaderboard.Key) []signature.Verifier {
	vs := make([]signature.Verifier, len(ks))
	for i, k := range ks {
		vs[i] = k.Verifier
	}
	return vs
}

// CheckHeadTimestamp checks the timestamp in file against the heads of l with the authority's
// chain: it must be over one of them (the exact text the export carries), signed by that
// authority for time-stamping.
func CheckHeadTimestamp(l *ledger.Ledger, file string, chain []*x509.Certificate) (*HeadTimestamp, error) {
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no timestamp at %s (sealrun ledger export --witnessed N --tsa URL writes one beside the export)", file)
	}
	der, err := fileio.ReadLimited(file, "timestamp", attest.MaxTimestampResponse)
	if err != nil {
		return nil, err
	}
	at, name, i, err := attest.CheckHeadTimestamp(der, l.Heads, chain)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	body, _, _ := strings.Cut(l.Heads[i], "\n\n")
	cp, _ := ledger.ParseCheckpoint(body + "\n")
	return &HeadTimestamp{File: file, Size: cp.Size, Time: at, TSA: name}, nil
}

// WriteLedger writes a ledger's verdict for a reader.
func WriteLedger(w io.Writer, r *Result) {
	if !r.Valid {
		fmt.Fprintf(w, "%s: NOT VALID (%s)\n", r.Path, r.Reason)
		for _, p := range r.Problems() {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return
	}
	d := r.Ledger
	fmt.Fprintf(w, "%s: VALID\n", r.Path)
	fmt.Fprintf(w, "  origin     %s\n", d.Origin)
	fmt.Fprintf(w, "  head       %d entries, root %s (signed)\n", d.Size, d.Root)
	var ended []string
	for _, s := range outcome.All {
		ended = append(ended, fmt.Sprintf("%d %s", d.Ended[s], s))
	}
	fmt.Fprintf(w, "  runs       %d queued (%d reruns); ended: %s; not ended: %d\n", d.Runs, d.Reruns, strings.Join(ended, ", "), len(d.Open))
	if n := d.Amended[ledger.ActionInvalidate] + d.Amended[ledger.ActionLegacy] + d.Amended[ledger.ActionNote]; n > 0 {
		notes := "notes"
		if d.Amended[ledger.ActionNote] == 1 {
			notes = "note"
		}
		fmt.Fprintf(w, "  amended    %d invalidated, %d legacy, %d %s\n", d.Amended[ledger.ActionInvalidate], d.Amended[ledger.ActionLegacy], d.Amended[ledger.ActionNote], notes)
	}
	for _, h := range d.Heads {
		fmt.Fprintf(w, "  consistent with %s\n", h)
	}
	if wr := d.Witnessed; wr != nil {
		fmt.Fprintf(w, "  witnessed  head of %d entries cosigned by %s", wr.Size, strings.Join(wr.By, ", "))
		if len(wr.NotBy) > 0 {
			fmt.Fprintf(w, "; not by %s", strings.Join(wr.NotBy, ", "))
		}
		fmt.Fprintf(w, "; %d entries after it not yet witnessed\n", wr.EntriesAfter)
	}
	if ts := d.Timestamp; ts != nil {
		fmt.Fprintf(w, "  timestamp  the head of %d entries existed before %s (%s, RFC 3161, in %s)\n", ts.Size, ts.Time.UTC().Format(time.RFC3339), ts.TSA, ts.File)
	}
}
