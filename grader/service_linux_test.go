package grader

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/runner"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// The agent's verbs through the real runner socket and client, then the hidden grading, as the
// daemon will wire them.
func TestServiceThroughRunnerSocket(t *testing.T) {
	e := testEnv(t, 5*time.Second)
	dir := t.TempDir()
	val := synthExam(t, dir, 11, 8)
	ex := synthExam(t, dir, 12, 16)
	tr := &policy.Track{ID: strings.Repeat("b", 64), Name: "t", Version: "1",
		Budget:   policy.Budget{Wall: time.Hour, CallLimit: 20 * time.Minute, Reserve: 5 * time.Minute, Grading: 2 * time.Minute, QuestionLimit: 5 * time.Second},
		Artifact: policy.Artifact{MaxGzipBytes: 16 << 20}}
	ws := t.TempDir()
	runDir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(runDir, 0o700)
	log, err := audit.Open(filepath.Join(runDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	finalized := make(chan struct{}, 1)
	svc, err := NewService(ServiceConfig{Env: e, Track: tr, Validation: val, Workspace: ws, Dir: runDir, Audit: log, OnFinalize: func() { finalized <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	client := sandboxtest.Static(t, "cmd/runner")
	clock := tr.Budget.Start(time.Now)
	rs, err := runner.NewService(e.Run, runner.Config{Clock: clock, Image: e.Rootfs, Workspace: ws, Shim: client, Audit: log, CallsDir: filepath.Join(runDir, "calls")}, runner.WithJudge(Judge{svc}))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := runner.Listen(sock, int(e.Run.SharedGID()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { rs.Serve(ctx, l); close(served) }()
	defer func() { cancel(); <-served; rs.Close() }()
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(client, args...)
		cmd.Env = []string{"SEALRUN_AGENT_SOCKET=" + sock}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}

	// A constant bundle: validation says how it does.
	bundleDir(t, ws, "b1", map[string]string{"predict.py": `def answer(seq, prefix, n):
    return b"1" * n
` + defaultScore + harness})
	code, out := run("submit", "/workspace/b1")
	m := regexp.MustCompile(`candidate ([0-9a-f]{12}) \([0-9.]+ [KM]?i?B gz, 2 files\); validation (\d+)/8 \(`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("submit: exit %d\n%s", code, out)
	}
	first := m[1]
	t.Logf("runner submit /workspace/b1:\n%s", out)
	if want := expected(val, func(_ []byte, n int) []byte { return bytes.Repeat([]byte("1"), n) }).Passed(); m[2] != strconv.Itoa(want) {
		t.Errorf("validation %s; want %d", m[2], want)
	}
	// The same files again: the same candidate, not validated twice.
	if code, out := run("submit", "/workspace/b1"); code != 0 || !strings.Contains(out, "is the same as the one submitted") {
		t.Errorf("resubmit: %d %s", code, out)
	}

	// Refusals: a symlink to /etc, a broken manifest, outside the workspace. Each is recorded.
	os.Symlink("/etc", filepath.Join(ws, "etc"))
	bundleDir(t, ws, "b2", map[string]string{ManifestName: `{"protocol":"sealrun-bundle/v1","entrypoint":["python3","main.py"]}`})
	for _, c := range []struct{ arg, want string }{
		{"/workspace/etc", "refused: bundle etc: is a symlink"},
		{"/workspace/b2", "refused: bundle sealrun-bundle.json: the entrypoint names main.py, which is not in the bundle"},
		{"/etc", "refused: /etc is outside /workspace"},
	} {
		if code, out := run("submit", c.arg); code != 125 || !strings.Contains(out, c.want) {
			t.Errorf("submit %s: exit %d %q; want 125 %q", c.arg, code, out, c.want)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(runDir, "candidates"))
	if len(entries) != 1 {
		t.Errorf("candidates stored: %d; want 1 (refusals store nothing)", len(entries))
	}

	// A second candidate that knows the exam's answers for half of it.
	bundleDir(t, ws, "b2", map[string]string{ManifestName: manifestJSON, "predict.py": `def answer(seq, prefix, n):
    return b"2" * n
` + defaultScore + harness})
	code, out = run("submit", "b2") // relative: the client's cwd is outside /workspace, so it is /workspace/b2
	if code != 0 {
		t.Fatalf("submit b2: %d %s", code, out)
	}
	second := regexp.MustCompile(`candidate ([0-9a-f]{12})`).FindStringSubmatch(out)[1]

	if code, out := run("promote", "zzzz"); code != 125 || !strings.Contains(out, "is not a candidate id") {
		t.Errorf("promote zzzz: %d %s", code, out)
	}
	if code, out := run("promote", "ffff"); code != 125 || !strings.Contains(out, "the candidates are") {
		t.Errorf("promote ffff: %d %s", code, out)
	}
	if code, out := run("promote", first[:6]); code != 0 || !strings.Contains(out, "promoted "+first) {
		t.Errorf("promote: %d %s", code, out)
	}
	code, out = run("history")
	t.Logf("runner history:\n%s", out)
	if code != 0 || !strings.Contains(out, first) || !strings.Contains(out, second) || !strings.Contains(out, "yes (graded)") {
		t.Errorf("history: %d\n%s", code, out)
	}
	if code, out := run("finalize", second); code != 0 || !strings.Contains(out, "the hidden exam grades "+second) {
		t.Errorf("finalize: %d %s", code, out)
	}
	select {
	case <-finalized:
	case <-time.After(time.Second):
		t.Error("finalize did not end the run")
	}
	if code, out := run("promote", first); code != 125 || !strings.Contains(out, "finalized") {
		t.Errorf("promote after finalize: %d %s", code, out)
	}

	// Hidden grading of the finalized candidate; the pass vector is sealed before phase 2.
	bitsLog := filepath.Join(e.WorkDir, "hidden", "bits.jsonl")
	var sealed report.PassVector
	rep, sum, err := svc.GradeFinal(context.Background(), ex, time.Now().Add(tr.Budget.Grading), func(v report.PassVector) error {
		if _, err := os.Stat(bitsLog); err == nil {
			t.Error("phase 2 started before the pass vector was sealed")
		}
		sealed = append(report.PassVector(nil), v...)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := expected(ex, func(_ []byte, n int) []byte { return bytes.Repeat([]byte("2"), n) })
	if rep.Status != "graded" || rep.PassVector != string(want) || string(sealed) != string(want) || string(rep.Candidate.ID[7:19]) != second || rep.BitsPerByte == nil {
		t.Errorf("report %+v; want vector %s", rep, want)
	}
	data, _ := os.ReadFile(filepath.Join(runDir, "report.json"))
	var back report.Exam
	if err := json.Unmarshal(data, &back); err != nil || back.PassVectorSHA256 != want.SHA256() || len(sum) != 64 {
		t.Errorf("report.json: %v %s", err, data)
	}
	head, _ := svc.History().Head()
	if back.HistoryHead != head {
		t.Errorf("report history head %s, history %s", back.HistoryHead, head)
	}
	for _, leak := range []string{"prefix", "answer\"", "output_b64"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("report.json holds %q", leak)
		}
	}
	// The audit log has every step, in order, and the sealed vector before anything else of grading.
	adata, _ := os.ReadFile(log.Path())
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(string(adata)), "\n") {
		var e struct{ Kind string }
		json.Unmarshal([]byte(l), &e)
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, " "); got != "submit validation submit_refused submit_refused submit validation promote finalize sealed" {
		t.Errorf("audit kinds: %s", got)
	}
	hdata, _ := os.ReadFile(filepath.Join(runDir, "history.jsonl"))
	if n := strings.Count(string(hdata), `"kind":"refused"`); n != 2 {
		t.Errorf("history has %d refused entries; want 2:\n%s", n, hdata)
	}
}
