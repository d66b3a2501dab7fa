package daemon

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// sealrun amend as an operator meets it: a graded run noted, then invalidated with a rerun
// queued rerun_of it; what conflicts, what names no run of this host and each malformed flag
// refused, naming it; sealrun show lists the amendments; each signed amendment verifies with the
// host key and is the one its ledger entry names; the exported ledger verifies with them. An
// amendment file a daemon killed before its ledger entry left is removed at the next start.
func TestAmendThroughCLI(t *testing.T) {
	tb := newTestbed(t)
	cli := sandboxtest.Static(t, "cmd/sealrun")
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	tb.cfg.Resources.Concurrency = 1
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.Replace(agentScript, "PROMOTE", `runner finalize "$id"`, 1)), 0o755)
	ctx, stop := context.WithCancel(context.Background())
	d, err := New(ctx, tb.cfg, tb.executor(), slog.New(slog.NewTextHandler(testLogOutput(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { d.Serve(ctx); close(served) }()
	l, err := Listen(tb.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apiDone := make(chan struct{})
	go func() { d.ServeAPI(ctx, l); close(apiDone) }()
	stopped := false
	stopDaemon := func() {
		if !stopped {
			stopped = true
			stop()
			<-served
			<-apiDone
			d.Close()
		}
	}
	defer stopDaemon()
	trackFile := filepath.Join(tb.base, "track.toml")
	os.WriteFile(trackFile, []byte(tb.trackTOML), 0o644)
	sealrun := func(args ...string) (int, string) {
		t.Helper()
		return runCLI(t, cli, append(args, "--socket", tb.cfg.Socket)...)
	}
	code, out := sealrun("run", "--track", trackFile, "--agent", "openai/gpt-x@high", "--seed", "1", "--detach")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run: %d %s", code, out)
	}
	waitState(t, d, id, api.StateGraded)
	results := filepath.Join(tb.base, "results")
	os.MkdirAll(results, 0o755)
	if code, out := sealrun("results", "gather", id, results); code != 0 {
		t.Fatalf("gather before the amendments: %d %s", code, out)
	}

	reason := "the host's memory failed memtest86+ on 2026-11-30"
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no action", []string{"amend", id, "--reason", "x"}, 2, "give one of --invalidate, --legacy or --note"},
		{"two actions", []string{"amend", id, "--legacy", "--note", "--reason", "x"}, 2, "give one of --invalidate, --legacy or --note"},
		{"no reason", []string{"amend", id, "--note"}, 2, "--reason: say why"},
		{"a reason over its bound", []string{"amend", id, "--note", "--reason", strings.Repeat("x", 1025)}, 2, "--reason: say why, for a reader: 1 to 1024 bytes"},
		{"a reason of two lines", []string{"amend", id, "--note", "--reason", "a\nb"}, 2, "--reason"},
		{"a link that is no URL", []string{"amend", id, "--note", "--reason", "x", "--link", "javascript:alert(1)"}, 2, `--link "javascript:alert(1)"`},
		{"a rerun of a note", []string{"amend", id, "--note", "--rerun", "--reason", "x"}, 2, "--rerun goes with --invalidate"},
		{"a run this host never ran", []string{"amend", "r-20260101-000000-abcdef", "--note", "--reason", "x"}, 1, "no run r-20260101-000000-abcdef on this host"},
		{"a note", []string{"amend", id, "--note", "--reason", "a contamination report is under review"}, 0, id + ": amended (note); amendment sha256:"},
		{"an invalidation, rerun", []string{"amend", id, "--invalidate", "--rerun", "--reason", reason, "--link", "https://status.example.org/incident/42"}, 0, ": queued as its rerun"},
		{"then legacy too", []string{"amend", id, "--legacy", "--reason", "x"}, 1, "already amended invalidated: a run takes one invalidation or legacy label, not two"},
		{"invalidated twice", []string{"amend", id, "--invalidate", "--reason", "x"}, 1, "already amended invalidated"},
	} {
		code, out := sealrun(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d %q; want %d %q", c.name, code, out, c.code, c.want)
		}
	}
	// The API refuses what the CLI would not send, naming the field.
	c := client.New(tb.cfg.Socket)
	for _, bad := range []struct {
		req  api.AmendRequest
		want string
	}{
		{api.AmendRequest{Action: "erase", Reason: "x"}, `action: "erase": give invalidate, legacy or note`},
		{api.AmendRequest{Action: "note", Reason: ""}, "reason: an amendment says why"},
		{api.AmendRequest{Action: "note", Reason: strings.Repeat("é", 600)}, "reason: is longer than 1024 bytes"},
		{api.AmendRequest{Action: "note", Reason: "x", Link: "ftp://example.org/r"}, `link: "ftp://example.org/r" is not an http(s) URL`},
		{api.AmendRequest{Action: "legacy", Reason: "x", Rerun: true}, "rerun: only an invalidated run is rerun"},
	} {
		if _, err := c.Amend(t.Context(), id, bad.req); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v; want %q", bad.req, err, bad.want)
		}
	}
	rec, _ := d.Run(id)
	rerun := rec.RerunBy
	if rerun == "" {
		t.Fatal("no rerun queued for the invalidated run")
	}
	waitState(t, d, rerun, api.StateGraded)
	if r, _ := d.Run(rerun); r.RerunOf != id {
		t.Errorf("the rerun is rerun_of %q", r.RerunOf)
	}
	if code, out := sealrun("show", id); code != 0 || !strings.Contains(out, "note: a contamination report is under review") || !strings.Contains(out, "invalidate: "+reason+" (https://status.example.org/incident/42)") {
		t.Errorf("show: %d %s", code, out)
	}
	// Each amendment: signed with the host key, the one its ledger entry names.
	v, _, _ := attest.LoadVerifier("../attest/testdata/ed25519.pub")
	entries := d.ledger.AmendmentsOf(id)
	if len(entries) != 2 {
		t.Fatalf("%d amended entries", len(entries))
	}
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join(rec.Dir, AmendmentsDir, string(e.Amendment)+".att.json"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := attest.VerifyAmendment(env, v)
		if err != nil {
			t.Fatal(err)
		}
		if want := got.Statement.Entry(got.Digest); want.Action != e.Action || want.Reason != e.Reason || want.Attestation != e.Attestation || got.Digest != e.Amendment {
			t.Errorf("the signed amendment %+v is not its ledger entry %+v", want, e)
		}
	}
	// Gathered again: the run is there already, its amendments are added and its transcript says
	// them; the rerun is gathered beside it. The board, with the ledger, applies them.
	if code, out := sealrun("results", "gather", id, results); code != 0 || !strings.Contains(out, "already gathered") {
		t.Errorf("gather after the amendments: %d %s", code, out)
	}
	if code, out := sealrun("results", "gather", rerun, results); code != 0 {
		t.Errorf("gather the rerun: %d %s", code, out)
	}
	if got, _ := filepath.Glob(filepath.Join(results, id, AmendmentsDir, "*.att.json")); len(got) != 2 {
		t.Errorf("%d amendments gathered", len(got))
	}
	if b, _ := os.ReadFile(filepath.Join(results, id, "transcript.json")); !strings.Contains(string(b), `"action":"invalidate"`) {
		t.Errorf("the gathered transcript does not say the amendments")
	}
	led := filepath.Join(tb.base, "ledger.jsonl")
	if out, err := exec.Command(cli, "ledger", "export", "--state-dir", tb.state, "--out", led).CombinedOutput(); err != nil {
		t.Fatalf("export: %v %s", err, out)
	}
	if out, err := exec.Command(cli, "ledger", "verify", led, "--key", "../attest/testdata/ed25519.pub").CombinedOutput(); err != nil || !strings.Contains(string(out), "amended    1 invalidated, 0 legacy, 1 note") {
		t.Errorf("ledger verify: %v %s", err, out)
	}
	out2, err := exec.Command(cli, "leaderboard", "--key", "../attest/testdata/ed25519.pub", results, "--ledger", led).CombinedOutput()
	if err != nil || !strings.Contains(string(out2), id+" → "+rerun) || !strings.Contains(string(out2), "invalidated ") || !strings.Contains(string(out2), "every run accounted for (2 in ") {
		t.Errorf("leaderboard of the amended run and its rerun: %v\n%s", err, out2)
	}
	if out, err := exec.Command(cli, "verify", filepath.Join(results, id, "result.att.json"), "--key", "../attest/testdata/ed25519.pub", "--transcript", filepath.Join(results, id)).CombinedOutput(); err != nil {
		t.Errorf("verify --transcript of the amended run: %v %s", err, out)
	}
	amendReviewed(t, d, tb, cli, sealrun, id)

	// A file a daemon killed between the two left: removed at the next start.
	stray := filepath.Join(rec.Dir, AmendmentsDir, strings.Repeat("0", 64)+".att.json")
	os.WriteFile(stray, []byte("{}"), 0o644)
	stopDaemon()
	d2 := startDaemon(t, tb, tb.executor())
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("an amendment with no ledger entry survived a restart: %v", err)
	}
	if n := len(d2.ledger.AmendmentsOf(id)); n != 2 {
		t.Errorf("%d amendments after a restart", n)
	}
}

