package witness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sealrun/sealrun/ledger"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/mod/sumdb/note"
)

// Algorithm bytes of note keys (C2SP signed-note): a log's Ed25519 key, sealrun's ECDSA P-256
// log key, and an Ed25519 cosigner key (tlog-cosignature v1).
const (
	algEd25519     = 0x01
	algECDSA       = 0x02
	algCosignature = 0x04
)

// checkName: a key name is printable, with no spaces and no '+' (signed-note).
func checkName(what, n string) error {
	if !ledger.ValidName(n) {
		return fmt.Errorf("%s %q is not a key name: 1 to 200 printable characters, no spaces, no '+' (a schema-less URL, like witness.example.org/w1)", what, n)
	}
	return nil
}

// keyID is SHA-256(name "\n" alg key)[:4], the id of a note key.
func keyID(name string, alg byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{alg})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// GenerateKey makes a cosigner key named name. skey is the private key in the signed-note form
// ("PRIVATE+KEY+name+id+base64(0x04 || seed)"), to be kept secret; vkey is the public one
// ("name+id+base64(0x04 || public key)"), to be given to whoever checks its cosignatures.
func GenerateKey(name string) (skey, vkey string, err error) {
	if err := checkName("witness name", name); err != nil {
		return "", "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	id := keyID(name, algCosignature, pub)
	skey = fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, id, base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, priv.Seed()...)))
	return skey, VKey(name, pub), nil
}

// VKey is the public key (vkey) of the cosigner key named name whose Ed25519 public key is pub:
// for a witness whose private key is kept elsewhere (litewitness's, in an ssh-agent).
func VKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, keyID(name, algCosignature, pub), base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, pub...)))
}

// Cosigner signs cosignatures with a witness's private key.
type Cosigner struct {
	name string
	id   uint32
	key  ed25519.PrivateKey
}

// NewCosigner reads a private key written by GenerateKey.
func NewCosigner(skey string) (*Cosigner, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(skey), "PRIVATE+KEY+")
	parts := strings.SplitN(rest, "+", 3)
	if !ok || len(parts) != 3 {
		return nil, errors.New("not a witness private key: want PRIVATE+KEY+<name>+<id>+<base64 key> (sealrun witness keygen writes one)")
	}
	name, idHex, b64 := parts[0], parts[1], parts[2]
	if err := checkName("witness name", name); err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != algCosignature {
		return nil, fmt.Errorf("witness private key of %s: not base64 of 0x04 and a 32-byte Ed25519 seed", name)
	}
	priv := ed25519.NewKeyFromSeed(raw[1:])
	id := keyID(name, algCosignature, priv.Public().(ed25519.PublicKey))
	if idHex != fmt.Sprintf("%08x", id) {
		return nil, fmt.Errorf("witness private key of %s: its id %s is not its key's (%08x); the file was edited", name, idHex, id)
	}
	return &Cosigner{name: name, id: id, key: priv}, nil
}

// Name is the witness's name, as its signature lines carry it.
func (c *Cosigner) Name() string { return c.name }

// VerifierKey is the public key in the vkey form a reader passes to --witness.
func (c *Cosigner) VerifierKey() string { return VKey(c.name, c.key.Public().(ed25519.PublicKey)) }

// cosignedMessage is what a v1 cosignature signs: the header line, the time line, the checkpoint's
// note body (its text, with every extension line, not its signatures).
func cosignedMessage(body []byte, t uint64) []byte {
	return append([]byte("cosignature/v1\ntime "+strconv.FormatUint(t, 10)+"\n"), body...)
}

