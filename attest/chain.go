package attest

import (
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

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
	var canon []byte
	for i := range history {
		var err error
		if canon, err = appendCanonicalSubmission(canon[:0], &history[i]); err != nil {
			return "", err
		}
		head = ChainNext(head, canon)
	}
	return head, nil
}

// appendCanonicalSubmission appends s's RFC 8785 canonical JSON to b: the bytes that
// json.Marshal then jsoncanonicalizer.Transform give (FuzzCanonicalSubmission holds the two
// alike), written directly, as a board checks a history in every attestation it reads. The
// members in the order of their names' code units; each number as ECMAScript writes the double
// it is (a size beyond 2^53 rounds as the canonicalizer reads it); the time as time.Time
// marshals it.
func appendCanonicalSubmission(b []byte, s *Submission) ([]byte, error) {
	score, err := jsoncanonicalizer.NumberToJSON(s.ValidationScore)
	if err != nil {
		return nil, fmt.Errorf("json: unsupported value: %v", s.ValidationScore)
	}
	size, err := jsoncanonicalizer.NumberToJSON(float64(s.Size))
	if err != nil {
		return nil, err
	}
	t, err := s.Time.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b = append(b, `{"digest":`...)
	b = appendCanonicalString(b, string(s.Digest))
	b = append(b, `,"promoted":`...)
	b = strconv.AppendBool(b, s.Promoted)
	b = append(b, `,"size":`...)
	b = append(b, size...)
	b = append(b, `,"time":`...)
	b = append(b, t...) // digits, letters and punctuation only: nothing to escape
	b = append(b, `,"validation_score":`...)
	b = append(b, score...)
	return append(b, '}'), nil
}

// appendCanonicalString appends s as RFC 8785 writes the string json.Marshal made of it: each
// invalid UTF-8 byte as U+FFFD, the quote, backslash and \b \f \n \r \t escaped by name,
// other control characters as \u00xx, everything else as itself.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			if c < 0x20 {
				b = append(b, '\\', 'u', '0', '0', hexLower[c>>4], hexLower[c&0xf])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}

const hexLower = "0123456789abcdef"

// AuditHead reads an audit log and returns its head and entry count (audit.Head).
func AuditHead(r io.Reader) (head string, entries int, err error) { return audit.Head(r) }
