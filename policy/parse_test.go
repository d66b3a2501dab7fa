package policy

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// base is a valid track; cases edit it.
const base = `# a comment
[track]
name = "t1"
version = "1"
status = "active"
supersedes = ""

[budget]
wall = "1h"
call_limit = "20m"
reserve = "5m"
grading = "30m"
question_limit = "30s"

[artifact]
max_gzip_bytes = 16777216

[exam]
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"
questions = 100
context_bytes = 1024
validation_sha256 = "2222222222222222222222222222222222222222222222222222222222222222"

[kit]
sha256 = "3333333333333333333333333333333333333333333333333333333333333333"

[images]
controller = "registry.example/sealrun/controller@sha256:4444444444444444444444444444444444444444444444444444444444444444"
runner = "registry.example/sealrun/python@sha256:5555555555555555555555555555555555555555555555555555555555555555"
grader = "localhost:5000/python:v1@sha256:5555555555555555555555555555555555555555555555555555555555555555"

[scaffold]
name = "opencode"
version = "1.2.3"
config_sha256 = "6666666666666666666666666666666666666666666666666666666666666666"

[seeds]
required = 3

[resources]
gpus = 1
cpus = 8
memory = "64GiB"
workspace = 1073741824
`

// edit replaces the first line starting with old (a key or table header) by repl ("" deletes it).
func edit(t *testing.T, src, old, repl string) string {
	t.Helper()
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, old) {
			if repl == "" {
				return strings.Join(append(lines[:i:i], lines[i+1:]...), "\n")
			}
			lines[i] = repl
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("edit: no line starts with %q", old)
	return ""
}

func TestParseValid(t *testing.T) {
	tr, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Budget{Wall: time.Hour, CallLimit: 20 * time.Minute, Reserve: 5 * time.Minute, Grading: 30 * time.Minute, QuestionLimit: 30 * time.Second}
	if tr.Budget != want {
		t.Errorf("budget = %+v, want %+v", tr.Budget, want)
	}
	if got := tr.Images.Grader; got.Name != "localhost:5000/python:v1" || !strings.HasPrefix(string(got.Digest), "sha256:5555") {
		t.Errorf("grader = %+v", got)
	}
	if tr.Resources.Memory != 64<<30 || tr.Resources.Workspace != 1<<30 {
		t.Errorf("resources = %+v", tr.Resources)
	}
	if tr.Status != StatusActive || tr.Seeds.Required != 3 || tr.Exam.Questions != 100 || tr.Artifact.MaxGzipBytes != 16<<20 {
		t.Errorf("track = %+v", tr)
	}
	if len(tr.ID) != 64 {
		t.Errorf("id = %q", tr.ID)
	}
}

