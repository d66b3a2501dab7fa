package ledger

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/internal/jsonpass"
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

// FuzzDecodeEntry: an entry read in one pass (jsonpass) is one encoding/json reads too, the
// same; so the one pass changes no entry, only the time to read a ledger.
func FuzzDecodeEntry(f *testing.F) {
	withRerun := amended("r-1", ActionInvalidate)
	withRerun.Link = "https://example.org/report"
	for _, e := range []*Entry{queued("r-1", 1, ""), queued("r-2", 3, "r-1"), ended("r-1", "graded"), ended("r-2", "invalid"), amended("r-1", ActionNote), withRerun} {
		b, err := e.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		s := string(b)
		for _, edit := range [][2]string{{`"run"`, `"RUN"`}, {`"seed":`, `"seed":1,"seed":`}, {`"kind"`, `"x":1,"kind"`},
			{`"time":"`, `"time":null,"x":"`}, {`"run":"`, `"run":"\u0072`}, {`}`, `} {}`}, {`}`, `}x`}} {
			f.Add([]byte(strings.Replace(s, edit[0], edit[1], 1)))
		}
	}
	if !jsonpass.Reads(reflect.TypeFor[Entry]()) {
		f.Fatal("an entry's types have one jsonpass does not read: every entry would take encoding/json")
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var one Entry
		if !jsonpass.Decode(data, &one) {
			return
		}
		var std Entry
		if err := decodeEntryJSON(data, &std); err != nil {
			t.Fatalf("read in one pass, refused by encoding/json (%v): %q", err, data)
		}
		if !reflect.DeepEqual(one, std) {
			t.Fatalf("the readings differ for %q:\n%+v\n%+v", data, one, std)
		}
	})
}

// FuzzEntryLine: a ledger line read in one pass (fastEntryLine) is read alike by encoding/json:
// the same entry bytes, no checkpoint, and the same entry.
func FuzzEntryLine(f *testing.F) {
	for _, e := range []*Entry{queued("r-1", 1, ""), ended("r-1", "graded")} {
		b, _ := e.Encode()
		l := entryLine(b)
		f.Add(l)
		f.Add(bytes.Replace(l, []byte(`}}`), []byte(`},"checkpoint":"x"}`), 1))
		f.Add(bytes.Replace(l, []byte(`{"entry":`), []byte(`{"entry": `), 1))
		f.Add(bytes.Replace(l, []byte(`}}`), []byte(`} , {}}`), 1))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastEntryLine(b)
		if !ok {
			return
		}
		var std line
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil || std.Checkpoint != "" || !bytes.Equal(std.Entry, fast.Entry) {
			t.Fatalf("read in one pass as entry %q; encoding/json reads %+v (%v)", fast.Entry, std, err)
		}
		var e Entry
		if err := decodeEntryJSON(std.Entry, &e); err != nil || !reflect.DeepEqual(&e, fast.decoded) {
			t.Fatalf("the entry reads differently (%v):\n%+v\n%+v", err, e, fast.decoded)
		}
	})
}
