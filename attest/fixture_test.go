package attest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
)

// t0 is the fixed clock of every fixture.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func loadTrack(t testing.TB) *policy.Track {
	t.Helper()
	tr, err := policy.Load(filepath.Join("..", "tracks", "ari-v1.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// fixture is a realistic graded run: 100 questions, candidates submissions, audit entries.
func fixture(t testing.TB, candidates, auditEntries int) (*Statement, string) {
	t.Helper()
	p := PredicateFromTrack(loadTrack(t))
	p.Agent = Agent{Model: "example-model-2026-10", ReasoningEffort: "high"}
	p.Host = Host{GPUModel: "NVIDIA H200", GPUDriver: "575.57.08", Runtime: "runc", RuntimeVersion: "1.1.5", Kernel: "6.1.0-26-amd64", SealrunVersion: "0.1.0", SealrunCommit: "ba22fac5e8d8"}
	p.AirGap.Containers = []AirGapContainer{
		// Evidence exactly as the sandbox's network hook records it (netnshook.Read).
		{Role: "controller", Links: []string{"eth0 (veth, up)", "lo (device, up)"}, Addresses: []string{"10.88.0.2/30 eth0", "127.0.0.1/8 lo"},
			Routes: []string{"10.88.0.0/30 dev eth0", "10.88.0.2/32 dev eth0 table 255", "10.88.0.3/32 dev eth0 table 255", "127.0.0.0/8 dev lo table 255", "127.0.0.1/32 dev lo table 255", "127.255.255.255/32 dev lo table 255"}, EgressBlocked: true},
		{Role: "runner", Links: []string{"lo (device, up)"}, Addresses: []string{"127.0.0.1/8 lo"}, Routes: []string{"127.0.0.0/8 dev lo table 255", "127.0.0.1/32 dev lo table 255", "127.255.255.255/32 dev lo table 255"}, EgressBlocked: true},
		{Role: "grader", Links: []string{"lo (device, up)"}, Addresses: []string{"127.0.0.1/8 lo"}, Routes: []string{"127.0.0.0/8 dev lo table 255", "127.0.0.1/32 dev lo table 255", "127.255.255.255/32 dev lo table 255"}, EgressBlocked: true},
	}
	p.Timeline = Timeline{Queued: t0, Started: t0.Add(10 * time.Second), Deadline: t0.Add(10*time.Second + time.Hour), Finished: t0.Add(time.Hour + 12*time.Minute)}
	var bundle string
	for i := 0; i < candidates; i++ {
		d := sum(fmt.Sprintf("candidate %d", i))
		promoted := i == max(0, candidates-3)
		if promoted {
			bundle = d
		}
		p.Submissions.History = append(p.Submissions.History, Submission{Digest: digest.Digest("sha256:" + d), Size: int64(1<<20 + i*1000), Time: p.Timeline.Started.Add(time.Duration(i+1) * time.Minute), ValidationScore: float64(i), Promoted: promoted})
	}
	head, err := HistoryHead(p.Submissions.History)
	if err != nil {
		t.Fatal(err)
	}
	p.Submissions.Head = head
	p.Audit = Audit{Head: auditLogHead(auditEntries), Entries: auditEntries}
	bpb := 1.75
	vector := strings.Repeat("1011", 25)
	p.Result = Result{Status: outcome.Graded, Questions: 100, Passed: 75, Score: 75, PassVectorSHA256: digest.Hex(sum(vector)), BitsPerByte: &bpb}
	p.Seed = 2
	p.Run = RunInfo{ID: "r-20261121-120000-2"}
	return NewStatement(p, NewSubject(SubjectBundle, bundle), NewSubject(SubjectReport, sum("report"))), bundle
}

// auditLog is a synthetic audit log of n entries.
func auditLog(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"seq":%d,"kind":"runner","argv":["python","train.py"],"exit":0}`+"\n", i)
	}
	return b.String()
}

func auditLogHead(n int) string {
	h, _, err := AuditHead(strings.NewReader(auditLog(n)))
	if err != nil {
		panic(err)
	}
	return h
}

func signer(t testing.TB, name string) signature.Signer {
	t.Helper()
	s, err := LoadSigner(context.Background(), filepath.Join("testdata", name+".key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verifier(t testing.TB, name string) signature.Verifier {
	t.Helper()
	v, _, err := LoadVerifier(filepath.Join("testdata", name+".pub"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// opened is a signed envelope taken apart by plain JSON and base64 decoding (no verification),
// as a third party or an attacker sees it.
type opened struct {
	payloadType  string
	payload, sig []byte
}

func openEnvelope(t testing.TB, env []byte) opened {
	t.Helper()
	var e struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			Sig string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, err1 := base64.StdEncoding.DecodeString(e.Payload)
	sig, err2 := base64.StdEncoding.DecodeString(e.Signatures[0].Sig)
	if err1 != nil || err2 != nil {
		t.Fatalf("envelope base64: %v %v", err1, err2)
	}
	return opened{e.PayloadType, payload, sig}
}
