package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/images"
	"github.com/sealrun/sealrun/images/builder"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/kits"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// addExam builds a synthetic exam into the content store and returns its hash.
func addExam(t testing.TB, state string, seed uint64, n int) string {
	t.Helper()
	var buf bytes.Buffer
	exams.WriteDocuments(&buf, exams.Synthesize(seed, n))
	qs, err := exams.ReadDocuments("synth", &buf)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "exam")
	sum, err := exams.WriteFile(tmp, qs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	addContent(t, state, mustRead(t, tmp))
	return sum
}

func addContent(t testing.TB, state string, b []byte) string {
	t.Helper()
	p := api.ContentPath(state, digest.Hex(sha(b)))
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return sha(b)
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agentScript is a scripted scaffold: it uses runner as an agent would.
const agentScript = `set -u
echo "agent: $SEALRUN_AGENT, brief: $(head -1 "$SEALRUN_BRIEF")"
runner python3 -c 'print("training on", open("/workspace/validation.sealrun").readline()[:40])'
mkdir -p b1 && cp sealrun-bundle.json predict.py b1/
out=$(runner submit b1); echo "$out"
id=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p')
mkdir -p b2 && cp sealrun-bundle.json predict.py b2/ && echo '# v2' >> b2/predict.py
runner submit b2
runner history
PROMOTE
`

// testbed is a sealed-run host for tests: content store with exam, validation set and brief,
// a demo-like track pinned to the local images, a fake provider, the kit with the example
// bundle and a scripted agent.
type testbed struct {
	h         *sandbox.Host
	cfg       *hostconfig.Config
	track     *policy.Track
	trackTOML string
	signer    signature.Signer
	verifier  signature.Verifier
	store     *images.Store
	journal   *Journal
	kit       string
	state     string
	base      string
	prov      *scriptedmodel.Provider
}

func newTestbed(t testing.TB) *testbed {
	t.Helper()
	testenv.RequireRoot(t)
	h := sandboxtest.Host(t)
	imgs := sandboxtest.LocalImages(t)
	refs := testenv.LocalImages(t).Refs
	ctx := context.Background()

	base := t.TempDir()
	os.Chmod(base, 0o711)
	state := filepath.Join(base, "state")
	os.MkdirAll(state, 0o711)
	examSHA := addExam(t, state, 1, 12)
	k := testKit(t, state)
	valSHA, _ := k.File(kits.ValidationPath)

	trackText := string(mustRead(t, "../tracks/demo.toml"))
	for old, repl := range map[string]string{
		strings.Repeat("a", 64): examSHA, strings.Repeat("b", 64): string(valSHA.SHA256), strings.Repeat("c", 64): string(k.Hash),
		strings.Repeat("f", 64): builder.DemoScaffoldConfigSHA256(),
		"questions = 40":        "questions = 12", `wall = "6m"`: `wall = "3m"`, `call_limit = "2m"`: `call_limit = "1m"`, `reserve = "1m"`: `reserve = "30s"`,
		`grading = "3m"`: `grading = "2m"`, `memory = "3GiB"`: `memory = "1GiB"`, `workspace = "2GiB"`: `workspace = "64MiB"`,
	} {
		trackText = strings.Replace(trackText, old, repl, 1)
	}
	for _, line := range strings.Split(trackText, "\n") {
		for role, key := range map[string]string{"controller": "demo-controller", "runner": "python", "grader": "python"} {
			if strings.HasPrefix(line, role+" = ") {
				trackText = strings.Replace(trackText, line, fmt.Sprintf("%s = %q", role, refs[key]), 1)
			}
		}
	}
	track, err := policy.Parse("demo-test.toml", []byte(trackText))
	if err != nil {
		t.Fatal(err)
	}

	prov := scriptedmodel.New()
	t.Cleanup(prov.Close)
	keyFile := filepath.Join(base, "provider.key")
	os.WriteFile(keyFile, []byte("real-key\n"), 0o600)
	signer, err := attest.LoadSigner(ctx, "../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	verifier, _, err := attest.LoadVerifier("../attest/testdata/ed25519.pub")
	if err != nil {
		t.Fatal(err)
	}
	store, err := images.OpenStore(imgs2State(t))
	if err != nil {
		t.Fatal(err)
	}
	journal, err := OpenJournal(filepath.Join(state, "journal.jsonl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { journal.Close() })

	kit := filepath.Join(base, "kit")
	os.MkdirAll(kit, 0o755)
	os.WriteFile(filepath.Join(kit, "sealrun-bundle.json"), mustRead(t, "../grader/example/sealrun-bundle.json"), 0o644)
	os.WriteFile(filepath.Join(kit, "predict.py"), mustRead(t, "../grader/example/predict.py"), 0o644)
	cfg := &hostconfig.Config{StateDir: state, Runtime: "runc", Runner: sandboxtest.Static(t, "cmd/runner"), File: "test.toml",
		Providers: map[string]controller.ProviderConfig{"openai": {Name: "openai", Kind: "openai", BaseURL: prov.URL + "/v1", KeyFile: keyFile}}}
	_ = imgs

	return &testbed{h: h, cfg: cfg, track: track, trackTOML: trackText, signer: signer, verifier: verifier, store: store, journal: journal, kit: kit, state: state, base: base, prov: prov}
}

// testKit builds and installs the testbed's kit: a brief and the validation set (6 synthetic
// questions, seed 2). The tests' agents and bundles come from the overlay (Executor.TestOverlay).
func testKit(t testing.TB, state string) *kits.Kit {
	t.Helper()
	src := filepath.Join(t.TempDir(), "kitsrc")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "BRIEF.md"), []byte("# The task\nTrain a byte-level model; submit it.\n"), 0o644)
	os.WriteFile(filepath.Join(src, kits.RecipeName), []byte("name = \"test\"\nversion = \"1\"\nfiles = [\"BRIEF.md\"]\n[synthetic]\nseed = 77\nquestions = 20\n[validation]\nseed = 2\nquestions = 6\ncontext_bytes = 1024\n"), 0o644)
	built := filepath.Join(t.TempDir(), "kit")
	if _, err := kits.Build(os.DirFS(src), src, built, kits.BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	k, err := kits.Install(built, filepath.Join(state, "kits"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// executor runs the scripted agent (kit/agent.sh) on the testbed; tests set what differs.
func (tb *testbed) executor() *Executor {
	return &Executor{Cfg: tb.cfg, Host: tb.h, Store: tb.store, Signer: tb.signer, Version: "test", Commit: "test",
		Entrypoint: []string{"sh", "/workspace/agent.sh"}, TestOverlay: tb.kit}
}

func TestExecuteSealedRun(t *testing.T) {
	tb := newTestbed(t)
	track, verifier, journal, kit, state := tb.track, tb.verifier, tb.journal, tb.kit, tb.state
	ctx := context.Background()
	for _, c := range []struct {
		id, promote, want string
	}{
		{"run-graded", `runner finalize "$id"`, api.StateGraded},
		{"run-no-promote", `echo "never promotes"`, api.StateFailed},
	} {
		t.Run(c.want, func(t *testing.T) {
			os.WriteFile(filepath.Join(kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", c.promote, 1)), 0o755)
			x := tb.executor()
			x.Journal = journal
			agent, _ := controller.ParseAgent("openai/gpt-x@high")
			start := time.Now()
			out, err := x.Execute(ctx, RunSpec{ID: c.id, Track: track, Agent: agent, Seed: 1, Queued: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(state, "runs", c.id)
			t.Logf("%s: %s %q in %s; score %d/%d\ntranscript:\n%s", c.id, out.Status, out.Reason, time.Since(start).Round(time.Millisecond),
				out.Report.Score.Passed, out.Report.Score.Questions, mustRead(t, filepath.Join(dir, "transcript.log")))
			if string(out.Status) != c.want {
				t.Fatalf("status %s (%s); want %s", out.Status, out.Reason, c.want)
			}
			// The attestation verifies with every file, as sealrun verify would check it.
			af, _ := os.Open(filepath.Join(dir, "audit.jsonl"))
			defer af.Close()
			opts := []attest.VerifyOption{attest.WithReportDigest(sha(mustRead(t, filepath.Join(dir, "report.json")))), attest.WithAuditLog(af), attest.WithTrack(track)}
			if out.Report.Candidate.ID != "" {
				cand := filepath.Join(dir, "candidates", strings.TrimPrefix(string(out.Report.Candidate.ID), "sha256:")+".tar.gz")
				opts = append(opts, attest.WithBundleDigest(sha(mustRead(t, cand))))
			}
			v, err := attest.Verify(mustRead(t, out.Attestation), verifier, opts...)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			// The sealrun verify a user runs, with every file; and openssl on PAE bytes built here
			// by hand from the DSSE spec (a second implementation: neither sealrun nor sigstore).
			trackFile := filepath.Join(t.TempDir(), "track.toml")
			os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
			args := []string{"verify", out.Attestation, "--key", "../attest/testdata/ed25519.pub", "--report", filepath.Join(dir, "report.json"),
				"--audit", filepath.Join(dir, "audit.jsonl"), "--track", trackFile}
			if out.Report.Candidate.ID != "" {
				args = append(args, "--bundle", filepath.Join(dir, "candidates", strings.TrimPrefix(string(out.Report.Candidate.ID), "sha256:")+".tar.gz"))
			}
			if o, err := exec.Command(sandboxtest.Static(t, "cmd/sealrun"), args...).CombinedOutput(); err != nil || !strings.Contains(string(o), "VALID") ||
				!strings.Contains(string(o), "TEST BUILD (test seams compiled in)") || !strings.Contains(string(o), "this run used test seams (entrypoint, overlay)") {
				t.Errorf("sealrun verify with every file (the build and the seams it used shown): %v\n%s", err, o)
			}
			// The build that made it: a test build (these tests set the tag), and which seams.
			if b := v.Statement.Predicate.Build; b == nil || !b.TestSeams || strings.Join(b.SeamsUsed, ",") != "entrypoint,overlay" || len(b.DaemonSHA256) != 64 || b.GoVersion == "" {
				t.Errorf("build: %+v", b)
			}
			var env struct {
				PayloadType string `json:"payloadType"`
				Payload     string `json:"payload"`
				Signatures  []struct{ Sig string }
			}
			json.Unmarshal(mustRead(t, out.Attestation), &env)
			body, _ := base64.StdEncoding.DecodeString(env.Payload)
			sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
			pae := fmt.Sprintf("DSSEv1 %d %s %d ", len(env.PayloadType), env.PayloadType, len(body)) + string(body)
			work := t.TempDir()
			os.WriteFile(filepath.Join(work, "pae"), []byte(pae), 0o644)
			os.WriteFile(filepath.Join(work, "sig"), sig, 0o644)
			if o, err := exec.Command(testenv.RequireTool(t, "openssl", "openssl"), "pkeyutl", "-verify", "-pubin", "-inkey", "../attest/testdata/ed25519.pub", "-rawin",
				"-in", filepath.Join(work, "pae"), "-sigfile", filepath.Join(work, "sig")).CombinedOutput(); err != nil {
				t.Errorf("openssl rejects the daemon's attestation: %v\n%s", err, o)
			}
			p := v.Statement.Predicate
			if p.Run.ID != c.id || len(p.Submissions.History) != 2 || string(p.Result.Status) != c.want || len(p.AirGap.Containers) != 3 {
				t.Errorf("predicate: run %+v, %d candidates, result %+v, %d air-gap containers", p.Run, len(p.Submissions.History), p.Result, len(p.AirGap.Containers))
			}
			// The runtime that ran each role is attested (SEALRUN_TEST_RUNTIME=crun: crun's).
			for _, role := range sandbox.Roles {
				if got, want := p.Host.Runtimes[string(role)], tb.h.RuntimeFor(role).VersionLine; got != want || !strings.Contains(got, " version ") {
					t.Errorf("host.runtimes[%s] = %q; want %q", role, got, want)
				}
			}
			if p.Host.Runtime != tb.h.Runtime.Kind {
				t.Errorf("host.runtime = %q; want %q", p.Host.Runtime, tb.h.Runtime.Kind)
			}
			html := string(mustRead(t, filepath.Join(dir, "report.html")))
			if d := os.Getenv("SEALRUN_KEEP_REPORT"); d != "" {
				os.WriteFile(filepath.Join(d, c.id+".html"), []byte(html), 0o644)
			}
			if !strings.Contains(html, "1 compute calls") || !strings.Contains(html, "2 submissions") || !strings.Contains(html, "<svg") {
				t.Errorf("report.html lacks the activity or the timeline")
			}
			if c.want == api.StateFailed && (p.Result.Passed != 0 || !strings.Contains(p.Result.Reason, "no candidate was promoted")) {
				t.Errorf("failed result: %+v", p.Result)
			}
			for _, f := range []string{"summary.txt", "history.jsonl", "calls", "report.html"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("run directory lacks %s", f)
				}
			}
		})
	}
	// The journal recorded every state, in order, for both runs.
	var states []string
	j2, err := OpenJournal(filepath.Join(state, "journal.jsonl"), func(e api.Event) error {
		if e.Kind == "state" {
			states = append(states, e.Run+":"+e.State)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	j2.Close()
	want := "run-graded:preparing run-graded:running run-graded:grading run-graded:graded run-no-promote:preparing run-no-promote:running run-no-promote:grading run-no-promote:failed"
	if got := strings.Join(states, " "); got != want {
		t.Errorf("journal states:\n%s\nwant\n%s", got, want)
	}
}

func imgs2State(t testing.TB) string { return testenv.LocalImages(t).State }

// A full disk under the run (here: a 64 KiB tmpfs where candidates are stored) makes the run
// invalid with the reason; what was journaled stays, and the attestation says why.
func TestFullDiskMakesRunInvalid(t *testing.T) {
	tb := newTestbed(t)
	id := "run-full-disk"
	cands := filepath.Join(tb.state, "runs", id, "candidates")
	os.MkdirAll(cands, 0o700)
	if err := syscall.Mount("tmpfs", cands, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(cands, 0)
	// The agent submits a 256 KiB bundle of incompressible bytes.
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(`mkdir -p big && cp sealrun-bundle.json predict.py big/
head -c 262144 /dev/urandom > big/weights.bin
runner submit big; echo "submit exit $?"; sleep 600
`), 0o755)
	x := tb.executor()
	x.Journal = tb.journal
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	out, err := x.Execute(context.Background(), RunSpec{ID: id, Track: tb.track, Agent: agent, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != outcome.Invalid || !strings.Contains(out.Reason, "no space left on device") {
		t.Fatalf("status %s (%s); want invalid for the full disk", out.Status, out.Reason)
	}
	transcript := string(mustRead(t, filepath.Join(tb.state, "runs", id, "transcript.log")))
	if !strings.Contains(transcript, "the run ends as the infrastructure's fault") || strings.Contains(transcript, tb.state) {
		t.Errorf("the agent was not told:\n%s", transcript)
	}
	v, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithTrack(tb.track))
	if err != nil || v.Statement.Predicate.Result.Status != outcome.Invalid {
		t.Errorf("attestation: %v", err)
	}
}
