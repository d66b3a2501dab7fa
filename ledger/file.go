package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one line of a ledger file.
const MaxLineBytes = MaxEntryBytes + MaxCheckpointBytes + 64

// line is one line of a ledger file: an entry (the leaf bytes, verbatim) or a signed
// checkpoint of the entries before it.
type line struct {
	Entry      json.RawMessage `json:"entry,omitempty"`
	Checkpoint string          `json:"checkpoint,omitempty"`
}

func entryLine(leaf []byte) []byte {
	return append(append([]byte(`{"entry":`), leaf...), "}\n"...)
}

func checkpointLine(signed string) []byte {
	b, _ := json.Marshal(line{Checkpoint: signed})
	return append(b, '\n')
}

// scanLines calls fn for each complete line of r (n from 1) and returns the byte length of the
// complete lines; a last line without its newline is reported by torn.
func scanLines(r io.Reader, fn func(n int, l line) error) (good int64, torn bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return good, false, fmt.Errorf("line %d: longer than %d bytes", n, MaxLineBytes)
		}
		if err == io.EOF {
			return good, len(b) > 0, nil
		}
		if err != nil {
			return good, false, err
		}
		if len(b) > MaxLineBytes {
			return good, false, fmt.Errorf("line %d: longer than %d bytes", n, MaxLineBytes)
		}
		var l line
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return good, false, fmt.Errorf("line %d: %v", n, err)
		}
		if (len(l.Entry) == 0) == (l.Checkpoint == "") {
			return good, false, fmt.Errorf("line %d: holds neither or both of entry and checkpoint", n)
		}
		if len(l.Entry) > 0 {
			l.Entry = append(json.RawMessage(nil), l.Entry...) // ReadSlice's buffer is reused
		}
		if err := fn(n, l); err != nil {
			return good, false, fmt.Errorf("line %d: %w", n, err)
		}
		good += int64(len(b))
	}
}

var errNoHead = errors.New("no signed checkpoint")
