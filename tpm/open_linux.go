package tpm

import (
	"fmt"
	"os"
	"time"

	"github.com/google/go-tpm/tpm2/transport"
	"github.com/google/go-tpm/tpm2/transport/linuxtpm"
)

// Open opens the TPM at path: the kernel's resource manager (/dev/tpmrm0), a TPM character
// device, or a software TPM's Unix socket (swtpm socket --server type=unixio).
func Open(path string) (transport.TPMCloser, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: %w (a host's TPM is /dev/tpmrm0; its kernel module is tpm_tis or tpm_crb)", path, err)
	}
	if fi.Mode()&os.ModeSocket != 0 {
		return dialSocket(path, 10*time.Second)
	}
	if fi.Mode()&os.ModeCharDevice == 0 {
		return nil, fmt.Errorf("TPM %s is neither a character device nor a socket", path)
	}
	t, err := linuxtpm.Open(path)
	if err != nil {
		return nil, fmt.Errorf("TPM %s: %w", path, err)
	}
	return t, nil
}
