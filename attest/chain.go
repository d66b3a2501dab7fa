package attest

import (
	"encoding/json"
	"io"

	"github.com/sealrun/sealrun/audit"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// ZeroHead is the head of an empty hash chain (audit.ZeroHead).
var ZeroHead = audit.ZeroHead

// ChainNext extends a hash chain (audit.ChainNext). The audit log and the submission history
// both chain this way.
func ChainNext(prev string, entry []byte) string { return audit.ChainNext(prev, entry) }

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

// AuditHead reads an audit log and returns its head and entry count (audit.Head).
func AuditHead(r io.Reader) (head string, entries int, err error) { return audit.Head(r) }
