package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/tpm"
	"github.com/sealrun/sealrun/verify"
)

// BenchmarkVerifyPublicationTPM: sealrun verify-publication --tpm of a publication of 1,000 runs
// signed in a TPM (Debian's swtpm) and each quoted by it, sealrund measured into PCR 23 (tpm-s),
// against the same publication checked without --tpm, the quotes allowed unchecked (base-s): what
// checking the hardware root adds (no target: a reader pays it once). What it costs the host, a
// signature and a quote a run, is package tpm's BenchmarkSign and BenchmarkQuote.
func BenchmarkVerifyPublicationTPM(b *testing.B) {
	const n = 1000
	sw := testenv.Swtpm(b)
	dev, err := tpm.Open(sw.Socket)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	keys, err := tpm.LoadKeys(dev)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	e, err := keys.Enroll()
	if err != nil {
		b.Fatal(err)
	}
	enrollment := filepath.Join(dir, "enrollment.json")
	eb, _ := json.Marshal(e)
	os.WriteFile(enrollment, eb, 0o644)
	pemKey, _ := pemPublic(keys.SigningKey())
	pub := filepath.Join(dir, "signing-key.pem")
	os.WriteFile(pub, pemKey, 0o644)
	sealrund := sha256.Sum256([]byte("sealrund"))
	events, err := keys.Measure(filepath.Join(dir, "tpm-events.jsonl"), tpm.Event{PCR: 23, SHA256: hex.EncodeToString(sealrund[:]), Type: tpm.EventSealrund, Version: "bench", Time: time.Now().UTC()})
	if err != nil {
		b.Fatal(err)
	}
	akID, _ := tpm.AttestationKeyID(keys.AttestationKey())
	host := &benchHost{info: &attest.TPMInfo{AttestationKey: akID, PCRs: []int{0, 7, 23}, SealrundPCR: 23}, quote: func(payload []byte) ([]byte, error) {
		nonce := sha256.Sum256(payload)
		q, err := keys.Quote(nonce[:], []int{0, 7, 23})
		if err != nil {
			return nil, err
		}
		return json.Marshal(&tpm.RunQuote{Format: tpm.RunQuoteFormat, Quote: *q, Events: events})
	}}
	pubDir := benchPublicationBy(b, n, keys.Signer(), pub, host, hex.EncodeToString(sealrund[:]))
	var withTPM, without time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		var out bytes.Buffer
		r, err := verify.Publication(pubDir, verify.Options{Keys: []string{pub}, Log: &out, TPM: verify.TPMOptions{Enrollment: enrollment, EKRoots: []string{sw.RootCA}, EKIntermediates: []string{sw.Issuer}}})
		if err != nil || !r.Valid {
			b.Fatalf("--tpm: %v %v\n%s", err, r.Problems(), out.String())
		}
		t1 := time.Now()
		r, err = verify.Publication(pubDir, verify.Options{Keys: []string{pub}, Log: &out, AllowUnchecked: []string{"runs/*/" + attest.TPMQuoteFile}})
		if err != nil || !r.Valid {
			b.Fatalf("without --tpm: %v %v", err, r.Problems())
		}
		withTPM, without = withTPM+t1.Sub(t0), without+time.Since(t1)
	}
	b.ReportMetric(withTPM.Seconds()/float64(b.N), "tpm-s")
	b.ReportMetric(without.Seconds()/float64(b.N), "base-s")
}
