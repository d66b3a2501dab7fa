package attest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// ZeroHead is the head of an empty hash chain.
var ZeroHead = strings.Repeat("0", 64)

// ChainNext extends a hash chain: lowercase hex SHA-256 of prev (64 hex characters), a newline,
// and the entry's bytes. The audit log and the submission history both chain this way.
func ChainNext(prev string, entry []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{'\n'})
	h.Write(entry)
	return hex.EncodeToString(h.Sum(nil))
}

// HistoryHead is the head of a submission history: entries chained in order, each as the
// RFC 8785 canonical JSON of the Submission object.
func HistoryHead(history []Submission) (string, error) {
	head := ZeroHead
	for i := range history {
		plain, err := json.Marshal(&history[i])
		if err != nil {
			return "", err
		}
		canon, err := jsoncanonicalizer.Transform(plain)
		if err != nil {
			return "", err
		}
		head = ChainNext(head, canon)
	}
	return head, nil
}

// MaxAuditLineBytes bounds one audit log entry.
const MaxAuditLineBytes = 1 << 20

// AuditHead reads an audit log (JSON Lines, each line one entry, every line ended by "\n") and
// returns the head of its chain (each line's bytes without the newline) and the entry count.
func AuditHead(r io.Reader) (head string, entries int, err error) {
	br := bufio.NewReaderSize(r, MaxAuditLineBytes+1)
	head = ZeroHead
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return "", 0, fmt.Errorf("audit log line %d is longer than %d bytes", entries+1, MaxAuditLineBytes)
		}
		if err == io.EOF {
			if len(line) > 0 {
				return "", 0, fmt.Errorf("audit log line %d does not end with a newline (truncated log?)", entries+1)
			}
			return head, entries, nil
		}
		if err != nil {
			return "", 0, fmt.Errorf("read audit log: %w", err)
		}
		line = line[:len(line)-1]
		if len(line) == 0 || !json.Valid(line) {
			return "", 0, fmt.Errorf("audit log line %d is not a JSON entry", entries+1)
		}
		head = ChainNext(head, line)
		entries++
	}
}
