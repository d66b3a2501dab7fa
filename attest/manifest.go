package attest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/options"
)

// ManifestPayloadType is the DSSE payloadType of a publication's signed manifest: the payload
// is the publication's SHA256SUMS, byte for byte (every file but SHA256SUMS and its signature,
// with its SHA-256, as sha256sum prints them).
const ManifestPayloadType = "application/vnd.sealrun.publication-manifest.v1+sha256sums"

// MaxManifestBytes bounds a manifest's envelope a verifier reads (a publication of 100,000 files is
// about 12 MiB of SHA256SUMS).
const MaxManifestBytes = 64 << 20

// SignManifest signs sums (a publication's SHA256SUMS) in a DSSE envelope of
// ManifestPayloadType with signer, and returns the envelope's JSON, indented.
func SignManifest(ctx context.Context, sums []byte, signer signature.Signer) ([]byte, error) {
	env, err := dsse.WrapSigner(signer, ManifestPayloadType).SignMessage(bytes.NewReader(sums), options.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("sign the publication's manifest: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, env, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// VerifyManifest checks env, a manifest's DSSE envelope, as Verify checks an attestation's
// (syntax, exactly one signature, the payloadType, the signature over the PAE with v), and
// returns the signed SHA256SUMS and the key's id. A failure is a *VerificationFailure.
func VerifyManifest(env []byte, v signature.Verifier) (sums []byte, keyID string, err error) {
	var out Verified
	sums, err = verifyEnvelopeOf(env, ManifestPayloadType, MaxManifestBytes, v, &out)
	return sums, out.KeyID, err
}
