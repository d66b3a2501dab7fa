package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
)

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
