package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sealrun/sealrun/publish"
)

// FuzzPublicationMeta: publication.json as anyone may write it, in a publication whose list
// is redone to match: never a panic, never VALID (it holds no run), and a path it names outside
// its folder is never read.
func FuzzPublicationMeta(f *testing.F) {
	f.Add(`{"format":"sealrun-publication/v1","suite":"exam","runs":[],"tracks":["tracks/../../x"],"keys":[],"ledgers":["/etc/passwd"]}`)
	f.Add(`{"format":"sealrun-publication/v1","suite":"exam","runs":["../x"],"tracks":[],"keys":["keys/a.pub"],"ledgers":[]}`)
	f.Add(`{"format":"sealrun-publication/v2"}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, meta string) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "keys"), 0o755)
		os.WriteFile(filepath.Join(dir, publish.MetaFile), []byte(meta), 0o644)
		sums, _, err := publish.SumTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, publish.SumsFile), sums, 0o644)
		r, err := Publication(dir, Options{})
		if err == nil && r.Valid {
			t.Fatalf("a publication of no run verified: %q", meta)
		}
	})
}
