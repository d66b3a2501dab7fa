package verify_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sealrun/sealrun/verify"
)

// A run's attestation checked with the signer's key alone: each further check (the trajectory,
// an export, the timestamp, the witnessed proof, the rebuild) is not applicable until its input
// is given.
func ExampleRun() {
	r, err := verify.Run("../attest/testdata/envelope.golden.json", verify.RunOptions{Key: "../attest/testdata/ed25519.pub"})
	if err != nil {
		fmt.Println("could not check:", err)
		return
	}
	fmt.Println(r.Verdict)
	for _, c := range r.Checks {
		fmt.Println(c.Name, c.Outcome)
	}
	// Output:
	// VALID
	// attestation passed
	// transcript not_applicable
	// export not_applicable
	// timestamp not_applicable
	// witnessed not_applicable
	// rebuild not_applicable
	// tpm not_applicable
}

// A directory that is not a publication: NOT VALID, the failed check naming the file and why.
func ExamplePublication() {
	dir, _ := os.MkdirTemp("", "publication")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "leaderboard.html"), []byte("<h1>40/40</h1>\n"), 0o644)
	r, err := verify.Publication(dir, verify.Options{})
	if err != nil {
		fmt.Println("could not check:", err)
		return
	}
	fmt.Println(r.Verdict)
	for _, c := range r.Checks {
		if c.Outcome == verify.Failed {
			fmt.Println("failed:", c.Name, "file:", c.Problems[0].File)
		}
	}
	// Output:
	// NOT VALID
	// failed: files file: SHA256SUMS
}
