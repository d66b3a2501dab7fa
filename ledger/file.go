package ledger

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sealrun/sealrun/internal/jsonpass"
)

// MaxLineBytes bounds one line of a ledger file.
const MaxLineBytes = MaxEntryBytes + MaxCheckpointBytes + 64

// line is one line of a ledger file: an entry (the leaf bytes, verbatim) or a signed
// checkpoint of the entries before it.
type line struct {
	Entry      json.RawMessage `json:"entry,omitempty"`
	Checkpoint string          `json:"checkpoint,omitempty"`
	decoded    *Entry          // Entry read already, as the line was (jsonpass), not yet checked
}

// entry reads the line's entry (DecodeEntry's reading and checks), once.
func (l line) entry() (*Entry, error) {
	if l.decoded == nil {
		return DecodeEntry(l.Entry)
	}
	if err := l.decoded.Check(); err != nil {
		return nil, err
	}
	return l.decoded, nil
}

// fastEntryLine reads a line that is {"entry":{...}} and nothing else, as sealrund writes them,
// with the entry in jsonpass's subset: the entry is read in the same pass as the line. What it
// reads, encoding/json reads alike (the entry's bytes are one JSON object, so the line is an
// object of that one member); anything else is read by encoding/json (the two are held
// to one reading: FuzzEntryLine).
func fastEntryLine(b []byte) (line, bool) {
	x, ok := bytes.CutPrefix(b, []byte(`{"entry":`))
	if !ok {
		return line{}, false
	}
	if x, ok = bytes.CutSuffix(x, []byte("}\n")); !ok || len(x) < 2 || len(x) > MaxEntryBytes || x[0] != '{' || x[len(x)-1] != '}' {
		return line{}, false
	}
	var e Entry
	if !jsonpass.Decode(x, &e) {
		return line{}, false
	}
	return line{Entry: append(json.RawMessage(nil), x...), decoded: &e}, true
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
		l, fast := fastEntryLine(b)
		if !fast {
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
		}
		if err := fn(n, l); err != nil {
			return good, false, fmt.Errorf("line %d: %w", n, err)
		}
		good += int64(len(b))
	}
}

var errNoHead = errors.New("no signed checkpoint")
