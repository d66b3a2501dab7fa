package ledger

import (
	"bytes"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"
)

// FuzzRead: any bytes as a published ledger either read and verify or fail with an error;
// never a panic, and what reads has a head over all its entries.
func FuzzRead(f *testing.F) {
	s, v := testKey(f)
	_, l := writeLogTB(f, s, queued("r-1", 1, ""), ended("r-1", "graded"), queued("r-2", 2, ""))
	var b bytes.Buffer
	l.Export(&b)
	f.Add(b.Bytes())
	f.Add([]byte(`{"entry":{"kind":"queued"}}` + "\n"))
	f.Add([]byte(`{"checkpoint":"o\n1\nAAAA\n\n— o x\n"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		led, err := Read(bytes.NewReader(data), "fuzz", []signature.Verifier{v})
		if err == nil && led.Head.Size != uint64(len(led.Entries)) {
			t.Fatalf("a ledger read whose head covers %d of %d entries", led.Head.Size, len(led.Entries))
		}
		var out bytes.Buffer
		Export(bytes.NewReader(data), &out)
		ParseCheckpoint(string(data))
		if len(data) < MaxCheckpointBytes {
			OpenCheckpoint(string(data), "", []signature.Verifier{v})
		}
		DecodeEntry(data)
	})
}