// Cosign returns the signature line ("— name base64(id || time || signature)\n") of a
// cosignature over the checkpoint body (the note's text) at time t.
func (c *Cosigner) Cosign(body []byte, t time.Time) string {
	ts := uint64(t.Unix())
	sig := make([]byte, 4+8, 4+8+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, c.id)
	binary.BigEndian.PutUint64(sig[4:], ts)
	sig = append(sig, ed25519.Sign(c.key, cosignedMessage(body, ts))...)
	return "— " + c.name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// Verifier checks a witness's cosignatures. It is a note.Verifier: note.Open with it accepts a
// checkpoint carrying the witness's signature line (CosignatureTime reads a line's time).
type Verifier struct {
	name string
	id   uint32
	key  ed25519.PublicKey
}

// NewVerifier reads a witness's public key in the vkey form ("name+id+base64(0x04 || key)").
func NewVerifier(vkey string) (*Verifier, error) {
	name, id, raw, err := parseVKey(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("witness key %q: %w", vkey, err)
	}
	if raw[0] != algCosignature || len(raw) != 1+ed25519.PublicKeySize {
		return nil, fmt.Errorf("witness key %q: not a cosignature/v1 key (0x04 and a 32-byte Ed25519 key); a witness prints its key with sealrun witness key", vkey)
	}
	if keyID(name, raw[0], raw[1:]) != id {
		return nil, fmt.Errorf("witness key %q: its id is not its key's", vkey)
	}
	return &Verifier{name: name, id: id, key: ed25519.PublicKey(raw[1:])}, nil
}

func (v *Verifier) Name() string    { return v.name }
func (v *Verifier) KeyHash() uint32 { return v.id }

// Verify checks sig (8 bytes of time, then the Ed25519 signature) over the checkpoint body msg.
func (v *Verifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	ts := binary.BigEndian.Uint64(sig)
	return ts <= 1<<63-1 && ed25519.Verify(v.key, cosignedMessage(msg, ts), sig[8:])
}

// parseVKey splits "name+id+base64" into its parts.
func parseVKey(vkey string) (name string, id uint32, raw []byte, err error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return "", 0, nil, errors.New("want <name>+<8 hex digits>+<base64 key>")
	}
	if err := checkName("key name", parts[0]); err != nil {
		return "", 0, nil, err
	}
	n, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil || len(parts[1]) != 8 {
		return "", 0, nil, fmt.Errorf("key id %q is not 8 hex digits", parts[1])
	}
	raw, err = base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) < 2 {
		return "", 0, nil, errors.New("the key is not base64")
	}
	return parts[0], uint32(n), raw, nil
}

// LogVerifier reads a log's note verifier key: an Ed25519 one (0x01, what every standard
// witness takes), or sealrun's ECDSA P-256 one (0x02 and the key's PKIX DER, which only
// sealrun's witness takes). Its name is the log's origin.
func LogVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, id, raw, err := parseVKey(vkey)
	if err != nil {
		return nil, fmt.Errorf("log key %q: %w", vkey, err)
	}
	switch raw[0] {
	case algEd25519:
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("log key %q: %w", vkey, err)
		}
		return v, nil
	case algECDSA:
		pub, err := x509.ParsePKIXPublicKey(raw[1:])
		k, ok := pub.(*ecdsa.PublicKey)
		if err != nil || !ok {
			return nil, fmt.Errorf("log key %q: not an ECDSA P-256 public key", vkey)
		}
		sv, err := signature.LoadECDSAVerifier(k, crypto.SHA256)
		if err != nil {
			return nil, err
		}
		v, err := ledger.NewVerifier(name, sv)
		if err != nil {
			return nil, fmt.Errorf("log key %q: %w", vkey, err)
		}
		if v.KeyHash() != id {
			return nil, fmt.Errorf("log key %q: its id is not its key's", vkey)
		}
		return v, nil
	}
	return nil, fmt.Errorf("log key %q: algorithm 0x%02x; want an Ed25519 (0x01) or sealrun ECDSA P-256 (0x02) note key", vkey, raw[0])
}

// CosignatureTime is the time a cosignature line says it was made (the witness's clock); it
// does not verify the line (Verifier does).
func CosignatureTime(line string) (time.Time, error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "—" {
		return time.Time{}, fmt.Errorf("%q is not a signature line", trim(line))
	}
	sig, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(sig) != 4+8+ed25519.SignatureSize {
		return time.Time{}, fmt.Errorf("%q is not a cosignature/v1 line", trim(line))
	}
	ts := binary.BigEndian.Uint64(sig[4:])
	if ts > 1<<63-1 {
		return time.Time{}, errors.New("a cosignature time past 2^63")
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}
