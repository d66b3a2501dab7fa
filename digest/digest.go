// Package digest is the SHA-256 digests sealrun's packages hand each other, parsed and checked
// once: Digest ("sha256:" and 64 lowercase hex, as OCI and the grader's candidates write them)
// and Hex (the bare 64 hex digits sha256sum prints), and the one reader and writer of
// SHA256SUMS files (a kit's manifest, a publication's list, a task's tree hash). It is types
// and their formats only: it imports nothing of sealrun's.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Prefix is the algorithm's part of a Digest.
const Prefix = "sha256:"

// Hex is a SHA-256 as 64 lowercase hex digits.
type Hex string

// Digest is a SHA-256 as "sha256:" and 64 lowercase hex digits. The zero value is no digest.
type Digest string

// IsHex says whether s is 64 lowercase hex digits.
func IsHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Parse reads s as "sha256:" and 64 lowercase hex digits.
func Parse(s string) (Digest, error) {
	h, ok := strings.CutPrefix(s, Prefix)
	if !ok || !IsHex(h) {
		return "", fmt.Errorf("%.80q is not a digest (sha256: and 64 lowercase hex digits)", s)
	}
	return Digest(s), nil
}

// SumHex is the SHA-256 of b.
func SumHex(b []byte) Hex {
	s := sha256.Sum256(b)
	return Hex(hex.EncodeToString(s[:]))
}

// HexOf is a hash's sum (a crypto/sha256 hash's Sum) as hex.
func HexOf(sum []byte) Hex { return Hex(hex.EncodeToString(sum)) }

// Digest is h with its algorithm.
func (h Hex) Digest() Digest { return Digest(Prefix + string(h)) }

// Hex is d's 64 hex digits (for a value not parsed, what follows "sha256:", or all of it).
func (d Digest) Hex() Hex { return Hex(strings.TrimPrefix(string(d), Prefix)) }

// Short is d as pages and lines show it: its first 12 hex digits.
func (d Digest) Short() string {
	h := string(d.Hex())
	return h[:min(len(h), 12)]
}
