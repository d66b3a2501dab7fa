package images

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// The read-ahead gives back the stream byte for byte, whatever the sizes on either side, and
// the stream's own error where it has one.
func TestReadAhead(t *testing.T) {
	data := make([]byte, 5*readAheadChunk+12345)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for name, src := range map[string]io.Reader{
		"whole":     bytes.NewReader(data),
		"one byte":  iotest.OneByteReader(bytes.NewReader(data[:3*4096])),
		"half":      iotest.HalfReader(bytes.NewReader(data)),
		"empty":     bytes.NewReader(nil),
		"exact":     bytes.NewReader(data[:2*readAheadChunk]),
		"data+EOF":  iotest.DataErrReader(bytes.NewReader(data)),
		"timeout":   iotest.TimeoutReader(bytes.NewReader(data)),
		"tiny read": bytes.NewReader(data[:7]),
	} {
		t.Run(name, func(t *testing.T) {
			ra := newReadAhead(src)
			defer ra.Close()
			got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(ra, 1<<20)))
			if name != "timeout" {
				rest, err2 := io.ReadAll(ra)
				got = append(got, rest...)
				if err == nil {
					err = err2
				}
			}
			switch {
			case name == "timeout":
				// the stream's second read fails: its error comes through, after what came before
				if !errors.Is(err, iotest.ErrTimeout) && len(got) < 1<<20 {
					t.Errorf("got %d bytes, %v; want the stream's timeout", len(got), err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				want := data
				switch name {
				case "one byte":
					want = data[:3*4096]
				case "empty":
					want = nil
				case "exact":
					want = data[:2*readAheadChunk]
				case "tiny read":
					want = data[:7]
				}
				if !bytes.Equal(got, want) {
					t.Errorf("got %d bytes, want %d (equal: %v)", len(got), len(want), bytes.Equal(got, want))
				}
			}
		})
	}
}

// Closing mid-stream stops the reading goroutine (it never reads the stream after Close returns).
func TestReadAheadCloseMidStream(t *testing.T) {
	src := &countingReader{r: strings.NewReader(strings.Repeat("x", 20*readAheadChunk))}
	ra := newReadAhead(src)
	buf := make([]byte, 10)
	if _, err := ra.Read(buf); err != nil {
		t.Fatal(err)
	}
	ra.Close()
	ra.Close() // twice is harmless
	n := src.n
	if n > (readAheadDepth+2)*readAheadChunk {
		t.Errorf("read %d bytes ahead, more than its %d chunks", n, readAheadDepth+2)
	}
	src.closed = true // a read from now on is a read after Close
	if src.readAfterClose {
		t.Error("the stream was read after Close returned")
	}
}

type countingReader struct {
	r                      io.Reader
	n                      int
	closed, readAfterClose bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.closed {
		c.readAfterClose = true
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A layer may carry tar's padding after its archive ends, not more than 1 MiB of anything.
func TestLayerTail(t *testing.T) {
	data := tarOf(t, file("a", "x"))
	ok := append(bytes.Clone(data), make([]byte, 64<<10)...)
	if _, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", ok)}, newSandbox(t).rootfs, UnpackOptions{}); err != nil {
		t.Errorf("64 KiB of padding: %v", err)
	}
	long := append(bytes.Clone(data), bytes.Repeat([]byte("junk"), 300<<10)...)
	_, err := Unpack(context.Background(), "img", []Layer{layerOf("sha256:1", long)}, newSandbox(t).rootfs, UnpackOptions{})
	if err == nil || !strings.Contains(err.Error(), "more than 1 MiB after its tar archive ends") || !strings.Contains(err.Error(), "sha256:1") {
		t.Errorf("1.2 MiB after the archive: %v", err)
	}
}
