package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/publish/publishtest"
)

// The hostile publications: each tampering of a real publication (sealrun publish wrote it from
// gathered runs with their trajectories), SHA256SUMS rewritten as a forger would, is NOT VALID
// naming the file and what is wrong; the untouched one is VALID. The table printed says which
// check catches which. e2e.TestDemo runs the same corpus on the demo's own publication.
func TestHostilePublications(t *testing.T) {
	f := newAmendedPubFixture(t) // a run noted and one invalidated after they ended
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--sign-key", "../../attest/testdata/ed25519.key", "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish: %+v", r)
	}
	// Twice: each file read once and kept for every check (the default), and none kept, every
	// check reading from disk again (--max-memory 0, as on a reader's small machine).
	for _, mem := range []string{"", "0"} {
		if r := sealrun(t, "verify-publication", pub, "--key", f.key, "--max-memory", mem); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID\n") {
			t.Fatalf("the untouched publication, --max-memory %q: %+v", mem, r)
		}
	}
	for _, bad := range []string{"lots", "-1", "1XB"} {
		if r := sealrun(t, "verify-publication", pub, "--key", f.key, "--max-memory", bad); r.code != 2 || !strings.Contains(r.stderr, "--max-memory") || !strings.Contains(r.stderr, "256MiB") {
			t.Errorf("--max-memory %q: exit %d; want 2 and a message naming the flag and a size:\n%s", bad, r.code, r.stderr)
		}
	}
	corpus, err := publishtest.Corpus(pub)
	if err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 25 {
		t.Fatalf("%d tamperings; the corpus has at least 25", len(corpus))
	}
	var table strings.Builder
	for i, c := range corpus {
		t.Run(c.Name, func(t *testing.T) {
			d := filepath.Join(f.dir, fmt.Sprintf("forged-%02d", i))
			if err := publishtest.Forge(pub, d, c); err != nil {
				t.Fatal(err)
			}
			r := sealrun(t, append([]string{"verify-publication", d, "--key", f.key}, c.Flags...)...)
			if r.code != 1 || !strings.Contains(r.stdout, "publication: NOT VALID") || !strings.Contains(r.stdout, c.Want) {
				t.Errorf("exit %d; want 1, NOT VALID and %q in:\n%s%s", r.code, c.Want, r.stdout, r.stderr)
			}
			// The same with nothing kept in memory: every check reads the files from disk.
			if r := sealrun(t, append([]string{"verify-publication", d, "--key", f.key, "--max-memory", "0"}, c.Flags...)...); r.code != 1 || !strings.Contains(r.stdout, c.Want) {
				t.Errorf("--max-memory 0: exit %d; want 1 and %q in:\n%s%s", r.code, c.Want, r.stdout, r.stderr)
			}
			if i == len(corpus)-1 || strings.HasPrefix(c.Name, "the forged trajectory") {
				t.Logf("what the reader reads:\n%s", r.stdout)
			}
		})
		fmt.Fprintf(&table, "  %-50s %s\n", c.Name, c.Check)
	}
	t.Logf("%d tamperings, each caught by:\n%s", len(corpus), table.String())
}
