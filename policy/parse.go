package policy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/internal/fileio"
)

// MaxTrackBytes is the largest track file Load accepts. Real tracks are about 2 KiB.
const MaxTrackBytes = 1 << 20

// maxSafeInt is the largest integer RFC 8785 (I-JSON) represents exactly; track ids need exactness.
const maxSafeInt = 1<<53 - 1

// Problem is one thing wrong with a track file, at one key.
type Problem struct {
	File string // as given by the caller
	Key  string // "table.key", "table", or "" for the whole file; may carry ":line:col" for syntax errors
	Msg  string // what is wrong; what is expected
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.File + ": " + p.Msg
	}
	return p.File + ":" + p.Key + ": " + p.Msg
}

// InvalidTrackError lists every problem found in a track file. Callers branch on it with
// errors.As to tell bad input (exit 1) from a broken environment.
type InvalidTrackError struct {
	File     string
	Problems []Problem
}

func (e *InvalidTrackError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Load reads and parses the track file at path. A missing, unreadable, oversized or non-regular
// file is reported as an *InvalidTrackError with a single problem, like every other bad input.
func Load(path string) (*Track, error) {
	data, err := readTrackFile(path)
	if err != nil {
		return nil, &InvalidTrackError{File: path, Problems: []Problem{{File: path, Msg: err.Error()}}}
	}
	return Parse(path, data)
}

func readTrackFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil, errors.New("no such file; give the path of a track file, for example tracks/ari-v1.toml")
		case errors.Is(err, os.ErrPermission):
			return nil, errors.New("permission denied; make the file readable or run as its owner")
		}
		return nil, fmt.Errorf("cannot open: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot stat: %v", err)
	}
	if st.IsDir() {
		return nil, errors.New("is a directory; give the path of a track file inside it, for example tracks/ari-v1.toml")
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("is not a regular file (%s); give the path of a track file", st.Mode().Type())
	}
	if st.Size() > MaxTrackBytes {
		return nil, fmt.Errorf("is %d bytes; track files are at most %d bytes (1 MiB) — is this really a track?", st.Size(), MaxTrackBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxTrackBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", err)
	}
	if len(data) > MaxTrackBytes {
		return nil, fmt.Errorf("is over %d bytes (1 MiB); track files are small TOML files", MaxTrackBytes)
	}
	return data, nil
}

// Parse validates a track file's bytes and returns the track. file names the input in problems.
// On any problem it returns an *InvalidTrackError that lists all of them, in schema order.
func Parse(file string, data []byte) (*Track, error) {
	bad := func(key, format string, args ...any) error {
		return &InvalidTrackError{File: file, Problems: []Problem{{File: file, Key: key, Msg: fmt.Sprintf(format, args...)}}}
	}
	if len(data) > MaxTrackBytes {
		return nil, bad("", "is %d bytes; track files are at most %d bytes (1 MiB)", len(data), MaxTrackBytes)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, bad("", "contains a NUL byte at offset %d; a track file is UTF-8 TOML text, not binary", i)
	}
	if !utf8.Valid(data) {
		return nil, bad("", "is not valid UTF-8 (offset %d); a track file is UTF-8 TOML text", fileio.InvalidUTF8(data))
	}
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, bad(fmt.Sprintf("%d:%d", pe.Position.Line, pe.Position.Col), "TOML syntax error: %s; fix the syntax (see tracks/ari-v1.toml for a complete example)", pe.Message)
		}
		return nil, bad("", "TOML error: %v", err)
	}
	v := &validator{file: file, raw: raw}
	t := v.track(md)
	if len(v.problems) > 0 {
		return nil, &InvalidTrackError{File: file, Problems: v.problems}
	}
	canon, err := CanonicalJSON(raw)
	if err != nil {
		return nil, bad("", "cannot compute the track id: %v", err)
	}
	sum := sha256.Sum256(canon)
	t.ID, t.canonical = hex.EncodeToString(sum[:]), canon
	return t, nil
}

// kind is how a key's value is checked and converted.
type kind int

