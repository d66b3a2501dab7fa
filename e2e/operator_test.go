package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/images/registrytest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// walkBlock is one ```sh block of docs/OPERATOR.md and the walkthrough marker before it.
type walkBlock struct {
	marker string // "", "choices", "gpu-only", "systemd", "elsewhere"
	line   int
	text   string
}

// operatorBlocks reads the shell blocks of the operator's walkthrough in order.
func operatorBlocks(t *testing.T, path string) []walkBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []walkBlock
	var cur *walkBlock
	marker := ""
	mark := regexp.MustCompile(`^<!-- walkthrough: ([a-z-]+) -->$`)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur, marker = nil, ""
		case cur != nil:
			cur.text += l + "\n"
		case l == "```sh":
			cur = &walkBlock{marker: marker, line: n}
		case mark.MatchString(l):
			marker = mark.FindStringSubmatch(l)[1]
		case strings.TrimSpace(l) != "":
			marker = ""
		}
	}
	return blocks
}

// TestOperatorWalkthrough runs docs/OPERATOR.md as written, on this machine: make deps and make
// install, doctor, keys and the config, the runner image pinned and pulled from a registry server
// (a real one, on loopback, holding the local python image) and the controller built here, the
// exam and the ARI kit into the content store, track pin, sealrund, three seeds, gathering, the
// leaderboard, publish and verify-publication. The block of choices is the CPU track's
// (tracks/demo.toml, the scripted demo agent; its three seeds at once, as a CPU track allows: 245 s
// against 315 s one at a time), the GPU-only block (NVIDIA CDI) is skipped, and
// systemd's start is sealrund started by hand with the installed config. Everything runs in a
// private mount namespace where /etc/sealrun, /var/lib/sealrun, /run/sealrun and /usr/local/bin
// are directories of the test, so the walkthrough's absolute paths are used as written and
// nothing of the host's is touched.
func TestOperatorWalkthrough(t *testing.T) {
	testenv.RequireRoot(t)
	imgs := testenv.LocalImages(t)
	unshare := testenv.RequireTool(t, "unshare", "util-linux")
	sealrun := sandboxtest.Static(t, "cmd/sealrun")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	blocks := operatorBlocks(t, filepath.Join(repo, "docs", "OPERATOR.md"))
	seen := map[string]int{}
	for _, b := range blocks {
		seen[b.marker]++
	}
	if seen["choices"] != 1 || seen["gpu-only"] != 1 || seen["systemd"] != 1 || seen["elsewhere"] != 5 || seen["human"] != 1 || seen[""] < 8 {
		t.Fatalf("docs/OPERATOR.md: want one block each of choices, gpu-only, systemd and human runs, the two witness blocks, the two amendments' (daemon.TestAmendThroughCLI runs sealrun amend, with and without a reviewer) and the TPM's (cmd/sealrun.TestTPMCommands, against swtpm) walked elsewhere, and the rest plain; found %v", seen)
	}

	root := t.TempDir()
	os.Chmod(root, 0o755)
	// The runner image in a private registry: the local python image pushed to a real registry
	// server on loopback (TLS from a CA of the test's, a password), as an operator's CUDA image
	// sits in theirs.
	reg := registrytest.Start(t)
	regFlags := fmt.Sprintf("--authfile %s --ca-file %s", reg.AuthFile, reg.CAFile)
	runnerTag := reg.Ref("lab/pytorch-cpu:2.5")
	python := imgs.Refs["python"]
	start := time.Now()
	if out, err := exec.Command(sealrun, append([]string{"--state-dir", imgs.State, "images", "push", python[strings.Index(python, "@")+1:], runnerTag}, strings.Fields(regFlags)...)...).CombinedOutput(); err != nil {
		t.Fatalf("push the python image to the loopback registry: %v\n%s", err, out)
	}
	t.Logf("pushed %s to %s in %s", python, runnerTag, time.Since(start).Round(time.Second))
	// The exam's source: synthetic documents (the operator's own, on a real host).
	if out, err := exec.Command(sealrun, "exam", "synth", "--seed", "424242", "--count", "12", "--out", filepath.Join(root, "docs.jsonl")).CombinedOutput(); err != nil {
		t.Fatalf("exam synth: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(root, "openai.key"), []byte("not-used-by-the-scripted-agent\n"), 0o600)

	var script bytes.Buffer
	fmt.Fprintf(&script, `set -euo pipefail
ROOT=%q
# The walkthrough's absolute paths, as directories of the test (this mount namespace only).
for d in /etc/sealrun /var/lib/sealrun /run/sealrun /usr/local/bin; do
	mkdir -p "$ROOT/mnt$d" "$d"
	mount --bind "$ROOT/mnt$d" "$d"
done
chmod 0711 /var/lib/sealrun
# The python image's unpacked files, shared with the test images (the pull then finds it here).
mkdir -p /var/lib/sealrun/images/sha256
# (linked on the bind mount's source side: a hard link never crosses a mount)
cp -al %[2]q "$ROOT/mnt/var/lib/sealrun/images/sha256/"
SEALRUND_PID=
stop() { if [ -n "$SEALRUND_PID" ]; then kill -TERM "$SEALRUND_PID"; wait "$SEALRUND_PID" || true; fi; }
trap stop EXIT
`, root, filepath.Join(imgs.State, "images", "sha256", strings.TrimPrefix(python[strings.Index(python, "@")+1:], "sha256:")))
	for _, b := range blocks {
		fmt.Fprintf(&script, "\n# ---- docs/OPERATOR.md:%d (%s)\n", b.line, orPlain(b.marker))
		switch b.marker {
		case "choices":
			fmt.Fprintf(&script, `TRACK=tracks/demo.toml
RUNNER=%s
REGISTRY_FLAGS=%q
CONTROLLER=demo-controller
AGENT=none/none
GPUS='[]'
CONCURRENCY=3
RUNTIME=crun
WORK=$ROOT/work
EXAM_INPUT="--documents $ROOT/docs.jsonl"
OPENAI_KEY_FILE=$ROOT/openai.key
`, runnerTag, regFlags)
		case "gpu-only":
			script.WriteString("# skipped: no GPU here\n")
		case "human":
			// A person at a terminal: the daemon's TestHumanRunThroughTmux drives one through
			// sealrun attach in tmux, and TestPausesOfAHumanRun pauses and resumes one.
			script.WriteString("# walked elsewhere: TestHumanRunThroughTmux (a person through tmux), TestPausesOfAHumanRun (sealrun pause, resume)\n")
		case "elsewhere":
			// The witness blocks need a witness answering this host: the daemon's
			// TestDaemonThroughCLI exports --witnessed from a sealrund with [[witnesses]], and
			// cmd/sealrun's TestWitnessSurvivesKill9 runs sealrun witness keygen and serve.
			script.WriteString("# walked elsewhere: TestDaemonThroughCLI (export --witnessed), TestWitnessSurvivesKill9 (witness serve)\n")
		case "systemd":
			script.WriteString(`sealrund --config /etc/sealrun/sealrun.toml >"$ROOT/sealrund.log" 2>&1 &
SEALRUND_PID=$!
for i in $(seq 150); do [ -S /run/sealrun/sealrun.sock ] && break; sleep 0.2; done
sealrun doctor
`)
		default:
			script.WriteString(b.text)
		}
	}
	fmt.Fprintf(&script, "\n# ---- the test's own checks\ncp -r \"$WORK/publication\" \"$ROOT/publication\"\nsealrun ps -a > \"$ROOT/ps.txt\"\n")
	sp := filepath.Join(root, "walkthrough.sh")
	os.WriteFile(sp, script.Bytes(), 0o755)

	// The mount points the namespace needs on the host: made if missing, removed after.
	for _, d := range []string{"/etc/sealrun", "/var/lib/sealrun", "/run/sealrun"} {
		if _, err := os.Stat(d); err != nil {
			t.Cleanup(func() { os.Remove(d) })
		}
	}
	// make install adds the sealrun group; take it away again if the host had none.
	if _, err := user.LookupGroup("sealrun"); err != nil {
		t.Cleanup(func() { exec.Command("groupdel", "sealrun").Run() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "--mount", "--propagation", "private", "--", "bash", "-x", sp)
	cmd.Dir = repo
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SEALRUND_TEST_") && !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "MFLAGS=") && !strings.HasPrefix(kv, "MAKELEVEL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	err = cmd.Run()
	log, _ := os.ReadFile(filepath.Join(root, "sealrund.log"))
	if err != nil {
		t.Fatalf("the walkthrough stopped: %v\n%s\n--- sealrund's log:\n%s", err, tail(out.String(), 12000), tail(string(log), 4000))
	}
	t.Logf("the walkthrough took %s; its last lines:\n%s", time.Since(start).Round(time.Second), tail(out.String(), 4000))
	ps, _ := os.ReadFile(filepath.Join(root, "ps.txt"))
	if n := strings.Count(string(ps), "graded"); n != 3 {
		t.Errorf("%d runs graded, want 3:\n%s", n, ps)
	}
	for _, want := range []string{"publication: VALID", "(3 valid seeds, 0 failed, 0 invalid; official)", "every run they hold of these tracks ended and is published here"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, tail(out.String(), 6000))
		}
	}
	if _, err := os.Stat(filepath.Join(root, "publication", "VERIFY.md")); err != nil {
		t.Errorf("no publication: %v", err)
	}
	// The configuration's runtime ran every role, and each attestation says so.
	atts, _ := filepath.Glob(filepath.Join(root, "publication", "runs", "*", "result.att.json"))
	if len(atts) != 3 {
		t.Errorf("%d attestations in the publication, want 3", len(atts))
	}
	for _, a := range atts {
		var env struct{ Payload []byte }
		b, _ := os.ReadFile(a)
		json.Unmarshal(b, &env)
		if n := strings.Count(string(env.Payload), `"crun version `); n != 3 {
			t.Errorf("%s: %d roles attested as run by crun, want 3 (runtime = \"crun\")", a, n)
		}
	}
	// Nothing of the walkthrough outlives it: its mounts were in its namespace only.
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mi), root) {
		t.Errorf("mounts of the walkthrough left in the test's namespace")
	}
}

func orPlain(m string) string {
	if m == "" {
		return "as written"
	}
	return "replaced: " + m
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
