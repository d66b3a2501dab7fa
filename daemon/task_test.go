package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

const digitsTaskDir = "../airs/tasks/DigitsClassificationAccuracy"

// taskTrack is the testbed's track turned into a track of the shipped AIRS task: [task] pinning
// the task and its raw data in place of [exam] and [kit], shorter budgets.
func (tb *testbed) taskTrack(t *testing.T, taskHash, dataHash string) (*policy.Track, string) {
	t.Helper()
	text := regexp.MustCompile(`(?s)\[exam\].*?\n\[images\]`).ReplaceAllString(tb.trackTOML, "[task]\nkind = \"airs\"\nname = \"DigitsClassificationAccuracy\"\nsha256 = \""+taskHash+"\"\ndata_sha256 = \""+dataHash+"\"\n\n[images]")
	text = regexp.MustCompile(`(?m)^question_limit = .*\n`).ReplaceAllString(text, "")
	text = strings.Replace(text, `name = "demo"`, `name = "airs-digits-test"`, 1)
	tr, err := policy.Parse("airs-digits-test.toml", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return tr, text
}

// taskAgent is a scripted scaffold for the digits task: it probes what the controller and the
// runner can read (probe.sh), then trains a nearest-centroid classifier through runner, submits
// submission.csv and finalizes it.
const taskAgent = `set -u
echo "brief: $(head -1 "$SEALRUN_BRIEF")"
echo "brief has the task's description: $(grep -c '^## Task Description' BRIEF.md)"
ls data/train data/test
PROBE
TRAIN
mkdir -p sub && cp submission.csv sub/
out=$(runner submit sub); echo "$out"
id=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p')
runner finalize "$id"
`

// probeScript runs in the controller and, through runner, in the runner: it hashes every file
// under 10 MB it can read outside /proc, /sys and /dev and reports any whose sha256 is in
// secret.sha (the labels and the raw data: hashes, which reveal nothing), and counts the lines of
// its mount table that name anything in forbidden.txt.
const probeScript = `role=$1
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -size -20000 -print0 2>/dev/null | xargs -0 sha256sum 2>/dev/null > /tmp/view.sha
n=$(wc -l < /tmp/view.sha)
grep -F -f /workspace/secret.sha /tmp/view.sha | sed "s/^/LEAK $role: /"
leaks=$(grep -c -F -f /workspace/secret.sha /tmp/view.sha)
data=$(grep -c ' /workspace/data/train/train.csv$' /tmp/view.sha)
grep -F -f /workspace/forbidden.txt /proc/self/mountinfo | sed "s/^/MOUNT $role: /"
mounts=$(grep -c -F -f /workspace/forbidden.txt /proc/self/mountinfo)
echo "probe $role: $n files hashed, $leaks leaks, train data seen $data, forbidden mounts $mounts"
rm -f /tmp/view.sha
`

const trainCentroid = `import csv
cols = ["p%d" % i for i in range(64)]
rows = list(csv.DictReader(open("data/train/train.csv")))
def vec(r): return [float(r[c]) for c in cols]
def fit(rows):
    sums, n = {}, {}
    for r in rows:
        y = int(r["label"]); v = vec(r)
        s = sums.setdefault(y, [0.0] * 64)
        for i in range(64): s[i] += v[i]
        n[y] = n.get(y, 0) + 1
    return {y: [x / n[y] for x in s] for y, s in sums.items()}
def predict(cent, v): return min(cent, key=lambda y: sum((a - b) ** 2 for a, b in zip(v, cent[y])))
cut = len(rows) * 4 // 5
cent = fit(rows[:cut])
acc = sum(predict(cent, vec(r)) == int(r["label"]) for r in rows[cut:]) / (len(rows) - cut)
print("own validation accuracy %.3f" % acc)
cent = fit(rows)
with open("submission.csv", "w") as f:
    f.write("label\n")
    for r in csv.DictReader(open("data/test/test.csv")):
        f.write("%d\n" % predict(cent, vec(r)))
`

// A sealed run of the shipped AIRS task, end to end with the real data: preparation before the
// clock, a scripted agent that trains through runner and submits, evaluate.py in the grader,
// the metric in report.json and in a sealed-task-run attestation that verifies against the
// track. The labels' bytes (and the raw data's) are nowhere the controller or the runner can
// read, and their mount tables show neither the grader-only directory nor the raw data. A
// second run's submission with the wrong row count is graded as an invalid submission.
func TestTaskSealedRun(t *testing.T) {
	tb := newTestbed(t)
	raw := testenv.AIRSDigitsData(t)
	// Before the content is added, Check names both and how to add them.
	task, err := airs.Open(digitsTaskDir)
	if err != nil {
		t.Fatal(err)
	}
	_, dataHash, err := airs.TreeHash(raw, airs.MaxDataFiles, airs.MaxDataBytes)
	if err != nil {
		t.Fatal(err)
	}
	track, trackText := tb.taskTrack(t, string(task.Hash), string(dataHash))
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	if _, err := tb.executor().Check(RunSpec{Track: track, Agent: agent}); err == nil ||
		!strings.Contains(err.Error(), "sealrun content add TASKDIR") || !strings.Contains(err.Error(), "sealrun content add DATADIR") {
		t.Fatalf("Check without the task's content: %v", err)
	}
	for _, d := range []struct {
		dir   string
		files int
		bytes int64
	}{{digitsTaskDir, airs.MaxTaskFiles, airs.MaxTaskBytes}, {raw, airs.MaxDataFiles, airs.MaxDataBytes}} {
		if _, err := airs.InstallTree(d.dir, filepath.Dir(api.TreePath(tb.state, "x")), d.files, d.bytes); err != nil {
			t.Fatal(err)
		}
	}

	// The bad-rows run first: its labels (the same bytes every run, prepared from the same data)
	// give the main run's probe the hashes to look for.
	var labels []byte
	for _, c := range []struct {
		id, train string
		valid     bool
	}{
		{"task-run-bad-rows", `printf 'label\n1\n2\n3\n' > submission.csv`, false},
		{"task-run", "runner python3 train.py", true},
	} {
		t.Run(c.id, func(t *testing.T) {
			probe := ""
			if c.valid {
				probe = "sh probe.sh controller\nrunner sh probe.sh runner"
				secret := sha(labels) + "\n" + sha(mustRead(t, filepath.Join(raw, "digits.csv.gz"))) + "\n"
				os.WriteFile(filepath.Join(tb.kit, "secret.sha"), []byte(secret), 0o644)
				os.WriteFile(filepath.Join(tb.kit, "forbidden.txt"), []byte(strings.Join([]string{TaskDataDir, "evaluation-data", string(dataHash), string(task.Hash), "test_with_labels", "airs-digits-raw"}, "\n")+"\n"), 0o644)
				os.WriteFile(filepath.Join(tb.kit, "probe.sh"), []byte(probeScript), 0o644)
			}
			os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(strings.NewReplacer("TRAIN", c.train, "PROBE", probe).Replace(taskAgent)), 0o755)
			os.WriteFile(filepath.Join(tb.kit, "train.py"), []byte(trainCentroid), 0o644)
			x := tb.executor()
			x.Journal = tb.journal
			start := time.Now()
			out, err := x.Execute(context.Background(), RunSpec{ID: c.id, Track: track, Agent: agent, Seed: 1, Queued: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(tb.state, "runs", c.id)
			transcript := string(mustRead(t, filepath.Join(dir, "transcript.log")))
			t.Logf("%s: %s %q in %s\ntranscript:\n%s", c.id, out.Status, out.Reason, time.Since(start).Round(time.Millisecond), transcript)
			if out.Status != outcome.Graded || out.TaskReport == nil {
				t.Fatalf("status %s (%s); want graded with a task report", out.Status, out.Reason)
			}
			labels = mustRead(t, filepath.Join(dir, "grading", "evaluation-data", "test_with_labels", "labels.csv"))
			rep := out.TaskReport
			t.Logf("report: metric %s value %v valid %v invalid %q, evaluate.py %.2fs", rep.Metric, rep.Value, rep.Valid, rep.Invalid, rep.Seconds)
			if c.valid && (rep.Value == nil || *rep.Value < 0.8 || *rep.Value > 1) {
				t.Errorf("nearest centroid on digits: accuracy %v; want 0.8 to 1", rep.Value)
			}
			if !c.valid && (rep.Valid || !strings.Contains(rep.Invalid, "row count (3) does not match test set size (360)")) {
				t.Errorf("wrong row count: valid %v, invalid %q", rep.Valid, rep.Invalid)
			}
			for _, want := range []string{"brief: # Sealed run of the AIRS-Bench task DigitsClassificationAccuracy", "brief has the task's description: 1",
				"finalized: the run ends now; the task's evaluate.py scores"} {
				if !strings.Contains(transcript, want) {
					t.Errorf("the transcript lacks %q", want)
				}
			}

			// The attestation: a sealed-task-run predicate that verifies with every file and
			// against the track, here and with sealrun verify.
			cand := filepath.Join(dir, "candidates", string(rep.Candidate.ID.Hex())+".tar.gz")
			af, _ := os.Open(filepath.Join(dir, "audit.jsonl"))
			defer af.Close()
			v, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithReportDigest(sha(mustRead(t, filepath.Join(dir, "report.json")))),
				attest.WithBundleDigest(sha(mustRead(t, cand))), attest.WithAuditLog(af), attest.WithTrack(track))
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			p := v.Statement.Predicate
			if v.Statement.PredicateType != attest.PredicateTypeTaskV1 || p.Task == nil || p.Task.Metric != "Accuracy" || p.Task.SOTA != 0.99 ||
				p.Result.ValidSubmission != c.valid || (c.valid && *p.Result.Value != *rep.Value) || len(p.AirGap.Containers) < 2 {
				t.Errorf("predicate %s: task %+v result %+v, %d air-gap containers", v.Statement.PredicateType, p.Task, p.Result, len(p.AirGap.Containers))
			}
			trackFile := filepath.Join(t.TempDir(), "track.toml")
			os.WriteFile(trackFile, []byte(trackText), 0o644)
			if o, err := exec.Command(sandboxtest.Static(t, "cmd/sealrun"), "verify", out.Attestation, "--key", "../attest/testdata/ed25519.pub",
				"--report", filepath.Join(dir, "report.json"), "--bundle", cand, "--track", trackFile).CombinedOutput(); err != nil || !strings.Contains(string(o), "VALID") ||
				!strings.Contains(string(o), "task       DigitsClassificationAccuracy (airs)") || !strings.Contains(string(o), "result     graded: Accuracy") {
				t.Errorf("sealrun verify: %v\n%s", err, o)
			} else {
				t.Logf("sealrun verify:\n%s", o)
			}
			// --json carries the task and the result in the task's shape.
			if o, err := exec.Command(sandboxtest.Static(t, "cmd/sealrun"), "verify", out.Attestation, "--key", "../attest/testdata/ed25519.pub", "--json").Output(); err != nil ||
				!strings.Contains(string(o), `"valid_submission"`) || !strings.Contains(string(o), `"metric": "Accuracy"`) || strings.Contains(string(o), `"questions"`) {
				t.Errorf("sealrun verify --json: %v\n%s", err, o)
			}
			summary := string(mustRead(t, filepath.Join(dir, "summary.txt")))
			if !strings.Contains(summary, "metric     Accuracy") {
				t.Errorf("summary.txt:\n%s", summary)
			}
			audit := string(mustRead(t, filepath.Join(dir, "audit.jsonl")))
			for _, k := range []string{`"task_prepare"`, `"evaluated"`} {
				if !strings.Contains(audit, k) {
					t.Errorf("the audit log has no %s entry", k)
				}
			}
			if !c.valid {
				return
			}

			// The labels never reached an agent-reachable container: the probe read every file
			// the controller and the runner can (the workspace's data among them) and found
			// neither the labels nor the raw data, and their mount tables name neither.
			for _, role := range []string{"controller", "runner"} {
				m := regexp.MustCompile(`probe ` + role + `: (\d+) files hashed, (\d+) leaks, train data seen (\d+), forbidden mounts (\d+)`).FindStringSubmatch(transcript)
				if m == nil {
					t.Errorf("no probe report from the %s", role)
					continue
				}
				if n, _ := strconv.Atoi(m[1]); n < 10 || m[2] != "0" || m[3] != "1" || m[4] != "0" {
					t.Errorf("the %s's probe: %s", role, m[0])
				}
				t.Logf("%s", m[0])
			}
			if strings.Contains(transcript, "LEAK ") || strings.Contains(transcript, "MOUNT ") {
				t.Error("the probe found the labels or their mounts (see the transcript)")
			}
		})
	}
	// The suite's board from the two attestations, as a user makes it.
	o, err := exec.Command(sandboxtest.Static(t, "cmd/sealrun"), "leaderboard", "--key", "../attest/testdata/ed25519.pub", "--suite", "airs", filepath.Join(tb.state, "runs")).CombinedOutput()
	t.Logf("sealrun leaderboard --suite airs:\n%s", o)
	if err != nil || !strings.Contains(string(o), "AIRS-Bench suite: 1 task(s), 1 agent(s), 2 counted run(s), 0 invalid") || !strings.Contains(string(o), "(worst observed)") {
		t.Errorf("leaderboard --suite airs: %v", err)
	}
}
