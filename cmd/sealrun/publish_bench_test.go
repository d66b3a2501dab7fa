package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/transcript/transcripttest"
	"github.com/sealrun/sealrun/verify"
)

// BenchmarkVerifyPublication: sealrun verify-publication of a publication of 100 and of 1,000
// runs of the flagship track, each gathered with its audit log of a synthetic agent loop (model
// exchanges and calls), the bodies it hashes and its transcript, all in one host ledger: every
// file against SHA256SUMS, every attestation and the files it binds, every transcript and
// export rebuilt, the ledger's accounting, the boards, the signed manifest (verify-s; target:
// 1,000 runs in <= 2 s, and 10× the runs in <= 11× the time), beside the floors any reader pays:
// every file of it read and hashed once (hash-s), and the ed25519 checks alone, one a run's
// envelope and one the manifest's, on every CPU (sig-floor-s).
func BenchmarkVerifyPublication(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			pub := benchPublication(b, n)
			floor := envelopeFloor(b, pub)
			var took, hash time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				var out bytes.Buffer
				r, err := verify.Publication(pub, verify.Options{Keys: []string{"../../attest/testdata/ed25519.pub"}, Log: &out})
				if err != nil || !r.Valid {
					b.Fatalf("%v %v\n%s", err, r.Problems(), out.String())
				}
				t1 := time.Now()
				hashAll(b, pub)
				took, hash = took+t1.Sub(t0), hash+time.Since(t1)
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "verify-s")
			b.ReportMetric(hash.Seconds()/float64(b.N), "hash-s")
			b.ReportMetric(floor.Seconds(), "sig-floor-s")
		})
	}
}

// benchPublication writes a publication of n runs (seeds 1..n of one agent) and returns it.
func benchPublication(b *testing.B, n int) string {
	b.Helper()
	ctx := context.Background()
	signer, err := attest.LoadSigner(ctx, "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		b.Fatal(err)
	}
	return benchPublicationBy(b, n, signer, "../../attest/testdata/ed25519.pub", nil, "")
}

// benchHost is a TPM host's part in a bench publication: what each statement says of its quote,
// and the quote of a statement's bytes.
type benchHost struct {
	info  *attest.TPMInfo
	quote func(payload []byte) ([]byte, error)
}