const (
	kString      kind = iota // non-empty string
	kName                    // lowercase name: [a-z0-9][a-z0-9._-]*
	kStatus                  // one of the statuses
	kTaskKind                // the kind of task: airs
	kTrackID                 // "" or 64 lowercase hex
	kDuration                // Go duration string, > 0
	kPositive                // integer >= 1
	kNonNegative             // integer >= 0
	kSize                    // integer bytes >= 1, or "<n><unit>" with an IEC unit
	kSHA256                  // 64 lowercase hex
	kImage                   // name@sha256:<64 hex>
	kMoney                   // "25.00 USD": an amount above zero and a currency code
	kKeys                    // 1 to MaxReviewers public keys: base64 of PKIX DER, ed25519 or ECDSA P-256
)

type keySpec struct {
	name string
	kind kind
}

// optionalKeys may be left out; a track without them keeps its id.
var optionalKeys = map[string]bool{"budget.max_tokens": true, "budget.max_cost": true, "human.image": true, "human.pauses": true}

// optionalTables may be left out; a track without them keeps its id.
var optionalTables = map[string]bool{"human": true, "amendments": true}

type tableSpec struct {
	name string
	keys []keySpec
}

// schema is the whole track format: every table and key, in the order problems are reported.
var schema = []tableSpec{
	{"track", []keySpec{{"name", kName}, {"version", kString}, {"status", kStatus}, {"supersedes", kTrackID}}},
	{"budget", []keySpec{{"wall", kDuration}, {"call_limit", kDuration}, {"reserve", kDuration}, {"grading", kDuration}, {"question_limit", kDuration}, {"max_tokens", kPositive}, {"max_cost", kMoney}}},
	{"artifact", []keySpec{{"max_gzip_bytes", kPositive}}},
	{"exam", []keySpec{{"sha256", kSHA256}, {"questions", kPositive}, {"context_bytes", kPositive}, {"validation_sha256", kSHA256}}},
	{"kit", []keySpec{{"sha256", kSHA256}}},
	{"task", []keySpec{{"kind", kTaskKind}, {"name", kString}, {"sha256", kSHA256}, {"data_sha256", kSHA256}}},
	{"images", []keySpec{{"controller", kImage}, {"runner", kImage}, {"grader", kImage}}},
	{"scaffold", []keySpec{{"name", kString}, {"version", kString}, {"config_sha256", kSHA256}}},
	{"seeds", []keySpec{{"required", kPositive}}},
	{"resources", []keySpec{{"gpus", kNonNegative}, {"cpus", kPositive}, {"memory", kSize}, {"workspace", kSize}}},
	{"human", []keySpec{{"start", kDuration}, {"image", kImage}, {"pauses", kDuration}}},
	{"amendments", []keySpec{{"reviewers", kKeys}}},
}

type validator struct {
	file     string
	raw      map[string]any
	problems []Problem
}

