package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/airs"
	"github.com/sealrun/sealrun/airs/datasetstest"
	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

const toyTaskDir = "../airs/testdata/SentimentClassificationToyAccuracy"

// toyAgent reads the data with the datasets calls upstream's descriptions show, through runner,
// looks at what its workspace holds, predicts from the word "good", submits and finalizes.
const toyAgent = `set -u
echo "workspace: $(ls | tr '\n' ' ')"
runner python3 -c "from datasets import load_from_disk; print('test columns', load_from_disk('data/test').column_names, 'train rows', len(load_from_disk('data/train')))"
runner python3 solve.py
mkdir -p sub && cp submission.csv sub/
out=$(runner submit sub); echo "$out"
id=$(echo "$out" | sed -n 's/^candidate \([0-9a-f]*\) .*/\1/p')
runner finalize "$id"
`

const toySolve = `from datasets import load_from_disk
test = load_from_disk("data/test")
with open("submission.csv", "w") as f:
    f.write("label\n")
    for t in test["text"]:
        f.write("%d\n" % (1 if "good" in t else 0))
`

// A task written exactly in upstream's format (arguments, files, layout; the HF datasets calls
// served by the test-only stand-in) runs sealed end to end: Check refuses images without the
// task's requirement, then with images that have it two seeds are prepared, solved through
// runner, evaluated with evaluate_prepare.py and evaluate.py, attested, and make a suite board.
// The agent's workspace never holds the task's preparation scripts or its gold submission, and
// its test split has no labels.
func TestUpstreamFormatTaskSealedRun(t *testing.T) {
	tb := newTestbed(t)
	refs := testenv.LocalImages(t).Refs
	task, err := airs.Open(toyTaskDir)
	if err != nil {
		t.Fatal(err)
	}
	raw := t.TempDir()
	os.Chmod(raw, 0o755)
	if err := datasetstest.ToySentiment(raw); err != nil {
		t.Fatal(err)
	}
	_, dataHash, err := airs.TreeHash(raw, airs.MaxDataFiles, airs.MaxDataBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		dir   string
		files int
		bytes int64
	}{{toyTaskDir, airs.MaxTaskFiles, airs.MaxTaskBytes}, {raw, airs.MaxDataFiles, airs.MaxDataBytes}} {
		if _, err := airs.InstallTree(d.dir, filepath.Dir(api.TreePath(tb.state, "x")), d.files, d.bytes); err != nil {
			t.Fatal(err)
		}
	}
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	_, trackText := tb.taskTrack(t, string(task.Hash), string(dataHash))
	trackText = strings.Replace(trackText, `name = "DigitsClassificationAccuracy"`, `name = "SentimentClassificationToyAccuracy"`, 1)

	// The plain python image has no datasets: refused before anything is created.
	plain := tb.parseTrack(t, trackText)
	if _, err := tb.executor().Check(RunSpec{Track: plain, Agent: agent}); err == nil ||
		!strings.Contains(err.Error(), "evaluate_container_python_requirements names datasets, which the grader (evaluation) image") ||
		!strings.Contains(err.Error(), "container_python_requirements names datasets, which the runner image") ||
		!strings.Contains(err.Error(), "sealrun task requirements TASKDIR") {
		t.Fatalf("Check with images lacking datasets: %v", err)
	}

	withDatasets := datasetstest.Image(t, tb.store, refs["python"])
	trackText = strings.ReplaceAll(trackText, refs["python"], withDatasets)
	track := tb.parseTrack(t, trackText)
	os.WriteFile(filepath.Join(tb.kit, "agent.sh"), []byte(toyAgent), 0o755)
	os.WriteFile(filepath.Join(tb.kit, "solve.py"), []byte(toySolve), 0o644)
	for seed := 1; seed <= 2; seed++ {
		id := "toy-" + string(rune('0'+seed))
		x := tb.executor()
		x.Journal = tb.journal
		out, err := x.Execute(context.Background(), RunSpec{ID: id, Track: track, Agent: agent, Seed: int64(seed), Queued: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(tb.state, "runs", id)
		if out.Status != outcome.Graded {
			t.Fatalf("%s: %s: %s", id, out.Status, out.Reason)
		}
		transcript := string(mustRead(t, filepath.Join(dir, "transcript.log")))
		t.Logf("%s: %s %q\n%s", id, out.Status, out.Reason, transcript)
		if out.Status != outcome.Graded || out.TaskReport == nil || out.TaskReport.Value == nil || *out.TaskReport.Value != 1 {
			t.Fatalf("status %s (%s), report %+v; want graded with Accuracy 1", out.Status, out.Reason, out.TaskReport)
		}
		ws := regexp.MustCompile(`workspace: (.*)`).FindStringSubmatch(transcript)
		if ws == nil || !strings.Contains(ws[1], "evaluate.py") || !strings.Contains(ws[1], "utils.py") || !strings.Contains(ws[1], "data") {
			t.Errorf("the workspace lacks the task's files: %v", ws)
		}
		for _, never := range []string{"gold_submission.csv", "prepare.py", "evaluate_prepare.py", "metadata.yaml"} {
			if ws != nil && regexp.MustCompile(`(^| )`+regexp.QuoteMeta(never)+`( |$)`).MatchString(ws[1]) {
				t.Errorf("the workspace holds %s: %s", never, ws[1])
			}
		}
		if !strings.Contains(transcript, "test columns ['text'] train rows 120") {
			t.Errorf("the agent's test split: the transcript lacks its columns without the label")
		}
	}
	o, err := exec.Command(sandboxtest.Static(t, "cmd/sealrun"), "leaderboard", "--key", "../attest/testdata/ed25519.pub", "--suite", "airs", filepath.Join(tb.state, "runs")).CombinedOutput()
	t.Logf("sealrun leaderboard --suite airs:\n%s", o)
	if err != nil || !strings.Contains(string(o), "AIRS-Bench suite: 1 task(s), 1 agent(s), 2 counted run(s), 0 invalid") || !strings.Contains(string(o), "Task SentimentClassificationToyAccuracy") {
		t.Errorf("leaderboard --suite airs: %v", err)
	}
}

func (tb *testbed) parseTrack(t *testing.T, text string) *policy.Track {
	t.Helper()
	tr, err := policy.Parse("task-test.toml", []byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return tr
}
