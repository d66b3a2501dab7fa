package testenv

import "testing"

// sigstoreVerifyMain is a reader's check of a Sigstore bundle as cosign v3 makes it with
// verify-blob-attestation --key --trusted-root --use-signed-timestamps --insecure-ignore-tlog:
// sigstore-go's verifier (the library cosign v3 verifies bundles with), the public key whatever
// the bundle's hint, a trusted root, one RFC 3161 timestamp required, no transparency log.
const sigstoreVerifyMain = `package main

import (
	"crypto"
	"fmt"
	"os"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: sigstore-verify BUNDLE TRUSTED_ROOT PUBLIC_KEY_PEM")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "sigstore-verify:", err)
		os.Exit(1)
	}
}

func run(bundlePath, rootPath, keyPath string) error {
	b, err := bundle.LoadJSONFromPath(bundlePath)
	if err != nil {
		return err
	}
	tr, err := root.NewTrustedRootFromPath(rootPath)
	if err != nil {
		return err
	}
	pemBytes, err := os.ReadFile(keyPath)
	if err != nil {
		return err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return err
	}
	sv, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return err
	}
	key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
	keys := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	v, err := verify.NewVerifier(root.TrustedMaterialCollection{tr, keys}, verify.WithSignedTimestamps(1))
	if err != nil {
		return err
	}
	res, err := v.Verify(b, verify.NewPolicy(verify.WithoutArtifactUnsafe(), verify.WithKey()))
	if err != nil {
		return err
	}
	for _, ts := range res.VerifiedTimestamps {
		fmt.Printf("timestamp %s %s\n", ts.Type, ts.Timestamp.UTC().Format(time.RFC3339))
	}
	fmt.Println("Verified OK")
	return nil
}
`

// SigstoreVerify builds (once, from the Go module proxy) a verifier of Sigstore bundles over
// sigstore-go v1.2.2, the library cosign v3.1 verifies bundles with (cosign itself takes a
// quarter of an hour to build on two cores): sigstore-verify BUNDLE TRUSTED_ROOT KEY.pem checks
// the bundle's signature with the key and requires one RFC 3161 timestamp that verifies against
// the trusted root's timestamp authorities, no transparency log. It prints "Verified OK".
func SigstoreVerify(t testing.TB) string {
	t.Helper()
	return GoTools(t, "sigstore-go-v1.2.2",
		map[string]string{"go.mod": "module sealrun.test/sigstoreverify\n\ngo 1.26\n", "main.go": sigstoreVerifyMain},
		[]string{"github.com/sigstore/sigstore-go@v1.2.2"},
		map[string]string{"sigstore-verify": "."})["sigstore-verify"]
}
