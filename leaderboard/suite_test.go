package leaderboard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/airs"
)

// BuildSuite says of the exam suite's board what its rows and withheld runs say: a row the
// ledger does not account for and each run of an agent whose every attestation was withheld. An
// unknown suite is refused by name.
func TestBuildSuite(t *testing.T) {
	f, _, results := ledgerScenario(t, "sealrun.ledger/node-a")
	pub := exportLedger(t, f.led, filepath.Join(f.dir, "ledger.jsonl"))
	keys, err := LoadKeys([]string{"../attest/testdata/ed25519.pub"})
	if err != nil {
		t.Fatal(err)
	}
	suite := func() *Suite {
		t.Helper()
		in, err := Load([]string{results}, keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		if in.Ledgers, err = LoadLedgers([]string{pub}, keys); err != nil {
			t.Fatal(err)
		}
		s, err := BuildSuite(SuiteExam, in, keys, airs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := suite(); s.Tables != 1 || s.Rejected != 0 || len(s.Unaccounted) != 0 {
		t.Fatalf("everything published: %d tables, %d rejected, unaccounted %v", s.Tables, s.Rejected, s.Unaccounted)
	}
	for _, id := range []string{"a-1", "a-2", "c-3"} {
		os.RemoveAll(filepath.Join(results, id))
	}
	s := suite()
	if len(s.Unaccounted) != 3 || !strings.HasPrefix(s.Unaccounted[0], "ari-v1, ") || !strings.Contains(s.Unaccounted[0], "gamma: NOT accounted for") || !strings.Contains(s.Unaccounted[0], "c-3") ||
		!strings.HasPrefix(s.Unaccounted[1], "withheld: a-1 (") || !strings.HasPrefix(s.Unaccounted[2], "withheld: a-2 (") {
		t.Errorf("withheld runs: %q", s.Unaccounted)
	}
	if _, err := BuildSuite("swe", &Inputs{}, keys, airs.Options{}); err == nil || !strings.Contains(err.Error(), `suite "swe": use exam or airs`) {
		t.Errorf("unknown suite: %v", err)
	}
}
