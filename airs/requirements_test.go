package airs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRequirement(t *testing.T) {
	for in, want := range map[string]string{"datasets==4.0.0": "datasets ==4.0.0", "scikit-learn": "scikit-learn ", "Torch_Metrics >= 1.0, <2": "torch-metrics >=1.0,<2", "rouge_score[x]": "rouge-score "} {
		r, err := ParseRequirement(in)
		if err != nil || r.Key+" "+r.Spec != want {
			t.Errorf("%q: %+v %v; want %q", in, r, err, want)
		}
	}
	for _, bad := range []string{"", "datasets; rm -rf /", "-e git+https://x", "a==", "../x", strings.Repeat("a", 300)} {
		if _, err := ParseRequirement(bad); err == nil || !strings.Contains(err.Error(), "is not a requirement") {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}

// Debian meets what it packages; the rest is named for pip.
func TestPlanDebian(t *testing.T) {
	p, err := PlanDebian([]string{"datasets==4.0.0", "pandas", "numpy", "torch", "scikit-learn"}, []string{"torchmetrics", "pandas"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Packages, " ") != "python3 python3-pandas python3-numpy python3-torch libopenblas0-pthread python3-sklearn" {
		t.Errorf("packages %v", p.Packages)
	}
	if len(p.Unmet) != 2 || p.Unmet[0].Name != "datasets" || p.Unmet[1].Name != "torchmetrics" {
		t.Errorf("unmet %+v", p.Unmet)
	}
}

// An image's distributions are read from its site-packages, confined to its root: a symlink
// pointing out of it is not followed out.
func TestInstalledAndUnmet(t *testing.T) {
	root := t.TempDir()
	dp := filepath.Join(root, "usr/lib/python3/dist-packages")
	lp := filepath.Join(root, "usr/local/lib/python3.11/dist-packages")
	for _, d := range []string{filepath.Join(dp, "numpy-1.24.2.egg-info"), filepath.Join(dp, "PyYAML-6.0.dist-info"), filepath.Join(lp, "datasets-4.0.0.dist-info")} {
		os.MkdirAll(d, 0o755)
	}
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "pandas-2.0.dist-info"), 0o755)
	os.MkdirAll(filepath.Join(root, "usr/local/lib/python3.12"), 0o755)
	os.Symlink(outside, filepath.Join(root, "usr/local/lib/python3.12/site-packages"))
	have, err := Installed(root)
	if err != nil {
		t.Fatal(err)
	}
	if have["numpy"] != "1.24.2" || have["pyyaml"] != "6.0" || have["datasets"] != "4.0.0" {
		t.Errorf("installed %v", have)
	}
	if _, ok := have["pandas"]; ok {
		t.Errorf("followed a symlink out of the image: %v", have)
	}
	missing, notes := Unmet(have, []string{"numpy==1.26.0", "PyYAML", "datasets==4.0.0", "pandas"})
	if len(missing) != 1 || missing[0].Name != "pandas" || len(notes) != 1 || !strings.Contains(notes[0], "the image has numpy 1.24.2") {
		t.Errorf("missing %+v notes %q", missing, notes)
	}
}

// Only what an agent may read of a task reaches its workspace: never the preparation scripts,
// the label maker, or gold submissions.
func TestAgentFiles(t *testing.T) {
	task := &Task{Files: []File{{Path: "custom_labels.py"}, {Path: "evaluate.py"}, {Path: "evaluate_prepare.py"}, {Path: "gold_submission.csv"},
		{Path: "gold_submission_permuted_1.py"}, {Path: "metadata.yaml"}, {Path: "prepare.py"}, {Path: "project_description.md"},
		{Path: "sub/helper.py"}, {Path: "testing_util.py"}, {Path: "utils.py"}}}
	if got := strings.Join(task.AgentFiles(), " "); got != "project_description.md evaluate.py testing_util.py utils.py" {
		t.Errorf("agent files: %s", got)
	}
}
