package client

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSameAttestationDuringRename: a gathered run renamed into place (whole) while another
// gather looks for it is either not there yet or there with its attestation, never a directory
// without one (a loaded machine caught the two reads the other way round between a rename).
func TestSameAttestationDuringRename(t *testing.T) {
	dir := t.TempDir()
	att := []byte(`{"payloadType":"application/vnd.in-toto+json"}`)
	const runs = 500
	go func() { // another gather of each run: the whole run renamed into place
		for i := range runs {
			tmp, err := os.MkdirTemp(dir, ".tmp-")
			if err != nil {
				t.Error(err)
				return
			}
			os.WriteFile(filepath.Join(tmp, "result.att.json"), att, 0o644)
			if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprint("r-", i))); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range runs {
		for {
			same, err := sameAttestation(filepath.Join(dir, fmt.Sprint("r-", i)), att)
			if err != nil {
				t.Fatalf("run %d, renamed into place whole: %v", i, err)
			}
			if same {
				break
			}
		}
	}
}
