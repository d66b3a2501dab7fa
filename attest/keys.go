package attest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/kms"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/sealrun/sealrun/tpm"
)

// Key algorithms.
const (
	AlgoED25519   = "ed25519"
	AlgoECDSAP256 = "ecdsa-p256"
)

// Key file names written by GenerateKeys.
const (
	PrivateKeyFile = "sealrun.key"
	PublicKeyFile  = "sealrun.pub"
)

// MaxKeyFileBytes bounds a key file read.
const MaxKeyFileBytes = 64 << 10

// ErrWrongPassphrase: the passphrase does not decrypt the key.
var ErrWrongPassphrase = errors.New("wrong passphrase: the key could not be decrypted")

// GenerateKeys creates a key pair in dir: sealrun.key (PKCS#8 PEM, or sigstore's encrypted PEM
// when passphrase is non-empty; mode 0600) and sealrun.pub (PKIX PEM, 0644). It refuses to
// overwrite existing keys. It returns the paths and the key id (SHA-256 of the public key DER).
func GenerateKeys(dir, algo string, passphrase []byte) (privPath, pubPath, keyID string, err error) {
	var priv crypto.Signer
	switch algo {
	case AlgoED25519, "":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case AlgoECDSAP256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return "", "", "", fmt.Errorf("unknown key algorithm %q; use %s or %s", algo, AlgoED25519, AlgoECDSAP256)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("generate %s key: %w", algo, err)
	}
	var privPEM []byte
	if len(passphrase) > 0 {
		der, err := cryptoutils.MarshalPrivateKeyToEncryptedDER(priv, func(bool) ([]byte, error) { return passphrase, nil })
		if err != nil {
			return "", "", "", fmt.Errorf("encrypt private key: %w", err)
		}
		privPEM = cryptoutils.PEMEncode(cryptoutils.EncryptedSigstorePrivateKeyPEMType, der)
	} else if privPEM, err = cryptoutils.MarshalPrivateKeyToPEM(priv); err != nil {
		return "", "", "", fmt.Errorf("encode private key: %w", err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return "", "", "", fmt.Errorf("encode public key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", "", fmt.Errorf("create key directory: %w", err)
	}
	privPath, pubPath = filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", "", opt.New("attest.GenerateKeys", "Dir", fmt.Sprintf("%s already exists; move it away or choose another directory (keys are never overwritten)", p))
		}
	}
	if err := fileio.WriteFile(privPath, privPEM, 0o600); err != nil {
		return "", "", "", fmt.Errorf("write %s: %w", privPath, err)
	}
	if err := fileio.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		os.Remove(privPath)
		return "", "", "", fmt.Errorf("write %s: %w", pubPath, err)
	}
	keyID, err = KeyID(priv.Public())
	return privPath, pubPath, keyID, err
}

// KeyID is the lowercase hex SHA-256 of the public key's PKIX DER encoding.
func KeyID(pub crypto.PublicKey) (string, error) {
	// An Ed25519 key's id is remembered by its bytes: a board verifies thousands of envelopes
	// with one key, and its DER encoding cost more than reading a statement.
	k, ed := pub.(ed25519.PublicKey)
	if ed {
		if id, ok := ed25519KeyIDs.Load(string(k)); ok {
			return id.(string), nil
		}
	}
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	id := hex.EncodeToString(sum[:])
	if ed && len(k) == ed25519.PublicKeySize {
		ed25519KeyIDs.Store(string(k), id)
	}
	return id, nil
}

// ed25519KeyIDs: KeyID's answers for Ed25519 keys, by the key's bytes.
var ed25519KeyIDs sync.Map

// isKMS reports whether ref names a KMS key (scheme://...) rather than a file.
func isKMS(ref string) bool {
	scheme, _, ok := strings.Cut(ref, "://")
	return ok && scheme != "" && !strings.ContainsAny(scheme, `/\.`)
}

// TPMPrefix names a signing key made in a TPM (sealrun tpm enroll): "tpm:/dev/tpmrm0".
const TPMPrefix = "tpm:"