func TestParseRejects(t *testing.T) {
	type change struct{ old, repl string }
	tests := []struct {
		name    string
		changes []change
		key     string // the problem's key
		msg     string // substring of its message
	}{
		{"unknown table", []change{{"[seeds]", "[seedz]"}}, "seedz", `unknown table; expected one of track, budget`},
		{"unknown table suggests", []change{{"[seeds]", "[sedes]"}}, "sedes", `did you mean "seeds"?`},
		{"unknown key", []change{{"grading", "grading = \"30m\"\ngradin = \"1m\""}}, "budget.gradin", `did you mean "grading"?`},
		{"unknown key far from any", []change{{"gpus", "gpus = 1\ncolour = \"blue\""}}, "resources.colour", "unknown key; [resources] takes gpus, cpus, memory, workspace"},
		{"missing key", []change{{"reserve", ""}}, "budget.reserve", "missing key; expected a positive Go duration"},
		{"missing table", []change{{"[kit]", ""}, {"sha256 = \"3333", ""}}, "kit", "missing table [kit]; add it with keys sha256"},
		{"table is a value", []change{{"# a comment", "kit = 3"}, {"[kit]", ""}, {"sha256 = \"3333", ""}}, "kit", "is an integer (3); expected a table [kit]"},
		{"wrong type string for int", []change{{"questions", `questions = "100"`}}, "exam.questions", `is a string ("100"); expected a whole number >= 1`},
		{"wrong type int for string", []change{{"version", `version = 1`}}, "track.version", "is an integer (1); expected a non-empty string"},
		{"wrong type bool", []change{{"cpus", `cpus = true`}}, "resources.cpus", "is a boolean (true)"},
		{"array", []change{{"cpus", `cpus = [1, 2]`}}, "resources.cpus", "is an array"},
		{"inline table", []change{{"cpus", `cpus = {n = 1}`}}, "resources.cpus", "is a table"},
		{"float", []change{{"cpus", `cpus = 8.0`}}, "resources.cpus", "floats are not allowed in tracks"},
		{"float in size", []change{{"workspace", `workspace = 1e9`}}, "resources.workspace", "floats are not allowed"},
		{"datetime", []change{{"questions", `questions = 1979-05-27T07:32:00Z`}}, "exam.questions", "datetimes are not allowed in tracks"},
		{"local date", []change{{"wall", `wall = 1979-05-27`}}, "budget.wall", "datetimes are not allowed"},
		{"local time", []change{{"wall", `wall = 07:32:00`}}, "budget.wall", "datetimes are not allowed"},
		{"malformed duration", []change{{"wall", `wall = "1 hour"`}}, "budget.wall", `is "1 hour", not a duration`},
		{"duration without unit", []change{{"wall", `wall = "3600"`}}, "budget.wall", "not a duration"},
		{"zero duration", []change{{"grading", `grading = "0s"`}}, "budget.grading", "not positive"},
		{"negative duration", []change{{"grading", `grading = "-1m"`}}, "budget.grading", "not positive"},
		{"reserve equals wall", []change{{"reserve", `reserve = "1h"`}}, "budget.reserve", "is not shorter than budget.wall"},
		{"reserve over wall", []change{{"reserve", `reserve = "2h"`}}, "budget.reserve", "is not shorter than budget.wall"},
		{"call limit over wall minus reserve", []change{{"call_limit", `call_limit = "56m"`}}, "budget.call_limit", "set call_limit <= 55m0s"},
		{"digest with prefix", []change{{"sha256 = \"1111", `sha256 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"`}}, "exam.sha256", `drop the "sha256:" prefix`},
		{"digest uppercase", []change{{"validation_sha256", `validation_sha256 = "2222222222222222222222222222222222222222222222222222222222222ABC"`}}, "exam.validation_sha256", "not 64 lowercase hex"},
		{"digest short", []change{{"config_sha256", `config_sha256 = "66"`}}, "scaffold.config_sha256", "not 64 lowercase hex"},
		{"image without digest", []change{{"runner", `runner = "registry.example/sealrun/python:latest"`}}, "images.runner", "is not pinned by digest; run `sealrun images pin registry.example/sealrun/python:latest`"},
		{"image with other algo", []change{{"runner", `runner = "r.example/p@sha512:5555"`}}, "images.runner", "is not sha256"},
		{"image with short digest", []change{{"runner", `runner = "r.example/p@sha256:5555"`}}, "images.runner", "digest is not sha256: followed by 64 lowercase hex"},
		{"image uppercase repo", []change{{"runner", `runner = "r.example/Python@sha256:5555555555555555555555555555555555555555555555555555555555555555"`}}, "images.runner", "not a valid image repository name"},
		{"image empty name", []change{{"runner", `runner = "@sha256:5555555555555555555555555555555555555555555555555555555555555555"`}}, "images.runner", "not a valid image repository name"},
		{"status not in set", []change{{"status", `status = "draft"`}}, "track.status", `one of "active", "legacy", "withdrawn"`},
		{"supersedes not an id", []change{{"supersedes", `supersedes = "ari-v0"`}}, "track.supersedes", "not a track id"},
		{"name with spaces", []change{{"name = \"t1\"", `name = "my track"`}}, "track.name", "expected a lowercase name"},
		{"empty string", []change{{"version = \"1.2.3\"", `version = "  "`}}, "scaffold.version", "is empty"},
		{"seeds zero", []change{{"required", `required = 0`}}, "seeds.required", "is 0, out of range"},
		{"seeds negative", []change{{"required", `required = -3`}}, "seeds.required", "out of range"},
		{"gpus negative", []change{{"gpus", `gpus = -1`}}, "resources.gpus", "expected a whole number >= 0"},
		{"size zero", []change{{"max_gzip_bytes", `max_gzip_bytes = 0`}}, "artifact.max_gzip_bytes", "is 0, out of range"},
		{"size zero string", []change{{"memory", `memory = "0GiB"`}}, "resources.memory", "out of range"},
		{"size negative", []change{{"workspace", `workspace = -5`}}, "resources.workspace", "out of range"},
		{"size unit unknown", []change{{"memory", `memory = "64GB"`}}, "resources.memory", `is "64GB", not a size`},
		{"size overflow", []change{{"memory", `memory = "99999999TiB"`}}, "resources.memory", "out of range"},
		{"integer beyond 2^53", []change{{"questions", `questions = 9007199254740993`}}, "exam.questions", "out of range"},
		{"max_tokens zero", []change{{"question_limit", "question_limit = \"30s\"\nmax_tokens = 0"}}, "budget.max_tokens", "is 0, out of range"},
		{"max_tokens string", []change{{"question_limit", "question_limit = \"30s\"\nmax_tokens = \"1M\""}}, "budget.max_tokens", "expected a whole number >= 1"},
		{"max_cost float", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = 25.0"}}, "budget.max_cost", "floats are not allowed in tracks"},
		{"max_cost no currency", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = \"25\""}}, "budget.max_cost", `write it as "25.00 USD"`},
		{"max_cost lowercase currency", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = \"25 usd\""}}, "budget.max_cost", "three-letter currency code"},
		{"max_cost zero", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = \"0.00 USD\""}}, "budget.max_cost", "above zero"},
		{"max_cost negative", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = \"-5 USD\""}}, "budget.max_cost", "not an amount and a currency"},
		{"max_cost too precise", []change{{"question_limit", "question_limit = \"30s\"\nmax_cost = \"0.0000001 USD\""}}, "budget.max_cost", "not an amount"},
		{"long string", []change{{"version = \"1\"", `version = "` + strings.Repeat("v", 300) + `"`}}, "track.version", "at most 256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			for _, c := range tc.changes {
				src = edit(t, src, c.old, c.repl)
			}
			_, err := Parse("t.toml", []byte(src))
			var it *InvalidTrackError
			if !errors.As(err, &it) {
				t.Fatalf("Parse = %v, want *InvalidTrackError", err)
			}
			for _, p := range it.Problems {
				if p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
					if !strings.HasPrefix(p.String(), "t.toml:"+tc.key+": ") {
						t.Errorf("problem %q does not start with file:key", p)
					}
					return
				}
			}
			t.Errorf("no problem at %s containing %q; got:\n%v", tc.key, tc.msg, err)
		})
	}
}