func (v *validator) add(key, format string, args ...any) {
	v.problems = append(v.problems, Problem{File: v.file, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// values holds every converted value by "table.key"; a key with a problem is absent.
type values map[string]any

// track converts every table and key of the schema into a Track, each problem recorded with
// its file:table.key. It is long because it is the schema's rules in order, one block per table,
// so the order of the problems it reports is the order of the documented tables.
func (v *validator) track(md toml.MetaData) *Track {
	got := values{}
	known := map[string]tableSpec{}
	var tableNames []string
	for _, ts := range schema {
		known[ts.name] = ts
		tableNames = append(tableNames, ts.name)
	}
	_, isTask := v.raw["task"]
	for _, ts := range schema {
		rv, ok := v.raw[ts.name]
		if ok && isTask && (ts.name == "exam" || ts.name == "kit") {
			v.add(ts.name, "an AIRS task track ([task]) has no [%s]: its task directory and data are pinned in [task]; remove [%s], or [task] for an exam track", ts.name, ts.name)
			continue
		}
		if !ok && (ts.name == "task" || optionalTables[ts.name] || (isTask && (ts.name == "exam" || ts.name == "kit"))) {
			continue // [task] replaces [exam] and [kit]
		}
		if !ok {
			hint := ""
			if ts.name == "exam" || ts.name == "kit" {
				hint = " (or, for an AIRS task track, a [task] table instead of [exam] and [kit])"
			}
			v.add(ts.name, "missing table [%s]; add it with keys %s%s", ts.name, keyList(ts), hint)
			continue
		}
		tbl, ok := rv.(map[string]any)
		if !ok {
			v.add(ts.name, "is %s; expected a table [%s] with keys %s", describe(rv), ts.name, keyList(ts))
			continue
		}
		for _, ks := range ts.keys {
			full := ts.name + "." + ks.name
			val, ok := tbl[ks.name]
			if !ok && isTask && full == "budget.question_limit" {
				continue // a task is scored by one evaluate.py run, within budget.grading
			}
			if !ok && optionalKeys[full] {
				continue
			}
			if !ok {
				v.add(full, "missing key; expected %s", expectation(ks.kind))
				continue
			}
			if c, ok := v.convert(full, ks.kind, val); ok {
				got[full] = c
			}
		}
	}
	// Unknown tables and keys, in file order, so that a typo never passes silently.
	seen := map[string]bool{}
	for _, k := range md.Keys() {
		switch len(k) {
		case 1:
			if _, ok := known[k[0]]; !ok && !seen[k[0]] {
				seen[k[0]] = true
				v.add(k[0], "unknown table; expected one of %s%s", strings.Join(tableNames, ", "), suggest(k[0], tableNames))
			}
		default:
			ts, ok := known[k[0]]
			if !ok {
				continue // reported with its table
			}
			if _, isTable := v.raw[k[0]].(map[string]any); !isTable {
				continue
			}
			name := strings.Join(k[:2], ".")
			if seen[name] {
				continue
			}
			var names []string
			found := false
			for _, ks := range ts.keys {
				names = append(names, ks.name)
				found = found || ks.name == k[1]
			}
			if !found {
				seen[name] = true
				v.add(name, "unknown key; [%s] takes %s%s", k[0], strings.Join(names, ", "), suggest(k[1], names))
			}
		}
	}
	t := &Track{}
	str := func(k string) string { s, _ := got[k].(string); return s }
	dur := func(k string) time.Duration { d, _ := got[k].(time.Duration); return d }
	num := func(k string) int64 { n, _ := got[k].(int64); return n }
	money := func(k string) Money { m, _ := got[k].(Money); return m }
	img := func(k string) ImageRef { r, _ := got[k].(ImageRef); return r }
	t.Name, t.Version, t.Status, t.Supersedes = str("track.name"), str("track.version"), Status(str("track.status")), str("track.supersedes")
	t.Budget = Budget{Wall: dur("budget.wall"), CallLimit: dur("budget.call_limit"), Reserve: dur("budget.reserve"), Grading: dur("budget.grading"), QuestionLimit: dur("budget.question_limit"),
		MaxTokens: num("budget.max_tokens"), MaxCost: money("budget.max_cost")}
	t.Artifact.MaxGzipBytes = num("artifact.max_gzip_bytes")
	hx := func(k string) digest.Hex { return digest.Hex(str(k)) } // checked as kSHA256 above
	t.Exam = Exam{SHA256: hx("exam.sha256"), Questions: num("exam.questions"), ContextBytes: num("exam.context_bytes"), ValidationSHA256: hx("exam.validation_sha256")}
	t.Kit.SHA256 = hx("kit.sha256")
	if isTask {
		t.Task = &Task{Kind: str("task.kind"), Name: str("task.name"), SHA256: hx("task.sha256"), DataSHA256: hx("task.data_sha256")}
	}
	t.Images = Images{Controller: img("images.controller"), Runner: img("images.runner"), Grader: img("images.grader")}
	t.Scaffold = Scaffold{Name: str("scaffold.name"), Version: str("scaffold.version"), ConfigSHA256: hx("scaffold.config_sha256")}
	t.Seeds.Required = num("seeds.required")
	t.Resources = Resources{GPUs: num("resources.gpus"), CPUs: num("resources.cpus"), Memory: num("resources.memory"), Workspace: num("resources.workspace")}
	if _, ok := v.raw["human"].(map[string]any); ok {
		t.Human = &Human{Start: dur("human.start"), Image: img("human.image"), Pauses: dur("human.pauses")}
		if _, ok := got["budget.wall"]; ok && t.Human.Pauses > t.Budget.Wall {
			v.add("human.pauses", "%s is longer than budget.wall (%s): pauses stop the clock of a run, and a run may not stop for longer than it runs; set pauses <= %s", t.Human.Pauses, t.Budget.Wall, t.Budget.Wall)
		}
	}

	if keys, ok := got["amendments.reviewers"].([]Reviewer); ok {
		t.Amendments = &Amendments{Reviewers: keys}
	}

	// Cross-key rules, only where both sides parsed.
	_, okWall := got["budget.wall"]
	_, okRes := got["budget.reserve"]
	_, okCall := got["budget.call_limit"]
	_, okGrading := got["budget.grading"]
	_, okQuestion := got["budget.question_limit"]
	b := t.Budget
	if okGrading && okQuestion && b.QuestionLimit > b.Grading {
		v.add("budget.question_limit", "%s is longer than budget.grading (%s); one question cannot take longer than the whole grading, set question_limit <= %s", b.QuestionLimit, b.Grading, b.Grading)
	}
	if okWall && okRes && b.Reserve >= b.Wall {
		v.add("budget.reserve", "%s is not shorter than budget.wall (%s); the reserve window is the last part of the run, so it must be shorter than wall", b.Reserve, b.Wall)
	} else if okWall && okRes && okCall && b.CallLimit > b.Wall-b.Reserve {
		v.add("budget.call_limit", "%s is longer than budget.wall - budget.reserve (%s); no call can run that long, set call_limit <= %s", b.CallLimit, b.Wall-b.Reserve, b.Wall-b.Reserve)
	}
	return t
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	// repoRE is a registry repository name: optional host[:port]/ then lowercase path components.
	repoRE = regexp.MustCompile(`^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)
	sizeRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)$`)
)

var sizeUnits = map[string]int64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

func expectation(k kind) string {
	switch k {
	case kString:
		return "a non-empty string"
	case kName:
		return `a lowercase name ([a-z0-9._-], at most 64 characters), for example "ari-v1"`
	case kStatus:
		return `one of "active", "legacy", "withdrawn"`
	case kTaskKind:
		return `"airs" (an AIRS-Bench task directory, sealrun task validate)`
	case kTrackID:
		return `"" or the 64-hex track id of the superseded track (sealrun track id OLD.toml)`
	case kDuration:
		return `a positive Go duration string, for example "1h", "20m" or "90s"`
	case kPositive:
		return "a whole number >= 1 (no quotes, no decimal point)"
	case kNonNegative:
		return "a whole number >= 0 (no quotes, no decimal point)"
	case kSize:
		return `a size such as "64GiB" or "512MiB" (units B, KiB, MiB, GiB, TiB), or a whole number of bytes`
	case kSHA256:
		return "64 lowercase hex digits, as sha256sum prints them"
	case kImage:
		return `an image pinned by digest, "name@sha256:<64 lowercase hex>"`
	case kMoney:
		return `an amount and a currency as a string, for example "25.00 USD" (priced by the host's [prices] table)`
	case kKeys:
		return fmt.Sprintf(`an array of 1 to %d reviewers' public keys, each the base64 of its PKIX DER (ed25519 or ECDSA P-256; sealrun keys generate prints it)`, MaxReviewers)
	}
	return "a value"
}

// ParseBytes reads a size as tracks write it ("64GiB", "512MiB"; units B, KiB, MiB, GiB, TiB) or
// a whole number of bytes, at least 1.
func ParseBytes(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 1 || n > maxSafeInt {
			return 0, fmt.Errorf("%d is out of range", n)
		}
		return n, nil
	}
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("not a size; expected %s", expectation(kSize))
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	unit := sizeUnits[m[2]]
	if err != nil || n < 1 || n > maxSafeInt/unit {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n * unit, nil
}

// FormatBytes prints n in the largest IEC unit that divides it exactly ("2 GiB", "1536 MiB").
func FormatBytes(n int64) string {
	units := []string{"TiB", "GiB", "MiB", "KiB"}
	for i, u := range units {
		size := int64(1) << (10 * (len(units) - i))
		if n >= size && n%size == 0 {
			return fmt.Sprintf("%d %s", n/size, u)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// convert checks one value against the kind its key takes and converts it. It is long because
// it is one case per kind (strings, hashes, pins, durations, sizes, ...), each with its message.
func (v *validator) convert(key string, k kind, val any) (any, bool) {
	fail := func(format string, args ...any) (any, bool) {
		v.add(key, format+"; expected "+expectation(k), args...)
		return nil, false
	}
	if k == kKeys {
		return v.reviewers(key, val)
	}
	// Types that no track key accepts.
	switch val.(type) {
	case float64:
		return fail("is a float (%v); floats are not allowed in tracks", val)
	case time.Time:
		return fail("is a TOML datetime; datetimes are not allowed in tracks")
	case map[string]any, []map[string]any:
		return fail("is a table")
	case []any:
		return fail("is an array")
	case bool:
		return fail("is a boolean (%v)", val)
	}
	switch k {
	case kPositive, kNonNegative:
		n, ok := val.(int64)
		if !ok {
			return fail("is %s", describe(val))
		}
		min := int64(1)
		if k == kNonNegative {
			min = 0
		}
		if n < min || n > maxSafeInt {
			return fail("is %d, out of range", n)
		}
		return n, true
	case kSize:
		switch x := val.(type) {
		case int64:
			if x < 1 || x > maxSafeInt {
				return fail("is %d, out of range", x)
			}
			return x, true
		case string:
			m := sizeRE.FindStringSubmatch(x)
			if m == nil {
				return fail("is %q, not a size", x)
			}
			n, err := strconv.ParseInt(m[1], 10, 64)
			unit := sizeUnits[m[2]]
			if err != nil || n < 1 || n > maxSafeInt/unit {
				return fail("is %q, out of range", x)
			}
			return n * unit, true
		}
		return fail("is %s", describe(val))
	}
	s, ok := val.(string)
	if !ok {
		return fail("is %s", describe(val))
	}
	switch k {
	case kString:
		if strings.TrimSpace(s) == "" {
			return fail("is empty")
		}
		if len(s) > 256 {
			return fail("is %d bytes long; at most 256", len(s))
		}
	case kName:
		if !nameRE.MatchString(s) {
			return fail("is %q", s)
		}
	case kStatus:
		switch Status(s) {
		case StatusActive, StatusLegacy, StatusWithdrawn:
		default:
			return fail("is %q, not a known status", s)
		}
	case kTaskKind:
		if s != TaskAIRS {
			return fail("is %q, not a task kind", s)
		}
	case kTrackID:
		if s != "" && !digest.IsHex(s) {
			return fail("is %q, not a track id", s)
		}
	case kDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fail("is %q, not a duration", s)
		}
		if d <= 0 {
			return fail("is %q, not positive", s)
		}
		return d, true
	case kSHA256:
		if !digest.IsHex(s) {
			if strings.HasPrefix(s, "sha256:") {
				return fail("is %q; drop the \"sha256:\" prefix", s)
			}
			return fail("is %q, not 64 lowercase hex digits", s)
		}
	case kImage:
		return v.image(key, s)
	case kMoney:
		m, err := ParseMoney(s)
		if err != nil {
			v.add(key, "%v", err)
			return nil, false
		}
		return m, true
	}
	return s, true
}

func (v *validator) image(key, s string) (any, bool) {
	name, dg, ok := strings.Cut(s, "@")
	if !ok {
		v.add(key, "%q is not pinned by digest; run `sealrun images pin %s` and use the name@sha256:<64 hex> it prints", s, s)
		return nil, false
	}
	algo, hex, _ := strings.Cut(dg, ":")
	switch {
	case algo != "sha256":
		v.add(key, "%q: digest %q is not sha256; expected name@sha256:<64 lowercase hex>", s, dg)
		return nil, false
	case !digest.IsHex(hex):
		v.add(key, "%q: digest is not sha256: followed by 64 lowercase hex digits; copy the digest exactly as `sealrun images pin` prints it", s)
		return nil, false
	}
	repo := name
	// A tag next to the digest is allowed (and ignored) as registries do: name:tag@sha256:...
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	if !repoRE.MatchString(repo) {
		v.add(key, "%q: %q is not a valid image repository name; expected lowercase path components such as registry.example/team/controller", s, name)
		return nil, false
	}
	return ImageRef{Name: name, Digest: digest.Digest(dg)}, true
}

func describe(val any) string {
	switch x := val.(type) {
	case string:
		return fmt.Sprintf("a string (%q)", x)
	case int64:
		return fmt.Sprintf("an integer (%d)", x)
	case float64:
		return fmt.Sprintf("a float (%v)", x)
	case bool:
		return fmt.Sprintf("a boolean (%v)", x)
	case time.Time:
		return "a datetime"
	case []any:
		return "an array"
	case map[string]any, []map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", val)
}

func keyList(ts tableSpec) string {
	names := make([]string, len(ts.keys))
	for i, k := range ts.keys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// suggest returns `; did you mean "x"?` for the closest candidate within edit distance 2.
func suggest(got string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(got, c); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(`; did you mean %q?`, best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// reviewers reads [amendments] reviewers: 1 to MaxReviewers distinct public keys, each the
// base64 of its PKIX DER, ed25519 or ECDSA P-256.
func (v *validator) reviewers(key string, val any) (any, bool) {
	list, ok := val.([]any)
	if !ok {
		v.add(key, "is %s; expected %s", describe(val), expectation(kKeys))
		return nil, false
	}
	if len(list) == 0 || len(list) > MaxReviewers {
		v.add(key, "has %d keys; expected %s (leave out [amendments] for amendments signed by the host alone)", len(list), expectation(kKeys))
		return nil, false
	}
	var out []Reviewer
	seen := map[string]int{}
	for i, e := range list {
		at := fmt.Sprintf("%s[%d]", key, i)
		s, ok := e.(string)
		if !ok {
			v.add(at, "is %s; expected the base64 of a public key's PKIX DER", describe(e))
			return nil, false
		}
		r, err := ParseReviewer(s)
		if err != nil {
			v.add(at, "%v", err)
			return nil, false
		}
		if j, dup := seen[r.KeyID]; dup {
			v.add(at, "is the key of %s[%d] again; give each reviewer once", key, j)
			return nil, false
		}
		seen[r.KeyID] = i
		out = append(out, r)
	}
	return out, true
}

// ParseReviewer reads a reviewer's public key as a track writes it: the standard base64 of its
// PKIX DER (the body of its PEM file on one line), ed25519 or ECDSA P-256.
func ParseReviewer(s string) (Reviewer, error) {
	if len(s) > 256 {
		return Reviewer{}, fmt.Errorf("is %d bytes; a public key's base64 is at most 124", len(s))
	}
	der, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(der) != s {
		return Reviewer{}, fmt.Errorf("is not standard base64 (%q); give the public key's PKIX DER in base64, on one line: sealrun keys generate prints it", s)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return Reviewer{}, fmt.Errorf("is not a PKIX public key (%v); give the reviewer's public key (sealrun.pub), not a private key or a certificate", err)
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return Reviewer{}, fmt.Errorf("is an ECDSA key on %s; reviewers sign with ed25519 or ECDSA P-256", k.Curve.Params().Name)
		}
	default:
		return Reviewer{}, fmt.Errorf("is a %T key; reviewers sign with ed25519 or ECDSA P-256", pub)
	}
	sum := sha256.Sum256(der)
	return Reviewer{Key: pub, Base64: s, KeyID: hex.EncodeToString(sum[:])}, nil
}