// LoadSigner loads the signing key ref: a PEM private key file (PKCS#8, SEC 1, or sigstore's
// encrypted PEM with passphrase), a KMS key URI resolved through sigstore's KMS registry, or
// "tpm:DEVICE", the signing key of the TPM at DEVICE (package tpm; docs/TPM.md), which stays open
// for as long as the process runs.
func LoadSigner(ctx context.Context, ref string, passphrase []byte) (signature.Signer, error) {
	if device, ok := strings.CutPrefix(ref, TPMPrefix); ok {
		dev, err := tpm.Open(device)
		if err != nil {
			return nil, err
		}
		k, err := tpm.LoadKeys(dev)
		if err != nil {
			dev.Close()
			return nil, fmt.Errorf("TPM %s: %w (sealrun tpm enroll --device %s makes and checks the keys)", device, err, device)
		}
		return k.Signer(), nil
	}
	if isKMS(ref) {
		sv, err := kms.Get(ctx, ref, crypto.SHA256)
		if err != nil {
			var pnf *kms.ProviderNotFoundError
			if errors.As(err, &pnf) {
				return nil, fmt.Errorf("KMS key %s: no KMS provider for this scheme in this build and no sigstore-kms-<scheme> plugin on PATH; use a PEM key file (sealrun keys generate)", ref)
			}
			return nil, fmt.Errorf("KMS key %s: %w", ref, err)
		}
		return sv, nil
	}
	data, err := readKeyFile(ref)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("key %s is not PEM; give the private key written by sealrun keys generate", ref)
	}
	switch block.Type {
	case string(cryptoutils.PublicKeyPEMType):
		return nil, fmt.Errorf("key %s is a public key; signing needs the private key (%s)", ref, PrivateKeyFile)
	case string(cryptoutils.EncryptedSigstorePrivateKeyPEMType), "ENCRYPTED COSIGN PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		if len(passphrase) == 0 {
			return nil, opt.New("attest.LoadSigner", "Passphrase", fmt.Sprintf("key %s is encrypted: none given", ref))
		}
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(data, func(bool) ([]byte, error) { return passphrase, nil })
	if err != nil {
		if strings.Contains(err.Error(), "decrypt") {
			return nil, fmt.Errorf("key %s: %w", ref, ErrWrongPassphrase)
		}
		return nil, fmt.Errorf("key %s is not a usable private key: %v", ref, err)
	}
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		return signature.LoadED25519Signer(k)
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("key %s is ECDSA on %s; sealrun signs with ed25519 or ECDSA P-256", ref, k.Curve.Params().Name)
		}
		return signature.LoadECDSASigner(k, crypto.SHA256)
	}
	return nil, fmt.Errorf("key %s is a %T; sealrun signs with ed25519 or ECDSA P-256 keys", ref, priv)
}

// LoadVerifier loads a PEM public key (ed25519 or ECDSA P-256) for verification.
func LoadVerifier(path string) (signature.Verifier, crypto.PublicKey, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, nil, fmt.Errorf("key %s is not PEM; give the public key (%s)", path, PublicKeyFile)
	}
	if strings.Contains(block.Type, "PRIVATE KEY") {
		return nil, nil, fmt.Errorf("key %s is a private key; verification takes the public key (%s) — never hand out the private one", path, PublicKeyFile)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(data)
	if err != nil {
		return nil, nil, fmt.Errorf("key %s is not a usable public key: %v", path, err)
	}
	switch k := pub.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, nil, fmt.Errorf("key %s is ECDSA on %s; sealrun uses ed25519 or ECDSA P-256", path, k.Curve.Params().Name)
		}
	default:
		return nil, nil, fmt.Errorf("key %s is a %T; sealrun uses ed25519 or ECDSA P-256 keys", path, pub)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, nil, fmt.Errorf("key %s: %w", path, err)
	}
	return v, pub, nil
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("key %s does not exist; create a pair with sealrun keys generate --out DIR", path)
		}
		return nil, fmt.Errorf("key %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("key %s is not a regular file", path)
	}
	if st.Size() > MaxKeyFileBytes {
		return nil, fmt.Errorf("key %s is %d bytes; key files are small PEM files", path, st.Size())
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	return buf, nil
}
