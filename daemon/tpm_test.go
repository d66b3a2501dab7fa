package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/buildinfo"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/publish/publishtest"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
	"github.com/sealrun/sealrun/tpm"
)

// A host with [tpm] (Debian's swtpm, manufactured with EK certificates from a CA of the test's
// own): sealrund measures itself at start, signs in the TPM and quotes the run; sealrun verify
// --tpm takes the run with the enrollment and the maker's CA, and says what that shows; VERIFY.md's
// by-hand recipe (jq, xxd, sha256sum and tpm2-tools' tpm2_checkquote, which nobody here wrote)
// takes the quote too. Each forgery a reader may be handed is refused with its reason: another
// TPM's quote, another run's quote, a PCR changed, the event log edited, the quote missing, the
// enrollment of another TPM, and a run made while another sealrund than the recorded build was
// the last one measured.
func TestTPMQuotedRun(t *testing.T) {
	testenv.RequireTool(t, "tpm2_checkquote", "tpm2-tools")
	tb := newTestbed(t)
	cli := sandboxtest.Static(t, "cmd/sealrun")
	sw := testenv.Swtpm(t)
	enrollDir := filepath.Join(tb.base, "tpm")
	if out, err := exec.Command(cli, "tpm", "enroll", "--device", sw.Socket, "--out", enrollDir).CombinedOutput(); err != nil || !strings.Contains(string(out), "[tpm] enrollment = ") {
		t.Fatalf("sealrun tpm enroll: %v\n%s", err, out)
	}
	enrollment := filepath.Join(enrollDir, "enrollment.json")
	pub := filepath.Join(enrollDir, "signing-key.pem")
	tb.cfg.Keys = hostconfig.KeysConfig{Signing: attest.TPMPrefix + sw.Socket, Public: pub}
	tb.cfg.TPM = hostconfig.TPMConfig{Enrollment: enrollment, PCRs: []int{0, 23}}
	ctx := context.Background()
	signer, err := attest.LoadSigner(ctx, tb.cfg.Keys.Signing, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := buildinfo.CurrentBuild("test", "test")
	if err != nil {
		t.Fatal(err)
	}
	// Two starts of sealrund in this boot: both measured, both in the log.
	for range 2 {
		h, err := OpenTPM(tb.cfg, &b)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
	host, err := OpenTPM(tb.cfg, &b)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if len(host.events) != 3 {
		t.Errorf("three starts this boot, %d events logged", len(host.events))
	}
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	run := func(id string, h *HostTPM) string {
		t.Helper()
		x := tb.executor()
		x.Journal, x.Signer, x.Build, x.TPM = tb.journal, signer, &b, h
		agent, _ := controller.ParseAgent("openai/gpt-x@high")
		out, err := x.Execute(ctx, RunSpec{ID: id, Track: tb.track, Agent: agent, Seed: 1, Queued: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Status) != api.StateGraded {
			t.Fatalf("%s: %s (%s)", id, out.Status, out.Reason)
		}
		return filepath.Join(tb.state, "runs", id)
	}
	// The first run through sealrund and the CLI, as an operator makes one: run, gather, publish.
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	x := tb.executor()
	x.Signer, x.Build, x.TPM = signer, &b, host
	// Timestamped too (sigstore's timestamp authority): the TPM's ECDSA signature, as any.
	tsaURL, tsaChain := testenv.TimestampAuthority(t)
	tb.cfg.Timestamp = hostconfig.TimestampConfig{URL: tsaURL, Chain: tsaChain}
	if x.TSA, err = tb.cfg.TSA(); err != nil {
		t.Fatal(err)
	}
	dctx, stop := context.WithCancel(ctx)
	d, err := New(dctx, tb.cfg, x, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := Listen(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apiDone, served := make(chan struct{}), make(chan struct{})
	go func() { d.ServeAPI(dctx, l); close(apiDone) }()
	go func() { d.Serve(dctx); close(served) }()
	var once sync.Once
	stopDaemon := func() { once.Do(func() { stop(); <-served; <-apiDone; d.Close() }) }
	defer stopDaemon()
	sealrun := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(cli, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("sealrun %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	id := strings.TrimSpace(strings.SplitN(sealrun("run", "--socket", tb.cfg.Socket, "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "1", "--detach"), "\n", 2)[0])
	if rec := waitState(t, d, id, api.StateGraded); rec.State != api.StateGraded {
		t.Fatalf("%s: %s (%s)", id, rec.State, rec.Reason)
	}
	results := filepath.Join(tb.base, "results")
	os.MkdirAll(results, 0o755)
	sealrun("results", "gather", "--socket", tb.cfg.Socket, id, results)
	ledgerFile := filepath.Join(tb.base, "ledger.jsonl")
	sealrun("--state-dir", tb.state, "ledger", "export", "--out", ledgerFile)
	pubDir := filepath.Join(tb.base, "publication")
	sealrun("publish", "--out", pubDir, "--key", pub, "--sign-key", attest.TPMPrefix+sw.Socket, "--ledger", ledgerFile, results)
	verifyPub := func(dir string, extra ...string) (string, error) {
		out, err := exec.Command(cli, append([]string{"verify-publication", dir, "--key", pub}, extra...)...).CombinedOutput()
		return string(out), err
	}
	tpmArgs := []string{"--tpm", enrollment, "--ek-ca", sw.RootCA, "--ek-intermediate", sw.Issuer, "--tsa-chain", tsaChain}
	out, err := verifyPub(pubDir, tpmArgs...)
	t.Logf("sealrun verify-publication --tpm:\n%s", out)
	for _, want := range []string{"publication: VALID", "tpm: 1 run(s) quoted by the enrolled TPM", "and may not:"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("verify-publication --tpm: %v, no %q", err, want)
		}
	}
	// Without --tpm the quote stays unchecked: not valid, unless the reader allows it by name.
	if out, err := verifyPub(pubDir, "--tsa-chain", tsaChain); err == nil || !strings.Contains(out, "result.tpm.json: unchecked") && !strings.Contains(out, "checked only against the host's TPM enrollment") {
		t.Errorf("verify-publication without --tpm: %v\n%s", err, out)
	}
	// A quote forged in the publication, its sums rewritten: NOT VALID naming the run.
	forged := filepath.Join(t.TempDir(), "publication")
	if err := publishtest.Forge(pubDir, forged, publishtest.Tampering{Name: "the event log edited", Change: func(dir string) error {
		qf := filepath.Join(dir, "runs", id, attest.TPMQuoteFile)
		q := strings.Replace(string(mustRead(t, qf)), `\"version\":\"test\"`, `\"version\":\"v1.0.0\"`, 1)
		return os.WriteFile(qf, []byte(q), 0o644)
	}}); err != nil {
		t.Fatal(err)
	}
	if out, err := verifyPub(forged, tpmArgs...); err == nil || !strings.Contains(out, "runs/"+id+": "+attest.TPMQuoteFile) || !strings.Contains(out, "(event-log)") {
		t.Errorf("a publication with its quote's event log edited: %v\n%s", err, out)
	}

	dir := filepath.Join(results, id)
	if _, err := os.Stat(filepath.Join(dir, attest.TPMQuoteFile)); err != nil {
		dir = filepath.Join(tb.state, "runs", id)
	}
	att := filepath.Join(dir, "result.att.json")
	verifyRun := func(att string, extra ...string) (string, error) {
		args := append([]string{"verify", att, "--key", pub, "--tpm", enrollment, "--ek-ca", sw.RootCA, "--ek-intermediate", sw.Issuer}, extra...)
		out, err := exec.Command(cli, args...).CombinedOutput()
		return string(out), err
	}
	out, err = verifyRun(att, "--tsa-chain", tsaChain)
	t.Logf("sealrun verify --tpm:\n%s", out)
	if err != nil || !strings.Contains(out, "timestamp  existed before") {
		t.Errorf("the run's timestamp, over the TPM's signature: %v", err)
	}
	// sigstore-go (cosign v3's library) takes the bundle with the TPM's ECDSA key and a trusted
	// root of the authority (VERIFY.md's recipe).
	doc, _ := os.ReadFile("../attest/VERIFY.md")
	_, rest, _ := strings.Cut(string(doc), "# trusted_root.json: the timestamp authority's chain")
	_, rest, _ = strings.Cut(rest, "\n")
	rootScript, _, _ := strings.Cut(rest, "```")
	w := t.TempDir()
	os.Symlink(tsaChain, filepath.Join(w, "tsa-chain.pem"))
	rc := exec.Command("bash", "-euo", "pipefail", "-c", rootScript)
	rc.Dir = w
	if o, err := rc.CombinedOutput(); err != nil {
		t.Fatalf("VERIFY.md's trusted root recipe: %v\n%s", err, o)
	}
	if o, _ := exec.Command(testenv.SigstoreVerify(t), attest.BundlePath(att), filepath.Join(w, "trusted_root.json"), pub).CombinedOutput(); !strings.Contains(string(o), "Verified OK") {
		t.Errorf("sigstore-go on the TPM-signed, timestamped bundle: %s", o)
	}
	for _, want := range []string{": VALID", "quote by attestation key", "may be concluded:", "exists only in a TPM", "measured itself into PCR 23", "3 start(s) that boot", "the TPM maker's CA certified", "may not:", "what the boot measured into PCR(s) 0: they are quoted as it left them, and the host gave no event log"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("sealrun verify --tpm: %v, no %q in\n%s", err, want, out)
		}
	}
	// Without the maker's CA, not valid unless the reader accepts that by name.
	if o, err := exec.Command(cli, "verify", att, "--key", pub, "--tpm", enrollment).CombinedOutput(); err == nil || !strings.Contains(string(o), "the TPM maker's CA") {
		t.Errorf("--tpm without --ek-ca: %v\n%s", err, o)
	}
	if o, err := exec.Command(cli, "verify", att, "--key", pub, "--tpm", enrollment, "--allow-unchecked-ek").CombinedOutput(); err != nil || !strings.Contains(string(o), "whose TPM it is") {
		t.Errorf("--tpm --allow-unchecked-ek: %v\n%s", err, o)
	}
	// Without --tpm: the check is not made, and says what would check it.
	if o, _ := exec.Command(cli, "verify", att, "--key", pub).CombinedOutput(); !strings.Contains(string(o), "tpm: the run carries a TPM quote") {
		t.Errorf("without --tpm:\n%s", o)
	}

	// VERIFY.md's recipe, run as written.
	_, rest, ok := strings.Cut(string(doc), "jq -r .quote.attest result.tpm.json")
	script, _, ok2 := strings.Cut("jq -r .quote.attest result.tpm.json"+rest, "```")
	if !ok || !ok2 {
		t.Fatal("VERIFY.md has no tpm2_checkquote recipe")
	}
	recipe := func(d string) (string, error) {
		os.WriteFile(filepath.Join(d, "attestation-key.pem"), mustRead(t, filepath.Join(enrollDir, "attestation-key.pem")), 0o644)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = d
		o, err := cmd.CombinedOutput()
		return string(o), err
	}
	copyRun := func() string {
		d := filepath.Join(t.TempDir(), "run")
		os.MkdirAll(d, 0o755)
		for _, f := range []string{"result.att.json", attest.TPMQuoteFile} {
			os.WriteFile(filepath.Join(d, f), mustRead(t, filepath.Join(dir, f)), 0o644)
		}
		return d
	}
	good := copyRun()
	if o, err := recipe(good); err != nil || !sameReplay(o) {
		t.Errorf("VERIFY.md's recipe: %v\n%s", err, o)
	} else {
		t.Logf("VERIFY.md's recipe:\n%s", o)
	}

	// The forgeries.
	var rq tpm.RunQuote
	json.Unmarshal(mustRead(t, filepath.Join(dir, attest.TPMQuoteFile)), &rq)
	forge := func(name, want string, f func(d string, rq *tpm.RunQuote)) {
		t.Helper()
		d := copyRun()
		c := rq
		c.Events = append([]string(nil), rq.Events...)
		c.Quote.PCRs = append([]tpm.PCR(nil), rq.Quote.PCRs...)
		f(d, &c)
		if c.Format != "" {
			bs, _ := json.Marshal(&c)
			os.WriteFile(filepath.Join(d, attest.TPMQuoteFile), bs, 0o644)
		}
		out, err := verifyRun(filepath.Join(d, "result.att.json"))
		if err == nil || !strings.Contains(out, "NOT VALID (tpm)") || !strings.Contains(out, want) {
			t.Errorf("%s: %v; want NOT VALID (tpm) naming %q:\n%s", name, err, want, out)
		}
	}
	other := testenv.Swtpm(t)
	od, err := tpm.Open(other.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer od.Close()
	ok2keys, err := tpm.LoadKeys(od)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := attest.EnvelopePayload(mustRead(t, att))
	nonce := sha256.Sum256(payload)
	forge("another TPM's quote of this statement", "(signature)", func(_ string, rq *tpm.RunQuote) {
		q, err := ok2keys.Quote(nonce[:], []int{0, 23})
		if err != nil {
			t.Fatal(err)
		}
		rq.Quote = *q
	})
	forge("a PCR changed", "(pcr)", func(_ string, rq *tpm.RunQuote) { rq.Quote.PCRs[0].SHA256 = strings.Repeat("0", 63) + "1" })
	forge("an event edited", "(event-log)", func(_ string, rq *tpm.RunQuote) {
		rq.Events[0] = strings.Replace(rq.Events[0], `"version":"test"`, `"version":"v9"`, 1)
	})
	forge("an event left out", "(event-log)", func(_ string, rq *tpm.RunQuote) { rq.Events = rq.Events[1:] })
	forge("the quote missing", "result.tpm.json: missing", func(d string, rq *tpm.RunQuote) {
		os.Remove(filepath.Join(d, attest.TPMQuoteFile))
		rq.Format = ""
	})
	forge("the quote file hostile", "not a run's TPM quote", func(d string, rq *tpm.RunQuote) {
		os.WriteFile(filepath.Join(d, attest.TPMQuoteFile), []byte(`{"format":"sealrun-tpm-quote/v1","quote":{},"events":[],"bonus":1}`), 0o644)
		rq.Format = ""
	})
	// Another TPM's enrollment: the attestation was not signed in it.
	otherDir := filepath.Join(tb.base, "tpm-other")
	if o, err := exec.Command(cli, "tpm", "enroll", "--device", other.Socket, "--out", otherDir).CombinedOutput(); err != nil {
		t.Fatalf("enroll the other TPM: %v\n%s", err, o)
	}
	if o, err := exec.Command(cli, "verify", att, "--key", pub, "--tpm", filepath.Join(otherDir, "enrollment.json"), "--ek-ca", other.RootCA, "--ek-intermediate", other.Issuer).CombinedOutput(); err == nil || !strings.Contains(string(o), "not by the enrollment's TPM signing key") {
		t.Errorf("another TPM's enrollment: %v\n%s", err, o)
	}

	// Another sealrund starts (a build other than the one the runs record) and the host goes on
	// making runs that record the first: its quote shows the other one measured last.
	stopDaemon()
	host.Close()
	impostor := b
	s := sha256.Sum256([]byte("another sealrund"))
	impostor.DaemonSHA256 = hex.EncodeToString(s[:])
	h2, err := OpenTPM(tb.cfg, &impostor)
	if err != nil {
		t.Fatal(err)
	}
	dir2 := run("run-tpm-2", h2)
	if out, err := verifyRun(filepath.Join(dir2, "result.att.json")); err == nil || !strings.Contains(out, "NOT VALID (tpm)") || !strings.Contains(out, "(sealrund)") {
		t.Errorf("a run made after another sealrund was measured: %v\n%s", err, out)
	}
	// The recorded sealrund starts again after it: its runs verify, and the verdict names the
	// other build that started before it in that boot.
	h2.Close()
	h3, err := OpenTPM(tb.cfg, &b)
	if err != nil {
		t.Fatal(err)
	}
	defer h3.Close()
	dir3 := run("run-tpm-3", h3)
	if out, err := verifyRun(filepath.Join(dir3, "result.att.json")); err != nil || !strings.Contains(out, ": VALID") || !strings.Contains(out, "1 earlier start(s) that boot of another sealrund") {
		t.Errorf("a run of the recorded sealrund, started again after another: %v\n%s", err, out)
	}
	// The TPM fails the quote (here: its connection closed after sealrund measured itself):
	// the host's fault, so the run is invalid, its attestation signed all the same and saying why,
	// with no quote; a reader with --tpm refuses it.
	h4, err := OpenTPM(tb.cfg, &b)
	if err != nil {
		t.Fatal(err)
	}
	h4.Close()
	x4 := tb.executor()
	x4.Journal, x4.Signer, x4.Build, x4.TPM = tb.journal, signer, &b, h4
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	o4, err := x4.Execute(ctx, RunSpec{ID: "run-tpm-4", Track: tb.track, Agent: agent, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if string(o4.Status) != api.StateInvalid || !strings.Contains(o4.Reason, "TPM quote: ") {
		t.Errorf("a quote the TPM failed: %s (%s); want invalid, the reason naming the quote", o4.Status, o4.Reason)
	}
	dir4 := filepath.Join(tb.state, "runs", "run-tpm-4")
	if _, err := os.Stat(filepath.Join(dir4, attest.TPMQuoteFile)); !os.IsNotExist(err) {
		t.Errorf("a run whose quote failed has %s: %v", attest.TPMQuoteFile, err)
	}
	if out, err := exec.Command(cli, "verify", filepath.Join(dir4, "result.att.json"), "--key", pub).CombinedOutput(); err != nil || !strings.Contains(string(out), "tpm        none: the TPM's quote failed") {
		t.Errorf("its attestation, without --tpm: %v\n%s", err, out)
	}
	if out, err := verifyRun(filepath.Join(dir4, "result.att.json")); err == nil || !strings.Contains(out, "the run has no TPM quote") {
		t.Errorf("its attestation, with --tpm: %v\n%s", err, out)
	}
	// That run's quote, replayed beside the first run's attestation: another statement.
	forge("another run's quote", "(nonce)", func(_ string, rq *tpm.RunQuote) {
		json.Unmarshal(mustRead(t, filepath.Join(dir2, attest.TPMQuoteFile)), rq)
	})
}

// sameReplay says whether VERIFY.md's recipe printed the same digest replayed and quoted.
func sameReplay(out string) bool {
	var replayed, quoted string
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "replayed "); ok {
			replayed = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "quoted   "); ok {
			quoted = strings.TrimSpace(v)
		}
	}
	return replayed != "" && replayed == quoted
}

// At start, the boot's event log (a real machine's, go-attestation's test data, extended into
// swtpm as its firmware did) is kept for the quotes when it gives the PCRs quoted their values,
// and a PCR extended after the boot is refused by name. The kernel's path for a device, none for
// a socket.
func TestBootLogAtStart(t *testing.T) {
	boot := filepath.Join(testenv.GoModuleDir(t, "github.com/google/go-attestation", "v0.6.4"), "attest", "testdata", "crypto_agile_eventlog")
	b, err := os.ReadFile(boot)
	if err != nil {
		t.Fatal(err)
	}
	events, err := tpm.ParseBootLog(b)
	if err != nil {
		t.Fatal(err)
	}
	sw := testenv.Swtpm(t)
	dev, err := tpm.Open(sw.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	keys, err := tpm.LoadKeys(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Type != 3 && e.PCR >= 1 && e.PCR <= 7 {
			keys.Extend(e.PCR, e.SHA256)
		}
	}
	if got, err := readBootLog(boot, keys, []int{2, 4, 7, 10, 23}, 23); err != nil || len(got) != len(b) {
		t.Errorf("the boot's log, its PCRs as the boot left them: %d bytes, %v", len(got), err)
	}
	if got, err := readBootLog(filepath.Join(t.TempDir(), "none"), keys, []int{2, 23}, 23); err != nil || got != nil {
		t.Errorf("no log: %v %v", got, err)
	}
	other := sha256.Sum256([]byte("after the boot"))
	keys.Extend(4, other[:])
	if _, err := readBootLog(boot, keys, []int{2, 4, 23}, 23); err == nil || !strings.Contains(err.Error(), "PCR 4 is ") || !strings.Contains(err.Error(), "leave it out of [tpm] pcrs") {
		t.Errorf("a PCR extended after the boot: %v", err)
	}
	for dev, want := range map[string]string{"/dev/tpmrm0": "/sys/kernel/security/tpm0/binary_bios_measurements", "/dev/tpm1": "/sys/kernel/security/tpm1/binary_bios_measurements", sw.Socket: "", "/dev/tpmrmx": ""} {
		if got := bootLogPath(dev); got != want {
			t.Errorf("bootLogPath(%s) = %q; want %q", dev, got, want)
		}
	}
}
