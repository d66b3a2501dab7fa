package digest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	h := strings.Repeat("0a", 32)
	if d, err := Parse("sha256:" + h); err != nil || d.Hex() != Hex(h) || d.Short() != h[:12] {
		t.Errorf("Parse: %q %v", d, err)
	}
	if !IsHex(h) || Hex(h).Digest() != Digest("sha256:"+h) {
		t.Errorf("IsHex, Digest of %q", h)
	}
	for _, bad := range []string{"", h, "sha256:", "sha256:" + strings.ToUpper(h), "sha512:" + h, "sha256:" + h + "0", "sha256:" + h[:63] + "g", " sha256:" + h} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
	for _, bad := range []string{"", "sha256:" + h, h[:63], h + "0", strings.ToUpper(h)} {
		if IsHex(bad) {
			t.Errorf("IsHex(%q)", bad)
		}
	}
	sum := sha256.Sum256([]byte("x"))
	if SumHex([]byte("x")) != Hex(hex.EncodeToString(sum[:])) || HexOf(sum[:]) != SumHex([]byte("x")) {
		t.Error("SumHex and HexOf disagree with crypto/sha256")
	}
	if Digest("").Short() != "" || Digest("sha256:ab").Short() != "ab" {
		t.Error("Short of a short value")
	}
}

var anyPath = func(p string) string {
	if p == "" || strings.ContainsAny(p, "\x00\n") {
		return "is not a path"
	}
	return ""
}

// What sealrun writes is what coreutils' sha256sum writes and checks: the same lines of a
// directory's files, accepted by sha256sum -c, hashed as sha256sum hashes the list.
func TestSumsAgreeWithSha256sum(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"a.txt": "alpha\n", "b/c.bin": "\x00\x01", "b/d e.txt": "", "z": strings.Repeat("z", 1<<16)}
	var sums []Sum
	for _, p := range []string{"a.txt", "b/c.bin", "b/d e.txt", "z"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(files[p]), 0o644)
		sums = append(sums, Sum{Path: p, SHA256: SumHex([]byte(files[p]))})
	}
	list := FormatSums(sums)
	cmd := exec.Command("sha256sum", "a.txt", "b/c.bin", "b/d e.txt", "z")
	cmd.Dir = dir
	theirs, err := cmd.Output()
	if err != nil {
		t.Fatalf("sha256sum (coreutils): %v", err)
	}
	if !bytes.Equal(list, theirs) {
		t.Errorf("FormatSums:\n%s\nsha256sum:\n%s", list, theirs)
	}
	os.WriteFile(filepath.Join(dir, SumsFile), list, 0o644)
	check := exec.Command("sha256sum", "--strict", "-c", SumsFile)
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c of what sealrun wrote: %v\n%s", err, out)
	}
	hash := exec.Command("sha256sum", SumsFile)
	hash.Dir = dir
	out, _ := hash.Output()
	if got := string(HashSums(sums)); !strings.HasPrefix(string(out), got+"  ") {
		t.Errorf("HashSums %s; sha256sum of the list: %s", got, out)
	}
	back, err := ParseSums(list, SumsRules{Sorted: true, Path: anyPath})
	if err != nil || len(back) != len(sums) {
		t.Fatalf("ParseSums of what FormatSums wrote: %v %v", back, err)
	}
	for i := range sums {
		if back[i] != sums[i] {
			t.Errorf("line %d: %+v, wrote %+v", i+1, back[i], sums[i])
		}
	}
}

func TestParseSumsRefuses(t *testing.T) {
	h := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name, text string
		rules      SumsRules
		want       string
	}{
		{"not a line", "hello\n", SumsRules{}, "line 1 is not `<64 lowercase hex>  <path>`"},
		{"one space", h + " a\n", SumsRules{}, "line 1 is not"},
		{"upper hex", strings.ToUpper(h) + "  a\n", SumsRules{}, "line 1 is not"},
		{"binary mark", h + " *a\n", SumsRules{}, "line 1 is not"},
		{"no path", h + "  \n", SumsRules{}, "line 1 is not"},
		{"bad path", h + "  \x00\n", SumsRules{}, `line 1: "\x00" is not a path`},
		{"no newline", h + "  a", SumsRules{}, "the last line has no newline"},
		{"out of order", h + "  b\n" + h + "  a\n", SumsRules{Sorted: true}, "line 2 (a) is out of order or repeated"},
		{"repeated, sorted", h + "  a\n" + h + "  a\n", SumsRules{Sorted: true}, "line 2 (a) is out of order or repeated"},
		{"repeated", h + "  b\n" + h + "  a\n" + h + "  b\n", SumsRules{}, "line 3: b is listed twice"},
		{"too many", h + "  a\n" + h + "  b\n" + h + "  c\n", SumsRules{MaxLines: 2}, "more than 2 files listed"},
		{"too long", h + "  " + strings.Repeat("x", 200) + "\n", SumsRules{MaxLineBytes: 100}, "line 1: bufio.Scanner: token too long"},
	} {
		if c.rules.Path == nil {
			c.rules.Path = anyPath
		}
		if _, err := ParseSums([]byte(c.text), c.rules); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	if _, err := ParseSums(nil, SumsRules{}); err == nil {
		t.Error("no path rule: no error")
	}
	if s, err := ParseSums(nil, SumsRules{Path: anyPath}); err != nil || len(s) != 0 {
		t.Errorf("an empty list: %v %v", s, err)
	}
}

// FuzzParseSums: never a panic; what it accepts, FormatSums writes back byte for byte.
func FuzzParseSums(f *testing.F) {
	f.Add(strings.Repeat("ab", 32) + "  a\n" + strings.Repeat("cd", 32) + "  b/c\n")
	f.Add(strings.Repeat("ab", 32) + "  a")
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		sums, err := ParseSums([]byte(text), SumsRules{Path: anyPath})
		if err != nil {
			return
		}
		if got := FormatSums(sums); string(got) != text {
			t.Fatalf("accepted %q, writes back %q", text, got)
		}
	})
}
