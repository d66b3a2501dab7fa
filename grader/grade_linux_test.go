package grader

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/report"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// harness is the line protocol in Python; each test bundle defines answer(seq, prefix, n)
// before it (None: print nothing for this question).
const harness = `
import base64, json, os, sys, time
def respond(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()
respond({"ready": True, "protocol": "sealrun-bundle/v1"})
for line in sys.stdin:
    req = json.loads(line)
    prefix = base64.b64decode(req["prefix_b64"])
    seq = req["seq"]
    if req["op"] == "generate":
        out = answer(seq, prefix, req["n"])
        if out is not None:
            respond({"seq": seq, "output_b64": base64.b64encode(out).decode()})
    else:
        respond({"seq": seq, "bits": score(seq, prefix, base64.b64decode(req["target_b64"]))})
`

const defaultScore = "def score(seq, prefix, target):\n    return 8.0 * len(target)\n"

// env is a grading environment on a real sandbox run with the local python image.
func testEnv(t testing.TB, question time.Duration) *Env {
	t.Helper()
	h := sandboxtest.Host(t)
	imgs := sandboxtest.LocalImages(t)
	ctx := context.Background()
	var rb [4]byte
	f, _ := os.Open("/dev/urandom")
	f.Read(rb[:])
	f.Close()
	r, err := h.NewRun(ctx, "gr-"+hex.EncodeToString(rb[:]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	work := filepath.Join(t.TempDir(), "grading")
	os.Chmod(filepath.Dir(work), 0o711)
	return &Env{Run: r, Rootfs: imgs.Python, Image: "sealrun.local/python@sha256:test", Limits: sandbox.Limits{CPUs: 1, MemoryBytes: 256 << 20},
		Device: "cpu: " + CPUModel(), Question: question, Load: 20 * time.Second, WorkDir: work, Bundle: DefaultLimits(16 << 20)}
}

// synthExam builds an exam of n synthetic questions (seed) into dir and opens it verified.
func synthExam(t testing.TB, dir string, seed uint64, n int) *exams.Exam {
	t.Helper()
	var buf bytes.Buffer
	if err := exams.WriteDocuments(&buf, exams.Synthesize(seed, n)); err != nil {
		t.Fatal(err)
	}
	qs, err := exams.ReadDocuments("synth", &buf)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("exam-%d.sealrun", seed))
	sum, err := exams.WriteFile(p, qs, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := exams.Open(p, digest.Hex(sum))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// pyBundle packs a Python bundle whose answer() is body, and returns the candidate file.
func pyBundle(t *testing.T, body string, extra map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	files := map[string]string{"predict.py": body + "\n" + harness}
	if !strings.Contains(body, "def score") {
		files["predict.py"] = body + "\n" + defaultScore + harness
	}
	for k, v := range extra {
		files[k] = v
	}
	rel := bundleDir(t, ws, "b", files)
	c, err := Pack(context.Background(), ws, rel, t.TempDir(), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return c.Path
}

func grade(t *testing.T, e *Env, file string, ex *exams.Exam, limit time.Duration) *Result {
	t.Helper()
	res, err := e.Grade(context.Background(), file, ex, time.Now().Add(limit), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// expected is the pass vector of a bundle that answers with f(prefix, n).
func expected(ex *exams.Exam, f func(prefix []byte, n int) []byte) report.PassVector {
	v := make(report.PassVector, len(ex.Questions))
	for i, q := range ex.Questions {
		v[i] = '0'
		if bytes.Equal(f(q.Prefix, len(q.Answer)), q.Answer) {
			v[i] = '1'
		}
	}
	return v
}

func TestGradeConstantAndMemorizer(t *testing.T) {
	e := testEnv(t, 5*time.Second)
	dir := t.TempDir()
	val := synthExam(t, dir, 7, 12)
	ex := synthExam(t, dir, 8, 20)

	// A constant bundle earns exactly the questions whose answer is its constant.
	constant := func(_ []byte, n int) []byte { return bytes.Repeat([]byte("1"), n) }
	file := pyBundle(t, `def answer(seq, prefix, n):
    return b"1" * n`, nil)
	res := grade(t, e, file, ex, time.Minute)
	if want := expected(ex, constant); string(res.Answers.Vector) != string(want) {
		t.Errorf("constant: vector %s, want %s", res.Answers.Vector, want)
	}
	if res.BitsPerByte == nil || *res.BitsPerByte != 8 || res.Answers.Restarts != 0 {
		t.Errorf("constant: bpb %v (%s), restarts %d", res.BitsPerByte, res.BitsNote, res.Answers.Restarts)
	}

	// A bundle carrying the validation answers in its own files: 100% on validation, and on
	// the exam exactly what the table earns there.
	table := map[string]string{}
	for _, q := range val.Questions {
		table[base64.StdEncoding.EncodeToString(q.Prefix)] = base64.StdEncoding.EncodeToString(q.Answer)
	}
	tj, _ := json.Marshal(table)
	mem := pyBundle(t, `TABLE = json.load(open("table.json")) if False else None
def answer(seq, prefix, n):
    import json, base64
    global TABLE
    if TABLE is None:
        TABLE = json.load(open("table.json"))
    a = TABLE.get(base64.b64encode(prefix).decode())
    return base64.b64decode(a)[:n].ljust(n, b" ") if a else b" " * n`, map[string]string{"table.json": string(tj)})
	u, err := e.Prepare(context.Background(), mem, "mem")
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.Validate(context.Background(), u, val, time.Now().Add(time.Minute), "mem-val")
	os.RemoveAll(u.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Vector.Passed() != len(val.Questions) {
		t.Errorf("memorizer on validation: %s (%s)", a.Vector, a.FirstNote)
	}
	lookup := func(p []byte, n int) []byte {
		if s, ok := table[base64.StdEncoding.EncodeToString(p)]; ok {
			b, _ := base64.StdEncoding.DecodeString(s)
			if len(b) > n {
				b = b[:n]
			}
			return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
		}
		return bytes.Repeat([]byte(" "), n)
	}
	res = grade(t, e, mem, ex, time.Minute)
	if want := expected(ex, lookup); string(res.Answers.Vector) != string(want) {
		t.Errorf("memorizer on the exam: %s, want %s", res.Answers.Vector, want)
	}
	t.Logf("memorizer: validation %d/%d, exam %d/%d", a.Vector.Passed(), len(a.Vector), res.Answers.Vector.Passed(), len(res.Answers.Vector))
}

// The example bundle of PROTOCOL.md grades, and grading it twice gives the same vector.
func TestExampleBundleDeterministic(t *testing.T) {
	e := testEnv(t, 5*time.Second)
	ex := synthExam(t, t.TempDir(), 3, 30)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "example"), 0o755)
	for _, n := range []string{"sealrun-bundle.json", "predict.py"} {
		b, err := os.ReadFile(filepath.Join("example", n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(ws, "example", n), b, 0o644)
	}
	c, err := Pack(context.Background(), ws, "example", t.TempDir(), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	r1 := grade(t, e, c.Path, ex, time.Minute)
	r2 := grade(t, e, c.Path, ex, time.Minute)
	if string(r1.Answers.Vector) != string(r2.Answers.Vector) || r1.BitsPerByte == nil || r2.BitsPerByte == nil || *r1.BitsPerByte != *r2.BitsPerByte {
		t.Fatalf("two gradings differ: %s %v / %s %v", r1.Answers.Vector, r1.BitsPerByte, r2.Answers.Vector, r2.BitsPerByte)
	}
	t.Logf("example bundle: %d/%d, %.3f bits per byte", r1.Answers.Vector.Passed(), len(ex.Questions), *r1.BitsPerByte)
}

func TestMisbehavingBundles(t *testing.T) {
	e := testEnv(t, 2*time.Second)
	ex := synthExam(t, t.TempDir(), 5, 10)
	right := `
ANSWERS = None
def right(prefix, n):
    return TRUE[base64.b64encode(prefix).decode()]
`
	truth := map[string]string{}
	for _, q := range ex.Questions {
		truth[base64.StdEncoding.EncodeToString(q.Prefix)] = string(q.Answer)
	}
	tj, _ := json.Marshal(truth)
	// Every bundle below knows the right answers (from truth.json) and misbehaves in one way.
	pre := `import json, base64
TRUE = {k: v.encode() for k, v in json.load(open("truth.json")).items()}` + right
	cases := []struct {
		name     string
		body     string
		want     string // the vector
		outcomes map[report.Outcome]int
		restarts int
	}{
		{"crashes on question 7", pre + `
def answer(seq, prefix, n):
    if seq == 7:
        os._exit(3)
    return right(prefix, n)`, "1111110111", map[report.Outcome]int{report.Pass: 9, report.Crash: 1}, 1},
		{"hangs on question 3", pre + `
def answer(seq, prefix, n):
    if seq == 3:
        time.sleep(3600)
    return right(prefix, n)`, "1101111111", map[report.Outcome]int{report.Pass: 9, report.Timeout: 1}, 1},
		{"prints every answer twice", pre + `
def answer(seq, prefix, n):
    respond({"seq": seq, "output_b64": base64.b64encode(right(prefix, n)).decode()})
    return right(prefix, n)`, "1111111111", map[report.Outcome]int{report.Pass: 10}, 0},
		{"prints a debug line before question 5", pre + `
def answer(seq, prefix, n):
    if seq == 5:
        print("debug: thinking", flush=True)
    return right(prefix, n)`, "1111011111", map[report.Outcome]int{report.Pass: 9, report.Malformed: 1}, 1},
		{"writes 10 MB per answer", pre + `
def answer(seq, prefix, n):
    sys.stdout.write("x" * 10000000 + "\n")
    sys.stdout.flush()
    return right(prefix, n)`, "0000000000", map[report.Outcome]int{report.Malformed: 4, report.NotRun: 6}, 4},
		{"answers one byte too many", pre + `
def answer(seq, prefix, n):
    return right(prefix, n) + (b"x" if seq % 2 else b"")`, "0101010101", map[report.Outcome]int{report.Pass: 5, report.WrongLength: 5}, 0},
		{"answers a later seq", pre + `
def answer(seq, prefix, n):
    respond({"seq": seq + 1, "output_b64": ""})
    return None`, "0000000000", map[report.Outcome]int{report.Malformed: 4, report.NotRun: 6}, 4},
		{"never ready", `import sys
sys.exit(1)
def answer(seq, prefix, n):
    return b""`, "0000000000", map[report.Outcome]int{report.NotRun: 10}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := pyBundle(t, c.body, map[string]string{"truth.json": string(tj)})
			start := time.Now()
			res := grade(t, e, file, ex, 2*time.Minute)
			a := res.Answers
			if string(a.Vector) != c.want || a.Restarts != c.restarts {
				t.Errorf("vector %s restarts %d; want %s restarts %d (%s)", a.Vector, a.Restarts, c.want, c.restarts, a.FirstNote)
			}
			got := a.Count()
			for o, n := range c.outcomes {
				if got[o] != n {
					t.Errorf("outcomes %v; want %v", got, c.outcomes)
					break
				}
			}
			t.Logf("%s: %s in %s, note %q, bpb %v %s", c.name, a.Vector, time.Since(start).Round(time.Millisecond), a.FirstNote, res.BitsPerByte, res.BitsNote)
		})
	}
	// The private logs name the question and the outcome; stderr was kept, capped.
	logs, _ := filepath.Glob(filepath.Join(e.WorkDir, "hidden", "*"))
	if len(logs) == 0 {
		t.Errorf("no grading logs kept")
	}
}

// A broken bundle (the agent's fault) fails grading with a clear reason; nothing runs.
func TestBrokenBundleFails(t *testing.T) {
	e := testEnv(t, 2*time.Second)
	ex := synthExam(t, t.TempDir(), 5, 4)
	tr := &policy.Track{ID: strings.Repeat("a", 64), Name: "t", Version: "1", Budget: policy.Budget{Grading: time.Minute}}
	for _, c := range []struct{ name, manifest, want string }{
		{"program not in the image", `{"protocol":"sealrun-bundle/v1","entrypoint":["python4","predict.py"]}`, `the entrypoint's program "python4" is not in the grader image`},
		{"bad protocol", `{"protocol":"v0","entrypoint":["python3","predict.py"]}`, `protocol is "v0"`},
		{"script missing", `{"protocol":"sealrun-bundle/v1","entrypoint":["python3","main.py"]}`, "names main.py, which is not in the bundle"},
		{"not executable", `{"protocol":"sealrun-bundle/v1","entrypoint":["./predict.py"]}`, "predict.py: is the entrypoint but not executable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			rel := bundleDir(t, ws, "b", map[string]string{ManifestName: c.manifest})
			cand, err := Pack(context.Background(), ws, rel, t.TempDir(), DefaultLimits(16<<20))
			if err != nil {
				t.Fatal(err)
			}
			var sealed report.PassVector
			res, err := e.Grade(context.Background(), cand.Path, ex, time.Now().Add(time.Minute), func(v report.PassVector) error { sealed = v; return nil })
			if err != nil {
				t.Fatal(err)
			}
			rep := res.Report(tr, ex, report.Candidate{ID: digest.Digest(cand.Digest()), Size: cand.Size}, e, nil)
			if res.BundleErr == nil || !strings.Contains(res.BundleErr.Error(), c.want) || rep.Status != "failed" || !strings.Contains(rep.Reason, c.want) || string(sealed) != "0000" {
				t.Errorf("bundle error %v; report %s %q; sealed %q", res.BundleErr, rep.Status, rep.Reason, sealed)
			}
		})
	}
}

// The harness's own cost per question, with an entrypoint that answers at once.
func TestFastBundle(t *testing.T) {
	e := testEnv(t, 2*time.Second)
	ex := synthExam(t, t.TempDir(), 9, 50)
	file := fastBundle(t)
	res := grade(t, e, file, ex, time.Minute)
	if want := expected(ex, func(_ []byte, n int) []byte { return bytes.Repeat([]byte("a"), n) }); string(res.Answers.Vector) != string(want) {
		t.Errorf("vector %s, want %s", res.Answers.Vector, want)
	}
	if res.BitsPerByte == nil || *res.BitsPerByte != 8 {
		t.Errorf("bpb %v %s", res.BitsPerByte, res.BitsNote)
	}
}

func fastBundle(t testing.TB) string {
	bin := sandboxtest.Static(t, "grader/internal/fastbundle")
	ws := t.TempDir()
	dir := filepath.Join(ws, "b")
	os.MkdirAll(dir, 0o755)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "fastbundle"), b, 0o755)
	os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"protocol":"sealrun-bundle/v1","entrypoint":["./fastbundle"]}`), 0o644)
	c, err := Pack(context.Background(), ws, "b", t.TempDir(), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	return c.Path
}

// From inside a grader container, a bundle finds /bundle read-only, an empty workspace mount
// point, an agent socket path nothing answers on, no exam file, and no way to reach the host (every host address, on a port the test
// listens on); it reports on stderr, which the grader keeps in the private log.
func TestBundleSandboxFromInside(t *testing.T) {
	e := testEnv(t, 5*time.Second)
	ex := synthExam(t, t.TempDir(), 5, 3)
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	addrs := []string{"127.0.0.1", "10.88.0.1"}
	ifaddrs, _ := net.InterfaceAddrs()
	for _, a := range ifaddrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			addrs = append(addrs, ipn.IP.String())
		}
	}
	aj, _ := json.Marshal(addrs)
	probe := `import os, socket, json, sys
def check(name, fn):
    try:
        fn()
        sys.stderr.write("PROBE %s: allowed\n" % name)
    except Exception as ex:
        sys.stderr.write("PROBE %s: refused (%s)\n" % (name, type(ex).__name__))
def write_bundle():
    open("/bundle/planted", "w").write("x")
def write_tmp():
    open("/tmp/scratch", "w").write("x")
def connect(a):
    def f():
        s = socket.create_connection((a, ` + fmt.Sprint(port) + `), timeout=2)
        s.close()
    return f
check("write /bundle", write_bundle)
check("write /tmp", write_tmp)
for a in json.load(open("addrs.json")):
    check("connect " + a, connect(a))
# The image has empty mount points for /workspace and the agent socket; nothing is mounted there.
sys.stderr.write("PROBE workspace entries: %d\n" % (len(os.listdir("/workspace")) if os.path.isdir("/workspace") else 0))
def agent_socket():
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/sealrun/agent.sock")
check("agent socket", agent_socket)
found = []
for d in ("/", "/tmp", "/bundle", "/run", "/var", "/home", "/root", "/mnt"):
    try:
        found += [os.path.join(d, n) for n in os.listdir(d) if n.endswith(".sealrun")]
    except Exception:
        pass
sys.stderr.write("PROBE exam files: %d\n" % len(found))
sys.stderr.flush()
def answer(seq, prefix, n):
    return b"x" * n`
	file := pyBundle(t, probe, map[string]string{"addrs.json": string(aj)})
	grade(t, e, file, ex, time.Minute)
	logs, _ := filepath.Glob(filepath.Join(e.WorkDir, "hidden", "answers-*.stderr"))
	if len(logs) == 0 {
		t.Fatal("no stderr log of the entrypoint")
	}
	out := string(mustReadFile(t, logs[0]))
	t.Logf("from inside the grader:\n%s", out)
	want := []string{"PROBE write /bundle: refused", "PROBE write /tmp: allowed", "PROBE workspace entries: 0", "PROBE agent socket: refused", "PROBE exam files: 0"}
	for _, a := range addrs {
		want = append(want, "PROBE connect "+a+": refused")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("from inside the grader, want %q", w)
		}
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
