package ledger

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is a signed tree head in the C2SP tlog-checkpoint form: the log's origin, its size
// and root hash, one per line.
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   Hash
}

// MaxCheckpointBytes bounds one signed checkpoint.
const MaxCheckpointBytes = 4 << 10

// Text is the checkpoint body that is signed.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint reads a checkpoint body (the signed text, without its signatures).
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return Checkpoint{}, errors.New("a checkpoint is three lines: origin, size, base64 root hash")
	}
	var c Checkpoint
	c.Origin = lines[0]
	if err := checkOrigin(c.Origin); err != nil {
		return Checkpoint{}, err
	}
	n, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || (lines[1] != "0" && strings.HasPrefix(lines[1], "0")) {
		return Checkpoint{}, fmt.Errorf("checkpoint size %q is not a decimal number", lines[1])
	}
	c.Size = n
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != sha256.Size {
		return Checkpoint{}, fmt.Errorf("checkpoint root %q is not a base64 SHA-256 hash", lines[2])
	}
	c.Root = Hash(root)
	return c, nil
}

// ValidName reports whether s may name a note key (a log's origin, a witness): 1 to 200
// printable characters, no spaces, no '+'.
func ValidName(s string) bool {
	return s != "" && len(s) <= 200 && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '+' || !unicode.IsPrint(r) })
}

// checkOrigin: a note key name, a log origin: printable, no spaces, no '+'.
func checkOrigin(o string) error {
	if !ValidName(o) {
		return fmt.Errorf("origin %q is not a log name (1 to 200 printable characters, no spaces, no '+')", o)
	}
	return nil
}

// Note algorithm bytes of the key hash: sumdb/note's Ed25519, and ECDSA P-256 with SHA-256
// (ASN.1 signatures), sealrun's other key type.
const (
	algEd25519 = 1
	algECDSA   = 2
)

// noteKey is a public key as a note key holds it: the algorithm byte and the key.
func noteKey(pub any) ([]byte, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return append([]byte{algEd25519}, k...), nil
	case *ecdsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, err
		}
		return append([]byte{algECDSA}, der...), nil
	}
	return nil, fmt.Errorf("a %T key cannot sign ledger heads; use an ed25519 or ECDSA P-256 key", pub)
}

// keyHash is sumdb/note's key id: the first four bytes of SHA-256(name "\n" alg key).
func keyHash(name string, pub any) (uint32, error) {
	key, err := noteKey(pub)
	if err != nil {
		return 0, err
	}
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return binary.BigEndian.Uint32(h[:4]), nil
}

// noteSigner signs checkpoints with the host's attestation key (a sigstore signer: a key file
// or a KMS key).
type noteSigner struct {
	name string
	hash uint32
	s    signature.Signer
}

func (n *noteSigner) Name() string    { return n.name }
func (n *noteSigner) KeyHash() uint32 { return n.hash }
func (n *noteSigner) Sign(msg []byte) ([]byte, error) {
	return n.s.SignMessage(bytes.NewReader(msg))
}

// NoteVerifier checks checkpoints signed under origin with a host's public key.
type NoteVerifier struct {
	name string
	hash uint32
	v    signature.Verifier
}

// NewVerifier returns the verifier of origin's checkpoints signed by v's key.
func NewVerifier(origin string, v signature.Verifier) (*NoteVerifier, error) {
	pub, err := v.PublicKey()
	if err != nil {
		return nil, err
	}
	h, err := keyHash(origin, pub)
	if err != nil {
		return nil, err
	}
	return &NoteVerifier{name: origin, hash: h, v: v}, nil
}

func (n *NoteVerifier) Name() string    { return n.name }
func (n *NoteVerifier) KeyHash() uint32 { return n.hash }
func (n *NoteVerifier) Verify(msg, sig []byte) bool {
	return n.v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)) == nil
}

// SignCheckpoint signs c with s (the key name is the origin).
func SignCheckpoint(c Checkpoint, s signature.Signer) (string, error) {
	pub, err := s.PublicKey()
	if err != nil {
		return "", err
	}
	h, err := keyHash(c.Origin, pub)
	if err != nil {
		return "", err
	}
	b, err := note.Sign(&note.Note{Text: c.Text()}, &noteSigner{name: c.Origin, hash: h, s: s})
	return string(b), err
}

// OpenCheckpoint verifies a signed checkpoint with any of the keys (each a verifier) and
// parses it. origin, when not empty, is the origin it must have.
func OpenCheckpoint(signed string, origin string, keys []signature.Verifier) (Checkpoint, error) {
	body, err := signedOrigin(signed, origin)
	if err != nil {
		return Checkpoint{}, err
	}
	var vs []note.Verifier
	for _, k := range keys {
		v, err := NewVerifier(body, k)
		if err != nil {
			return Checkpoint{}, err
		}
		vs = append(vs, v)
	}
	n, err := note.Open([]byte(signed), note.VerifierList(vs...))
	if err != nil {
		var unk *note.UnverifiedNoteError
		if errors.As(err, &unk) {
			return Checkpoint{}, fmt.Errorf("checkpoint of %q is not signed by any of the host keys given", body)
		}
		return Checkpoint{}, fmt.Errorf("checkpoint of %q: %v", body, err)
	}
	return ParseCheckpoint(n.Text)
}

// signedOrigin checks a signed checkpoint's size and its origin line (origin, when given, is the
// one it must be) and returns that line.
func signedOrigin(signed, origin string) (string, error) {
	if len(signed) > MaxCheckpointBytes {
		return "", fmt.Errorf("signed checkpoint of %d bytes; at most %d", len(signed), MaxCheckpointBytes)
	}
	body, _, ok := strings.Cut(signed, "\n")
	if !ok {
		return "", errors.New("not a signed checkpoint (no origin line)")
	}
	if origin != "" && body != origin {
		return "", fmt.Errorf("checkpoint of log %q, not of %q", body, origin)
	}
	return body, checkOrigin(body)
}

// VerifierKey is the note verifier key of origin's checkpoints signed with pub
// ("origin+id+base64(alg || key)"): what a witness is configured with to follow this log. An
// Ed25519 key gives the standard form (0x01) every witness takes; an ECDSA P-256 key gives
// sealrun's own (0x02 and the key's PKIX DER), which only sealrun's witness takes.
func VerifierKey(origin string, pub any) (string, error) {
	if err := checkOrigin(origin); err != nil {
		return "", err
	}
	key, err := noteKey(pub)
	if err != nil {
		return "", err
	}
	h, err := keyHash(origin, pub)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s+%08x+%s", origin, h, base64.StdEncoding.EncodeToString(key)), nil
}
