package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/grader"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
)

// Root: grade the example bundle, attest the result, regrade it (match), then regrade against an
// attestation whose pass vector differs (a clear diff), and the bad inputs.
func TestGradeAndRegrade(t *testing.T) {
	testenv.RequireRoot(t)
	imgs := testenv.LocalImages(t)
	python := imgs.Refs["python"]
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	runDir := testenv.RunDir(t, sandbox.ReapRunDir)
	sr := func(args ...string) result {
		return sealrun(t, append([]string{"--state-dir", imgs.State}, args...)...)
	}
	if r := sr("exam", "synth", "--seed", "4", "--count", "12", "--out", p("docs.jsonl")); r.code != 0 {
		t.Fatal(r)
	}
	if r := sr("exam", "build", "--documents", p("docs.jsonl"), "--out", p("exam.sealrun")); r.code != 0 {
		t.Fatal(r)
	}
	ws := p("ws")
	os.MkdirAll(filepath.Join(ws, "b"), 0o755)
	for _, n := range []string{"sealrun-bundle.json", "predict.py"} {
		b, _ := os.ReadFile(filepath.Join("../../grader/example", n))
		os.WriteFile(filepath.Join(ws, "b", n), b, 0o644)
	}
	cand, err := grader.Pack(context.Background(), ws, "b", p("cands"), grader.DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}

	// grade: summary, then --json, which is the report.
	r := sr("grade", "--bundle", cand.Path, "--exam", p("exam.sealrun"), "--image", python, "--run-dir", runDir, "--documents", p("docs.jsonl"))
	if r.code != 0 || !strings.Contains(r.stdout, "status             graded") || !strings.Contains(r.stdout, "pass vector sha256") || !strings.Contains(r.stdout, "  records ") {
		t.Fatalf("grade: %+v", r)
	}
	t.Logf("sealrun grade:\n%s", r.stdout)
	r = sr("grade", "--bundle", cand.Path, "--exam", p("exam.sealrun"), "--image", python, "--run-dir", runDir, "--json")
	var rep report.Exam
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("grade --json: %v %+v", err, r)
	}
	os.WriteFile(p("report.json"), []byte(r.stdout), 0o644)

	// Attest it: the golden predicate, re-pinned to this exam, bundle, image and result.
	if r := sr("keys", "generate", "--out", p("keys")); r.code != 0 {
		t.Fatal(r)
	}
	sign := func(name string, rep report.Exam) string {
		t.Helper()
		pred, _ := goldenPredicate(t)
		var pr attest.Predicate
		if err := json.Unmarshal(pred, &pr); err != nil {
			t.Fatal(err)
		}
		pr.Exam.SHA256, pr.Exam.Questions = rep.Exam.SHA256, rep.Exam.Questions
		pr.Images.Grader = python
		pr.Result.Questions, pr.Result.Passed, pr.Result.Score, pr.Result.PassVectorSHA256 = rep.Score.Questions, rep.Score.Passed, rep.Score.Percent, rep.PassVectorSHA256
		pr.Submissions.History = []attest.Submission{{Digest: digest.Digest(cand.Digest()), Size: cand.Size, Time: pr.Timeline.Started.Add(time.Minute), Promoted: true}}
		pr.Submissions.Head, _ = attest.HistoryHead(pr.Submissions.History)
		b, _ := json.Marshal(pr)
		os.WriteFile(p(name+".pred.json"), b, 0o600)
		data, _ := json.MarshalIndent(rep, "", "  ")
		os.WriteFile(p(name+".report.json"), data, 0o644)
		rsum, _ := fileio.SHA256(p(name + ".report.json"))
		if r := sr("attest", "sign", "--predicate", p(name+".pred.json"), "--key", p("keys/sealrun.key"), "--out", p(name+".att.json"),
			"--subject", "bundle.tar.gz="+cand.Digest(), "--subject", "report.json=sha256:"+rsum); r.code != 0 {
			t.Fatalf("sign: %+v", r)
		}
		return p(name + ".att.json")
	}
	att := sign("ok", rep)
	regrade := func(att, report, exam string) result {
		args := []string{"regrade", "--attestation", att, "--key", p("keys/sealrun.pub"), "--bundle", cand.Path, "--exam", exam, "--run-dir", runDir}
		if report != "" {
			args = append(args, "--report", report)
		}
		return sr(args...)
	}
	if r := regrade(att, p("ok.report.json"), p("exam.sealrun")); r.code != 0 || !strings.Contains(r.stdout, "regrade matches: pass vector sha256 "+string(rep.PassVectorSHA256)) {
		t.Fatalf("regrade: %+v", r)
	}

	// An attestation whose vector says question 1 passed when it did not (or the reverse).
	flipped := rep
	v := []byte(rep.PassVector)
	v[0] = "10"[v[0]-'0']
	flipped.PassVector = string(v)
	flipped.PassVectorSHA256 = report.PassVector(v).SHA256()
	flipped.Score = report.NewScore(report.PassVector(v).Passed(), len(v))
	bad := sign("flipped", flipped)
	r = regrade(bad, p("flipped.report.json"), p("exam.sealrun"))
	if r.code != 1 || !strings.Contains(r.stdout, "regrade DIFFERS") || !strings.Contains(r.stdout, "question 1 (syn-4-1/1): attested "+string(v[0])) || !strings.Contains(r.stdout, "the run graded on cpu: ") {
		t.Errorf("regrade of a differing attestation: %+v", r)
	}
	if r := regrade(bad, "", p("exam.sealrun")); r.code != 1 || !strings.Contains(r.stdout, "give --report report.json") {
		t.Errorf("regrade without report: %+v", r)
	}

	// Bad input: another exam, another bundle, a wrong key, missing flags.
	sr("exam", "synth", "--seed", "5", "--count", "12", "--out", p("d2.jsonl"))
	sr("exam", "build", "--documents", p("d2.jsonl"), "--out", p("other.sealrun"))
	if r := regrade(att, "", p("other.sealrun")); r.code != 1 || !strings.Contains(r.stderr, "this is not the exam the track pins") {
		t.Errorf("regrade with another exam: %+v", r)
	}
	other := p("other.tar.gz")
	os.WriteFile(other, []byte("not the bundle"), 0o644)
	if r := sr("regrade", "--attestation", att, "--key", p("keys/sealrun.pub"), "--bundle", other, "--exam", p("exam.sealrun")); r.code != 1 || !strings.Contains(r.stdout+r.stderr, "bundle") {
		t.Errorf("regrade with another bundle: %+v", r)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"grade", "--exam", p("exam.sealrun"), "--image", python}, 2, "give the bundle with --bundle"},
		{[]string{"grade", "--bundle", cand.Path, "--exam", p("exam.sealrun")}, 2, "give --track"},
		{[]string{"grade", "--bundle", cand.Path, "--exam", p("exam.sealrun"), "--track", "../../tracks/demo.toml"}, 1, "but track ../../tracks/demo.toml pins the hidden exam"},
		{[]string{"grade", "--bundle", p("docs.jsonl"), "--exam", p("exam.sealrun"), "--image", python, "--run-dir", runDir}, 3, ""},
		{[]string{"grade", "--bundle", cand.Path, "--exam", p("docs.jsonl"), "--image", python}, 1, "not a valid sealrun-exam/v1 file"},
		{[]string{"grade", "--bundle", cand.Path, "--exam", p("exam.sealrun"), "--image", "sha256:" + strings.Repeat("0", 64), "--run-dir", runDir}, 1, "grader image"},
		{[]string{"regrade", "--key", p("keys/sealrun.pub"), "--bundle", cand.Path, "--exam", p("exam.sealrun")}, 2, "give the run's attestation"},
	} {
		r := sr(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr+r.stdout, c.want) {
			t.Errorf("%v: exit %d %q %q; want %d %q", c.args, r.code, r.stdout, r.stderr, c.code, c.want)
		}
	}
	// A file that is not a bundle fails grading with the reason, as a run would record it.
	r = sr("grade", "--bundle", p("docs.jsonl"), "--exam", p("exam.sealrun"), "--image", python, "--run-dir", runDir)
	if !strings.Contains(r.stdout, "status             failed") || !strings.Contains(r.stdout, "is not gzip data") {
		t.Errorf("grade of a non-bundle: %+v", r)
	}
}