// TestSpendBounds: max_tokens and max_cost are optional; a track without them keeps the id it had
// before they existed, and a track with them has another.
func TestSpendBounds(t *testing.T) {
	plain, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Budget.MaxTokens != 0 || !plain.Budget.MaxCost.IsZero() {
		t.Errorf("bounds of a track without them = %d, %v", plain.Budget.MaxTokens, plain.Budget.MaxCost)
	}
	// The id of base as it was before [budget] could bound tokens and cost.
	if want := "7fa34c63e8af9038b797fbff40129b102043302b81f9f8ccd423e4c2f407c017"; plain.ID != want {
		t.Errorf("id = %s, want %s", plain.ID, want)
	}
	src := edit(t, base, "question_limit", "question_limit = \"30s\"\nmax_tokens = 2000000\nmax_cost = \"12.50 USD\"")
	bounded, err := Parse("t.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if bounded.Budget.MaxTokens != 2000000 || bounded.Budget.MaxCost != (Money{Amount: 12.5, Currency: "USD"}) {
		t.Errorf("bounds = %d, %+v", bounded.Budget.MaxTokens, bounded.Budget.MaxCost)
	}
	if bounded.ID == plain.ID {
		t.Error("bounding a track's tokens and cost kept its id")
	}
	if s := bounded.Budget.MaxCost.String(); s != "12.5 USD" {
		t.Errorf("max_cost written as %q", s)
	}
}

func TestPriceCost(t *testing.T) {
	p := Price{Currency: "USD", Input: 3, CachedInput: 0.3, CacheWrite: 3.75, Output: 15}
	// 1M input of which 600k cached and 100k written, 200k output.
	got := p.Cost(Tokens{Input: 1_000_000, CachedInput: 600_000, CacheWrite: 100_000, Output: 200_000, Reasoning: 50_000})
	want := 0.3*3 + 0.6*0.3 + 0.1*3.75 + 0.2*15
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("cost = %v, want %v", got, want)
	}
	// Counts a provider reports inconsistently never give a negative fresh input.
	if c := p.Cost(Tokens{Input: 10, CachedInput: 20}); c < 0 {
		t.Errorf("cost = %v", c)
	}
	var sum Tokens
	sum.Add(Tokens{Input: 1, CachedInput: 1, CacheWrite: 1, Output: 1, Reasoning: 1})
	sum.Add(Tokens{Input: 2, Output: 3})
	if sum != (Tokens{Input: 3, CachedInput: 1, CacheWrite: 1, Output: 4, Reasoning: 1}) || sum.Total() != 7 {
		t.Errorf("sum = %+v", sum)
	}
}

