package publish

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadSums: SHA256SUMS as anyone may write it. Never a panic; every path it accepts is a
// relative one inside the publication.
func FuzzReadSums(f *testing.F) {
	f.Add(strings.Repeat("ab", 32) + "  runs/r-1/report.json\n")
	f.Add(strings.Repeat("ab", 32) + "  ../../etc/passwd\n")
	f.Add(strings.Repeat("ab", 32) + " */abs\n\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(t.TempDir(), SumsFile)
		os.WriteFile(p, []byte(text), 0o644)
		sums, err := ReadSums(p)
		if err != nil {
			return
		}
		for rel := range sums {
			if strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") || strings.Contains(rel, "\\") {
				t.Fatalf("accepted %q, which leaves the publication", rel)
			}
		}
	})
}
