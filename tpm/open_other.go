//go:build !linux

package tpm

import (
	"fmt"

	"github.com/google/go-tpm/tpm2/transport"
)

// Open is Linux only: elsewhere sealrun reads and verifies what a TPM produced, and talks to none.
func Open(path string) (transport.TPMCloser, error) {
	return nil, fmt.Errorf("TPM %s: sealrun talks to a TPM on Linux only (the GPU host); here it verifies enrollments and quotes", path)
}