func TestParseReportsAllProblems(t *testing.T) {
	src := edit(t, base, "wall", `wall = "soon"`)
	src = edit(t, src, "required", "required = 0")
	src = edit(t, src, "[resources]", "[resourcez]")
	_, err := Parse("t.toml", []byte(src))
	var it *InvalidTrackError
	if !errors.As(err, &it) {
		t.Fatalf("Parse = %v", err)
	}
	var keys []string
	for _, p := range it.Problems {
		keys = append(keys, p.Key)
	}
	want := []string{"budget.wall", "seeds.required", "resources", "resourcez"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("problem keys = %v, want %v", keys, want)
	}
}

func TestParseBadBytes(t *testing.T) {
	tests := []struct {
		name, data, key, msg string
	}{
		{"empty", "", "track", "missing table [track]"},
		{"nul", "[track]\x00", "", "contains a NUL byte at offset 7"},
		{"invalid utf8", "[track]\nname = \"\xff\"", "", "not valid UTF-8 (offset 16)"},
		{"syntax", "[track\nname = 1", "2:7", "TOML syntax error"},
		{"duplicate key", "[track]\nname = \"a\"\nname = \"b\"", "3:12", "has already been defined"},
		{"array of tables", strings.Replace(base, "[seeds]", "[[seeds]]", 1), "seeds", "is a table; expected a table [seeds]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.toml", []byte(tc.data))
			var it *InvalidTrackError
			if !errors.As(err, &it) {
				t.Fatalf("Parse = %v", err)
			}
			for _, p := range it.Problems {
				if p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want problem %s %q, got:\n%v", tc.key, tc.msg, err)
		})
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.toml", []byte(base), 0o644)
	big := write("big.toml", nil, 0o644)
	if err := os.Truncate(big, 100<<20); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, msg string
	}{
		{"missing", filepath.Join(dir, "nope.toml"), "no such file"},
		{"directory", dir, "is a directory"},
		{"100 MB", big, "is 104857600 bytes; track files are at most 1048576 bytes"},
		{"device", "/dev/null", "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path)
			var it *InvalidTrackError
			if !errors.As(err, &it) || len(it.Problems) != 1 {
				t.Fatalf("Load = %v", err)
			}
			if got := it.Error(); !strings.HasPrefix(got, tc.path+": ") || !strings.Contains(got, tc.msg) || strings.Contains(got, "\n") {
				t.Errorf("Load error = %q, want one line starting with the path, containing %q", got, tc.msg)
			}
		})
	}
	if _, err := Load(good); err != nil {
		t.Errorf("Load(good) = %v", err)
	}
}