// amendReviewed: a run of a track that asks for a reviewer ([amendments] reviewers: the ECDSA
// test key) is amended in three steps — sealrund's draft, the reviewer's signature (sealrun
// amend review), the host's — and nothing else makes an amendment of it: the host alone, an
// unsigned draft, a draft edited after review, one of another run, a draft of a run whose track
// names no reviewer. other is a graded run of the testbed's own track.
func amendReviewed(t *testing.T, d *Daemon, tb *testbed, cli string, sealrun func(...string) (int, string), other string) {
	t.Helper()
	_, pub, err := attest.LoadVerifier("../attest/testdata/ecdsa.pub")
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	reviewed := filepath.Join(tb.base, "reviewed.toml")
	os.WriteFile(reviewed, []byte(tb.trackTOML+"\n[amendments]\nreviewers = [\""+base64.StdEncoding.EncodeToString(der)+"\"]\n"), 0o644)
	code, out := sealrun("run", "--track", reviewed, "--agent", "openai/gpt-x@high", "--seed", "2", "--detach")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("run: %d %s", code, out)
	}
	waitState(t, d, id, api.StateGraded)
	draft := filepath.Join(tb.base, "amend.json")
	reason := "graded before the grader fix of 2026-11-28"
	// sealrun amend review needs no sealrund (and takes no --socket): the reviewer's own machine.
	offline := func(args ...string) (int, string) { return runCLI(t, cli, args...) }
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"the host alone", []string{"amend", id, "--legacy", "--reason", reason}, 1, "asks for a reviewer's signature on an amendment beside the host's ([amendments] reviewers): draft it with --draft FILE"},
		{"a draft of a track with no reviewer", []string{"amend", other, "--note", "--reason", "x", "--draft", filepath.Join(tb.base, "x.json")}, 1, "names no reviewer: the host's signature alone makes its amendments"},
		{"a draft queues no rerun", []string{"amend", id, "--invalidate", "--rerun", "--reason", "x", "--draft", filepath.Join(tb.base, "x.json")}, 2, "a draft queues nothing"},
		{"the draft", []string{"amend", id, "--legacy", "--reason", reason, "--link", "https://example.org/fix", "--draft", draft}, 0, id + ": drafted (legacy) in " + draft},
		{"over the draft", []string{"amend", id, "--legacy", "--reason", reason, "--draft", draft}, 1, "is never written over"},
		{"the draft unreviewed", []string{"amend", id, "--reviewed", draft}, 1, "has 0 signatures; a reviewed draft has the reviewer's only"},
		{"review with another key", []string{"amend", "review", draft, "--key", "../attest/testdata/ed25519.key", "--track", reviewed}, 1, "is not one of the 1 reviewer(s)"},
		{"review", []string{"amend", "review", draft, "--key", "../attest/testdata/ecdsa.key", "--track", reviewed}, 0, "reason:  " + reason},
		{"reviewed, with another reason", []string{"amend", id, "--reviewed", draft, "--reason", "milder"}, 2, "the action, reason and link are the reviewed draft's"},
		{"reviewed, of another run", []string{"amend", other, "--reviewed", draft}, 1, "is a draft of an amendment of run " + id + ", not of " + other},
	} {
		run := sealrun
		if c.args[1] == "review" {
			run = offline
		}
		code, out := run(c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d %q; want %d %q", c.name, code, out, c.code, c.want)
		}
	}
	// A draft reviewed long after it was made (its time 15 days back, reviewed as such): refused.
	env, err := os.ReadFile(draft)
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _, err := attest.ReadAmendmentEnvelope(env); err == nil {
		st.Predicate.Time = st.Predicate.Time.Add(-15 * 24 * time.Hour)
		old, _ := attest.AmendmentDraft(st)
		reviewer, _ := attest.LoadSigner(t.Context(), "../attest/testdata/ecdsa.key", nil)
		late, _, err := attest.ReviewAmendment(t.Context(), old, reviewer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.New(tb.cfg.Socket).Amend(t.Context(), id, api.AmendRequest{Reviewed: late}); err == nil || !strings.Contains(err.Error(), "a draft is sent within 336h0m0s of it") {
			t.Errorf("a draft 15 days old: %v", err)
		}
	} else {
		t.Fatal(err)
	}
	// The reviewed draft with its reason edited (the payload re-encoded, the reviewer's
	// signature kept): the reviewer did not sign that.
	var e map[string]any
	json.Unmarshal(env, &e)
	payload, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
	e["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(payload), "grader fix", "grader's fix", 1)))
	edited, _ := json.Marshal(e)
	c := client.New(tb.cfg.Socket)
	if _, err := c.Amend(t.Context(), id, api.AmendRequest{Reviewed: edited}); err == nil || !strings.Contains(err.Error(), "the second signature verifies with none of the 1 reviewer key(s)") {
		t.Errorf("a draft edited after review: %v", err)
	}
	if _, err := c.Amend(t.Context(), id, api.AmendRequest{Reviewed: []byte(`{"payloadType":1}`)}); err == nil || !strings.Contains(err.Error(), "reviewed: not a reviewed amendment") {
		t.Errorf("a reviewed draft that is no envelope: %v", err)
	}
	if n := len(d.ledger.AmendmentsOf(id)); n != 0 {
		t.Fatalf("%d amendments in the ledger before the reviewed one", n)
	}
	code, out = sealrun("amend", id, "--reviewed", draft)
	if code != 0 || !strings.Contains(out, id+": amended (legacy, reviewed by key ") {
		t.Fatalf("reviewed: %d %s", code, out)
	}
	entries := d.ledger.AmendmentsOf(id)
	if len(entries) != 1 || entries[0].Reason != reason || entries[0].Link != "https://example.org/fix" {
		t.Fatalf("the ledger's amendments of %s: %+v", id, entries)
	}
	rec, _ := d.Run(id)
	signed, err := os.ReadFile(filepath.Join(rec.Dir, AmendmentsDir, string(entries[0].Amendment)+".att.json"))
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := attest.LoadVerifier("../attest/testdata/ed25519.pub")
	va, err := attest.VerifyAmendment(signed, host)
	if err != nil || va.Signatures() != 2 {
		t.Fatalf("the reviewed amendment: %v", err)
	}
	track, err := policy.Load(reviewed)
	if err != nil {
		t.Fatal(err)
	}
	if err := va.CheckReviewer(track); err != nil {
		t.Errorf("its reviewer: %v", err)
	}
	// Gathered for the first time once amended: its transcript, which says the amendment, checks
	// against what its files and its amendment give, and a reader's verify --transcript agrees.
	results := filepath.Join(tb.base, "results")
	if code, out := sealrun("results", "gather", id, results); code != 0 {
		t.Errorf("gather a run amended before it was gathered: %d %s", code, out)
	}
	if code, out := runCLI(t, cli, "verify", filepath.Join(results, id, "result.att.json"), "--key", "../attest/testdata/ed25519.pub", "--transcript", filepath.Join(results, id)); code != 0 {
		t.Errorf("verify --transcript of the reviewed run: %d %s", code, out)
	}
	// Sent twice: that amendment is in the ledger already.
	if code, out := sealrun("amend", id, "--reviewed", draft); code != 1 || !strings.Contains(out, "is in the ledger already: each amendment is appended once") {
		t.Errorf("the reviewed draft again: %d %s", code, out)
	}
}

// runCLI runs the sealrun binary cli with args, and returns its exit code and output.
func runCLI(t *testing.T, cli string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(cli, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}
