package api

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestFrames: attach frames round-trip; a length over MaxFrame is refused before its payload is
// read, a cut-short frame is named, and a window size is COLSxROWS within 1 to 4096 or refused.
func TestFrames(t *testing.T) {
	var b bytes.Buffer
	for _, p := range [][]byte{nil, []byte("ls\r"), bytes.Repeat([]byte{0xff}, MaxFrame)} {
		if err := WriteFrame(&b, FrameInput, p); err != nil {
			t.Fatal(err)
		}
		typ, got, err := ReadFrame(&b)
		if err != nil || typ != FrameInput || !bytes.Equal(got, p) {
			t.Errorf("round trip of %d bytes: %q %d %v", len(p), typ, len(got), err)
		}
	}
	if err := WriteFrame(&b, FrameOutput, make([]byte, MaxFrame+1)); err == nil {
		t.Error("a frame over MaxFrame was written")
	}
	for _, c := range []struct {
		in   string
		want string
	}{
		{"i\xff\xff\xff\xff", "at most 65536"},
		{"i\x00\x01\x00\x01", "at most 65536"},
		{"i\x00\x00\x00\x05ab", "cut short"},
		{"i\x00\x00", "EOF"},
		{"", "EOF"},
	} {
		_, _, err := ReadFrame(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadFrame(%q): %v; want %q", c.in, err, c.want)
		}
	}
	// A refused length reads nothing more: the reader is left at the payload.
	r := strings.NewReader("i\x00\x10\x00\x00rest")
	ReadFrame(r)
	if rest, _ := io.ReadAll(r); string(rest) != "rest" {
		t.Errorf("after a refused length, %q was left; want the payload unread", rest)
	}
	for _, ok := range []string{"80x24", "1x1", "4096x4096"} {
		if _, _, err := ParseSize([]byte(ok)); err != nil {
			t.Errorf("ParseSize(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "80", "80x", "x24", "0x24", "80x0", "4097x1", "-1x5", "80x24x1", "eightyxtwenty", " 80x24", strings.Repeat("9", 5000) + "x1"} {
		if _, _, err := ParseSize([]byte(bad)); err == nil || len(err.Error()) > 200 {
			t.Errorf("ParseSize(%.30q): %v", bad, err)
		}
	}
	if c, r, _ := ParseSize(FormatSize(132, 43)); c != 132 || r != 43 {
		t.Errorf("FormatSize round trip: %dx%d", c, r)
	}
}

// FuzzReadFrame: any bytes give a frame or an error, never a payload over MaxFrame.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte("i\x00\x00\x00\x03ls\r"))
	f.Add([]byte("r\x00\x00\x00\x0580x24"))
	f.Add([]byte("\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, p, err := ReadFrame(bytes.NewReader(b))
		if err == nil && len(p) > MaxFrame {
			t.Fatalf("a %d-byte payload", len(p))
		}
		ParseSize(b)
	})
}
