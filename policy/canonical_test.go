package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestTrackIDInvariance(t *testing.T) {
	ref, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	// Same data, different text: comments, whitespace, key and table order, quoting style,
	// dotted keys and inline tables.
	reordered := strings.Replace(base, "[seeds]\nrequired = 3\n", "", 1)
	reordered = "[seeds]   # moved to the top\n  required   =   3\n\n" + reordered
	reordered = strings.Replace(reordered, "wall = \"1h\"\ncall_limit = \"20m\"", "call_limit = '20m'  # literal string\nwall = \"\"\"1h\"\"\"", 1)
	inline := strings.Replace(base, "[kit]\nsha256 = \"3333333333333333333333333333333333333333333333333333333333333333\"\n", "", 1)
	inline = "kit = { sha256 = \"3333333333333333333333333333333333333333333333333333333333333333\" }\n" + inline
	dotted := strings.Replace(base, "[artifact]\nmax_gzip_bytes = 16777216\n", "", 1)
	dotted = strings.Replace(dotted, "[kit]", "[kit]\n", 1)
	dotted = "artifact.max_gzip_bytes = 16_777_216\n" + dotted
	crlf := strings.ReplaceAll(base, "\n", "\r\n")
	for name, src := range map[string]string{"reordered": reordered, "inline table": inline, "dotted key": dotted, "crlf": crlf} {
		got, err := Parse("t.toml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.ID != ref.ID {
			t.Errorf("%s: id %s, want %s", name, got.ID, ref.ID)
		}
	}
	// Any value change changes it.
	for _, c := range []struct{ old, repl string }{
		{"version", `version = "2"`},
		{"wall", `wall = "60m"`}, // same duration, different value: a different track
		{"questions", "questions = 101"},
		{"status", `status = "legacy"`},
		{"gpus", "gpus = 2"},
	} {
		got, err := Parse("t.toml", []byte(edit(t, base, c.old, c.repl)))
		if err != nil {
			t.Fatalf("%s: %v", c.repl, err)
		}
		if got.ID == ref.ID {
			t.Errorf("%s: id did not change", c.repl)
		}
	}
}

// The id must be recomputable by anyone: SHA-256 of the canonical JSON, which for a known input is
// exactly this text (sorted keys, no whitespace, integers as integers).
func TestCanonicalJSONKnownAnswer(t *testing.T) {
	got, err := CanonicalJSON(map[string]any{
		"z": map[string]any{"b": int64(2), "a": "x<y&\u2028\"é"},
		"a": true,
		"é": int64(9007199254740991),
		"€": []any{int64(1), "two"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":true,"z":{"a":"x<y&` + "\u2028" + `\"é","b":2},"é":9007199254740991,"€":[1,"two"]}`
	if string(got) != want {
		t.Errorf("canonical =\n%s\nwant\n%s", got, want)
	}
	tr, err := Parse("t.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tr.Canonical())
	if hex.EncodeToString(sum[:]) != tr.ID {
		t.Error("id is not the SHA-256 of Canonical()")
	}
	if !strings.HasPrefix(string(tr.Canonical()), `{"artifact":{"max_gzip_bytes":16777216},"budget":{`) {
		t.Errorf("canonical = %s", tr.Canonical())
	}
}