// benchPublicationBy is benchPublication signed by signer (whose public key is pubPath), each run
// quoted by tpmHost where it is given, with a build record naming sealrund's SHA-256 where given.
func benchPublicationBy(b *testing.B, n int, signer signature.Signer, pubPath string, tpmHost *benchHost, sealrund string) string {
	b.Helper()
	dir := b.TempDir()
	results := filepath.Join(dir, "results")
	pred, _ := goldenPredicate(b)
	var p map[string]any
	if err := json.Unmarshal(pred, &p); err != nil {
		b.Fatal(err)
	}
	track := p["track"].(map[string]any)["id"].(string)
	trackFile, err := os.ReadFile("../../tracks/ari-v1.toml")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if tpmHost != nil {
		p["tpm"] = tpmHost.info
	}
	if sealrund != "" {
		p["build"] = map[string]any{"version": "bench", "commit": "", "modified": false, "go_version": "go1.26", "sealrund_sha256": sealrund, "test_seams": false}
	}
	state := filepath.Join(dir, "state")
	os.MkdirAll(state, 0o755)
	l, err := ledger.Open(filepath.Join(state, "ledger.jsonl"), "sealrun.ledger/bench-host", signer)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	started, _ := time.Parse(time.RFC3339, "2026-11-21T12:00:10Z")
	for seed := 1; seed <= n; seed++ {
		id := fmt.Sprintf("r-20261124-%06d-b%05d", seed, seed)
		rd := filepath.Join(results, id)
		os.MkdirAll(rd, 0o755)
		report := fmt.Sprintf(`{"run":%q,"seed":%d}`+"\n", id, seed)
		for name, data := range map[string][]byte{"report.json": []byte(report), "summary.txt": []byte("run " + id + "\n"), "track.toml": trackFile} {
			if err := os.WriteFile(filepath.Join(rd, name), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		tr, err := transcripttest.New(rd, started)
		if err != nil {
			b.Fatal(err)
		}
		transcripttest.Conversation(tr, 6, 500, 200, func(i int) string { return fmt.Sprintf("SEED-%d-TURN-%d-OUTPUT\n", seed, i) })
		head, entries := tr.Head()
		tr.Close()
		p["run"] = map[string]any{"id": id, "rerun_of": ""}
		p["seed"] = seed
		p["audit"] = map[string]any{"head": head, "entries": entries}
		res := p["result"].(map[string]any)
		res["passed"], res["score"] = seed%100, seed%100
		pj, _ := json.Marshal(p)
		var pr attest.Predicate
		if err := json.Unmarshal(pj, &pr); err != nil {
			b.Fatal(err)
		}
		reportSum := sha256.Sum256([]byte(report))
		st := attest.NewStatement(&pr,
			attest.NewSubject("bundle.tar.gz", "8694ff758e31db8ecef363d4bfd657ea3a361da85c37d5ba32c7edec188e664d"), // the golden's promoted candidate (not gathered here)
			attest.NewSubject("report.json", hex.EncodeToString(reportSum[:])))
		env, err := attest.Sign(ctx, st, signer)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rd, "result.att.json"), env, 0o644); err != nil {
			b.Fatal(err)
		}
		var e struct{ Payload string }
		json.Unmarshal(env, &e)
		payload, _ := base64.StdEncoding.DecodeString(e.Payload)
		if tpmHost != nil {
			q, err := tpmHost.quote(payload)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(rd, attest.TPMQuoteFile), q, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		ps := sha256.Sum256(payload)
		sc := p["scaffold"].(map[string]any)
		l.Append(&ledger.Entry{Kind: ledger.KindQueued, Run: id, Time: started, Track: track, Scaffold: fmt.Sprint(sc["name"], " ", sc["version"]), Agent: "example-model-2026-10@high", Seed: int64(seed)})
		l.Append(&ledger.Entry{Kind: ledger.KindEnded, Run: id, Time: started, State: "graded", Attestation: digest.HexOf(ps[:])})
	}
	exported := filepath.Join(dir, "ledger-bench-host.jsonl")
	var out bytes.Buffer
	if err := l.Export(&out); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(exported, out.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	pub := filepath.Join(dir, "pub")
	if _, err := publish.Write(publish.Options{Out: pub, Suite: leaderboard.SuiteExam, Keys: []string{pubPath}, Ledgers: []string{exported}, Inputs: []string{results}, Version: "bench", Signer: signer}); err != nil {
		b.Fatal(err)
	}
	return pub
}

// envelopeFloor times the ed25519 checks a reader cannot skip: each run's envelope signature
// (over its DSSE pre-authentication encoding) and the manifest's, read beforehand, on every CPU.
func envelopeFloor(b *testing.B, pub string) time.Duration {
	b.Helper()
	key, err := leaderboard.LoadKeys([]string{"../../attest/testdata/ed25519.pub"})
	if err != nil {
		b.Fatal(err)
	}
	envs, _ := filepath.Glob(filepath.Join(pub, "runs", "*", "result.att.json"))
	envs = append(envs, filepath.Join(pub, publish.ManifestFile))
	type signed struct{ pae, sig []byte }
	all := make([]signed, len(envs))
	for i, p := range envs {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		var e struct {
			PayloadType string `json:"payloadType"`
			Payload     string `json:"payload"`
			Signatures  []struct {
				Sig string `json:"sig"`
			} `json:"signatures"`
		}
		if err := json.Unmarshal(raw, &e); err != nil || len(e.Signatures) != 1 {
			b.Fatalf("%s: %v", p, err)
		}
		payload, _ := base64.StdEncoding.DecodeString(e.Payload)
		sig, _ := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
		all[i] = signed{[]byte(fmt.Sprintf("DSSEv1 %d %s %d %s", len(e.PayloadType), e.PayloadType, len(payload), payload)), sig}
	}
	t0 := time.Now()
	var bad atomic.Int32
	leaderboard.EachParallel(len(all), func(i int) {
		if key[0].Verifier.VerifySignature(bytes.NewReader(all[i].sig), bytes.NewReader(all[i].pae)) != nil {
			bad.Add(1)
		}
	})
	took := time.Since(t0)
	if bad.Load() != 0 {
		b.Fatalf("%d of %d envelopes did not verify", bad.Load(), len(all))
	}
	return took
}

// hashAll reads and hashes every file under dir once.
func hashAll(b *testing.B, dir string) {
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(sha256.New(), f)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}