func TestShippedTracks(t *testing.T) {
	for _, name := range []string{"ari-v1.toml", "demo.toml"} {
		tr, err := Load(filepath.Join("..", "tracks", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "ari-v1.toml" {
			b := tr.Budget
			if b.Wall != time.Hour || b.CallLimit != 20*time.Minute || b.Reserve != 5*time.Minute ||
				tr.Artifact.MaxGzipBytes != 16<<20 || tr.Exam.Questions != 100 || tr.Exam.ContextBytes != 1024 || tr.Seeds.Required != 3 {
				t.Errorf("ari-v1 does not match the protocol: %+v", tr)
			}
		} else if tr.Budget.Wall > 10*time.Minute {
			t.Errorf("demo wall = %v; a demo should finish in minutes", tr.Budget.Wall)
		}
	}
}

// taskTrack is base as an AIRS task track: [task] in place of [exam] and [kit], no
// question_limit.
func taskTrack(t *testing.T) string {
	s := base
	s = strings.Replace(s, "[exam]\nsha256 = \"1111111111111111111111111111111111111111111111111111111111111111\"\nquestions = 100\ncontext_bytes = 1024\nvalidation_sha256 = \"2222222222222222222222222222222222222222222222222222222222222222\"\n\n[kit]\nsha256 = \"3333333333333333333333333333333333333333333333333333333333333333\"\n",
		"[task]\nkind = \"airs\"\nname = \"DigitsClassificationAccuracy\"\nsha256 = \"7777777777777777777777777777777777777777777777777777777777777777\"\ndata_sha256 = \"8888888888888888888888888888888888888888888888888888888888888888\"\n", 1)
	s = strings.Replace(s, "question_limit = \"30s\"\n", "", 1)
	if !strings.Contains(s, "[task]") || strings.Contains(s, "[exam]") {
		t.Fatal("the task track was not made")
	}
	return s
}

// A task track pins the task and its data in [task], without [exam], [kit] or question_limit.
func TestTaskTrack(t *testing.T) {
	tr, err := Parse("task.toml", []byte(taskTrack(t)))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Task == nil || tr.Task.Kind != TaskAIRS || tr.Task.Name != "DigitsClassificationAccuracy" || tr.Task.SHA256[0] != '7' || tr.Task.DataSHA256[0] != '8' || tr.Exam.SHA256 != "" {
		t.Errorf("task %+v exam %+v", tr.Task, tr.Exam)
	}
	// The paper's budget: 24 hours on one GPU, long calls, a long grading.
	long := strings.NewReplacer(`wall = "1h"`, `wall = "24h"`, `call_limit = "20m"`, `call_limit = "12h"`, `reserve = "5m"`, `reserve = "30m"`, `grading = "30m"`, `grading = "4h"`).Replace(taskTrack(t))
	if lt, err := Parse("task-24h.toml", []byte(long)); err != nil || lt.Budget.Wall != 24*time.Hour || lt.Budget.CallLimit != 12*time.Hour {
		t.Errorf("a 24-hour task track: %v", err)
	}
	if ex, err := Parse("exam.toml", []byte(base)); err != nil || ex.Task != nil {
		t.Errorf("an exam track has a task: %v %+v", err, ex)
	}
	for _, c := range []struct{ name, src, want string }{
		{"task and exam", strings.Replace(taskTrack(t), "[task]", "[exam]\nsha256 = \"1111111111111111111111111111111111111111111111111111111111111111\"\nquestions = 1\ncontext_bytes = 1\nvalidation_sha256 = \"1111111111111111111111111111111111111111111111111111111111111111\"\n\n[task]", 1),
			"task.toml:exam: an AIRS task track ([task]) has no [exam]"},
		{"kind", strings.Replace(taskTrack(t), `kind = "airs"`, `kind = "kaggle"`, 1), `task.toml:task.kind: is "kaggle", not a task kind; expected "airs"`},
		{"no data", strings.Replace(taskTrack(t), "data_sha256 = \"8888888888888888888888888888888888888888888888888888888888888888\"\n", "", 1), "task.toml:task.data_sha256: missing key"},
		{"bad hash", strings.Replace(taskTrack(t), "sha256 = \"7777", "sha256 = \"X777", 1), "task.toml:task.sha256:"},
		{"typo", strings.Replace(taskTrack(t), "name = \"DigitsClassificationAccuracy\"", "nmae = \"x\"", 1), "task.toml:task.nmae: unknown key; [task] takes kind, name, sha256, data_sha256"},
		{"neither", strings.Replace(base, "[exam]", "[exma]", 1), "task.toml:exam: missing table [exam]"},
	} {
		_, err := Parse("task.toml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512MiB": 512 << 20, "16GiB": 16 << 30, "3B": 3} {
		if n, err := ParseBytes(in); err != nil || n != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "16GB", "1.5GiB", "99999999999TiB", "GiB", " 1GiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}

// TestHumanTable: [human] is optional (a track without it takes no human runs and keeps its id);
// with it, start is required and image optional, each checked like any key.
func TestHumanTable(t *testing.T) {
	plain, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Human != nil {
		t.Errorf("a track without [human] has %+v", plain.Human)
	}
	h, err := Parse("t.toml", []byte(base+"\n[human]\nstart = \"15m\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Human == nil || h.Human.Start != 15*time.Minute || h.Human.Image != (ImageRef{}) || h.ID == plain.ID {
		t.Errorf("human = %+v (id %s)", h.Human, h.ID)
	}
	img := "registry.example/sealrun/human@sha256:7777777777777777777777777777777777777777777777777777777777777777"
	h, err = Parse("t.toml", []byte(base+"\n[human]\nstart = \"1m\"\nimage = \""+img+"\"\n"))
	if err != nil || h.Human.Image.String() != img {
		t.Fatalf("human image: %v, %+v", err, h)
	}
	h, err = Parse("t.toml", []byte(base+"\n[human]\nstart = \"1m\"\npauses = \"10m\"\n"))
	if err != nil || h.Human.Pauses != 10*time.Minute {
		t.Fatalf("human pauses: %v, %+v", err, h)
	}
	for _, c := range []struct{ add, key, want string }{
		{"[human]\n", "human.start", "missing key"},
		{"[human]\nstart = \"0s\"\n", "human.start", "positive"},
		{"[human]\nstart = \"15m\"\nbreaks = \"5m\"\n", "human.breaks", "unknown key; [human] takes start, image, pauses"},
		{"[human]\nstart = \"15m\"\npauses = \"0s\"\n", "human.pauses", "positive"},
		{"[human]\nstart = \"15m\"\npauses = \"100h\"\n", "human.pauses", "longer than budget.wall"},
		{"[human]\nstart = \"15m\"\nimage = \"busybox:latest\"\n", "human.image", "pinned by digest"},
		{"human = \"yes\"\n", "human", "expected a table [human]"},
	} {
		src := base + "\n" + c.add
		if !strings.HasPrefix(c.add, "[") {
			src = c.add + base
		}
		_, err := Parse("t.toml", []byte(src))
		var ie *InvalidTrackError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s: ...%s...", c.add, err, c.key, c.want)
		}
	}
}

// TestAmendmentsTable: [amendments] is optional (a track without it keeps its id, and its
// amendments need the host's signature only); its reviewers are public keys, each checked.
func TestAmendmentsTable(t *testing.T) {
	key := func(curve elliptic.Curve) string {
		var pub any
		if curve == nil {
			p, _, _ := ed25519.GenerateKey(rand.Reader)
			pub = p
		} else {
			k, _ := ecdsa.GenerateKey(curve, rand.Reader)
			pub = k.Public()
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(der)
	}
	ed, p256 := key(nil), key(elliptic.P256())
	plain, err := Parse("t.toml", []byte(base))
	if err != nil || plain.Amendments != nil {
		t.Fatalf("a track without [amendments]: %v %+v", err, plain.Amendments)
	}
	tr, err := Parse("t.toml", []byte(base+"\n[amendments]\nreviewers = [\""+ed+"\", \""+p256+"\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Amendments == nil || len(tr.Amendments.Reviewers) != 2 || tr.Amendments.Reviewers[1].Base64 != p256 || len(tr.Amendments.Reviewers[0].KeyID) != 64 || tr.ID == plain.ID {
		t.Errorf("amendments = %+v (id %s)", tr.Amendments, tr.ID)
	}
	many := strings.Repeat(`"`+ed+`", `, MaxReviewers+1)
	for _, c := range []struct{ add, key, want string }{
		{"[amendments]\n", "amendments.reviewers", "missing key"},
		{"[amendments]\nreviewers = []\n", "amendments.reviewers", "has 0 keys"},
		{"[amendments]\nreviewers = [" + many + "]\n", "amendments.reviewers", "has 9 keys"},
		{"[amendments]\nreviewers = \"" + ed + "\"\n", "amendments.reviewers", "is a string"},
		{"[amendments]\nreviewers = [1]\n", "amendments.reviewers[0]", "expected the base64"},
		{"[amendments]\nreviewers = [\"" + ed + "\", \"" + ed + "\"]\n", "amendments.reviewers[1]", "is the key of amendments.reviewers[0] again"},
		{"[amendments]\nreviewers = [\"not base64!\"]\n", "amendments.reviewers[0]", "not standard base64"},
		{"[amendments]\nreviewers = [\"" + base64.StdEncoding.EncodeToString([]byte("a certificate, say")) + "\"]\n", "amendments.reviewers[0]", "not a PKIX public key"},
		{"[amendments]\nreviewers = [\"" + key(elliptic.P384()) + "\"]\n", "amendments.reviewers[0]", "ECDSA key on P-384"},
		{"[amendments]\nreviewers = [\"" + strings.Repeat("A", 300) + "\"]\n", "amendments.reviewers[0]", "is 300 bytes"},
		{"[amendments]\nreviewers = [\"" + ed + "\"]\nquorum = 2\n", "amendments.quorum", "unknown key; [amendments] takes reviewers"},
	} {
		_, err := Parse("t.toml", []byte(base+"\n"+c.add))
		var ie *InvalidTrackError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %s: ...%s...", c.add, err, c.key, c.want)
		}
	}
}
