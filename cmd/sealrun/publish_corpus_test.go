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
	f := newPubFixture(t)
	pub := filepath.Join(f.dir, "pub")
	if r := sealrun(t, "publish", "--out", pub, "--key", f.key, "--sign-key", "../../attest/testdata/ed25519.key", "--ledger", f.ledger, f.results); r.code != 0 {
		t.Fatalf("publish: %+v", r)
	}
	if r := sealrun(t, "verify-publication", pub, "--key", f.key); r.code != 0 || !strings.Contains(r.stdout, "publication: VALID\n") {
		t.Fatalf("the untouched publication: %+v", r)
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
			if i == len(corpus)-1 || strings.HasPrefix(c.Name, "the forged trajectory") {
				t.Logf("what the reader reads:\n%s", r.stdout)
			}
		})
		fmt.Fprintf(&table, "  %-50s %s\n", c.Name, c.Check)
	}
	t.Logf("%d tamperings, each caught by:\n%s", len(corpus), table.String())
}
