package attest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerateKeys(t *testing.T) {
	for _, algo := range []string{AlgoED25519, AlgoECDSAP256} {
		for _, pass := range []string{"", "s3cret"} {
			t.Run(algo+"/"+pass, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "keys")
				priv, pub, id, err := GenerateKeys(dir, algo, []byte(pass))
				if err != nil {
					t.Fatal(err)
				}
				if st, _ := os.Stat(priv); st.Mode().Perm() != 0o600 {
					t.Errorf("private key mode %v, want 0600", st.Mode().Perm())
				}
				if len(id) != 64 {
					t.Errorf("key id %q", id)
				}
				s, err := LoadSigner(context.Background(), priv, []byte(pass))
				if err != nil {
					t.Fatal(err)
				}
				v, _, err := LoadVerifier(pub)
				if err != nil {
					t.Fatal(err)
				}
				st, _ := fixture(t, 2, 2)
				env, err := Sign(context.Background(), st, s)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := Verify(env, v); err != nil {
					t.Fatal(err)
				}
				if _, _, _, err := GenerateKeys(dir, algo, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
					t.Errorf("second generate into the same dir: %v", err)
				}
			})
		}
	}
	if _, _, _, err := GenerateKeys(t.TempDir(), "rsa", nil); err == nil || !strings.Contains(err.Error(), "unknown key algorithm") {
		t.Errorf("rsa: %v", err)
	}
}

func TestKeyErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("\x00\x01 not pem"), 0o600)
	unreadable := filepath.Join(dir, "unreadable.pem")
	os.WriteFile(unreadable, []byte("x"), 0o000)
	big := filepath.Join(dir, "big.pem")
	os.WriteFile(big, make([]byte, MaxKeyFileBytes+1), 0o600)
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"missing", func() error { _, err := LoadSigner(ctx, filepath.Join(dir, "nope.key"), nil); return err }, "does not exist; create a pair with sealrun keys generate"},
		{"directory", func() error { _, err := LoadSigner(ctx, dir, nil); return err }, "is not a regular file"},
		{"too big", func() error { _, err := LoadSigner(ctx, big, nil); return err }, "key files are small PEM files"},
		{"garbage", func() error { _, err := LoadSigner(ctx, garbage, nil); return err }, "is not PEM"},
		{"public as private", func() error { _, err := LoadSigner(ctx, "testdata/ed25519.pub", nil); return err }, "is a public key; signing needs the private key"},
		{"private as public", func() error { _, _, err := LoadVerifier("testdata/ed25519.key"); return err }, "is a private key; verification takes the public key"},
		{"garbage public", func() error { _, _, err := LoadVerifier(garbage); return err }, "is not PEM"},
		{"encrypted without passphrase", func() error { _, err := LoadSigner(ctx, "testdata/encrypted.key", nil); return err }, "is encrypted: none given"},
		{"unknown kms scheme", func() error { _, err := LoadSigner(ctx, "nosuchkms://keys/sealrun", nil); return err }, "no KMS provider for this scheme"},
	}
	if os.Geteuid() != 0 { // root reads mode-000 files
		tests = append(tests, struct {
			name string
			err  func() error
			want string
		}{"unreadable", func() error { _, err := LoadSigner(ctx, unreadable, nil); return err }, "permission denied"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	_, err := LoadSigner(ctx, "testdata/encrypted.key", []byte("wrong horse"))
	if !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("wrong passphrase: %v", err)
	}
	if _, err := LoadSigner(ctx, "testdata/encrypted.key", []byte("correct horse")); err != nil {
		t.Errorf("right passphrase: %v", err)
	}
}
