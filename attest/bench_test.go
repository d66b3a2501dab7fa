package attest

import (
	"context"
	"testing"
)

// A realistic statement: 100 questions, 50 candidates, 500 audit entries summarised.
func BenchmarkSign(b *testing.B) {
	st, _ := fixture(b, 50, 500)
	s := signer(b, "ed25519")
	for b.Loop() {
		if _, err := Sign(context.Background(), st, s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	st, _ := fixture(b, 50, 500)
	env, err := Sign(context.Background(), st, signer(b, "ed25519"))
	if err != nil {
		b.Fatal(err)
	}
	v := verifier(b, "ed25519")
	b.SetBytes(int64(len(env)))
	for b.Loop() {
		if _, err := Verify(env, v); err != nil {
			b.Fatal(err)
		}
	}
}
