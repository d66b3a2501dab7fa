package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
)

// headTimestampSuffix names the RFC 3161 timestamp of a ledger export's witnessed head, written
// beside it (ledger-host.jsonl.tsr).
const headTimestampSuffix = ".tsr"

// timestampHead asks the timestamp authority at url (its chain at chainPath) for a timestamp
// over signed (a witnessed head: its note and every signature line, exactly as the export
// carries it) and writes the authority's answer (a DER TimeStampResp) to path, atomically.
func timestampHead(ctx context.Context, url, chainPath, signed, path string) (time.Time, string, error) {
	chain, err := attest.LoadTSAChain(chainPath)
	if err != nil {
		return time.Time{}, "", usage(fmt.Errorf("--tsa-chain: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := (&attest.TSA{URL: url, Chain: chain}).Timestamp(ctx, http.DefaultClient, []byte(signed))
	if err != nil {
		return time.Time{}, "", ioError(fmt.Errorf("timestamp the witnessed head: %w; the export is written, without a timestamp", err))
	}
	at, name, err := attest.CheckTimestamp(resp, []byte(signed), chain)
	if err != nil {
		return time.Time{}, "", ioError(err)
	}
	if err := fileio.WriteFile(path, resp, 0o644); err != nil {
		return time.Time{}, "", ioError(err)
	}
	return at, name, nil
}

// headTimestampReport is what ledger verify --tsa-chain found.
type headTimestampReport struct {
	File string    `json:"file"`
	Size uint64    `json:"head_size"`
	Time time.Time `json:"time"`
	TSA  string    `json:"tsa"`
}

// checkHeadTimestamp checks the timestamp in file against the heads of l with the authority's
// chain: it must be over one of them (the exact text the export carries), signed by that
// authority for time-stamping.
func checkHeadTimestamp(l *ledger.Ledger, file string, chain []*x509.Certificate) (*headTimestampReport, error) {
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no timestamp at %s (sealrun ledger export --witnessed N --tsa URL writes one beside the export)", file)
	}
	der, err := fileio.ReadLimited(file, "timestamp", attest.MaxTimestampResponse)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for i := len(l.Heads) - 1; i >= 0; i-- {
		at, name, err := attest.CheckTimestamp(der, []byte(l.Heads[i]), chain)
		if err == nil {
			body, _, _ := strings.Cut(l.Heads[i], "\n\n")
			cp, _ := ledger.ParseCheckpoint(body + "\n")
			return &headTimestampReport{File: file, Size: cp.Size, Time: at, TSA: name}, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%s: the timestamp is of no head of this ledger, or not by the given authority (%v)", file, lastErr)
}
