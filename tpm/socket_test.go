//go:build linux

package tpm

import (
	"encoding/binary"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A TPM socket that answers what no TPM would: a response bigger than any, one shorter than its
// header, one cut off; each an error naming the socket, never a hang or a panic. A socket that
// refuses at first (made before it listens) is waited for.
func TestSocketHostile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tpm.sock")
	answers := make(chan []byte, 8)
	start := make(chan struct{})
	go func() {
		<-start
		l, err := net.Listen("unix", path)
		if err != nil {
			return
		}
		defer l.Close()
		for a := range answers {
			c, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 64)
			c.Read(buf)
			c.Write(a)
			c.Close()
		}
	}()
	time.AfterFunc(200*time.Millisecond, func() { close(start) })
	answers <- nil // the dial check's connection
	s, err := dialSocket(path, 10*time.Second)
	if err != nil {
		t.Fatalf("a socket that listens late: %v", err)
	}
	head := func(size uint32) []byte {
		b := make([]byte, 10)
		binary.BigEndian.PutUint16(b, 0x8001)
		binary.BigEndian.PutUint32(b[2:], size)
		return b
	}
	for name, a := range map[string][]byte{
		"a response of 1 GiB":   head(1 << 30),
		"a size under 10":       head(3),
		"cut off":               append(head(100), 1, 2, 3),
		"shorter than its head": {0x80, 0x01},
	} {
		answers <- a
		if _, err := s.Send([]byte{0x80, 0x01, 0, 0, 0, 12, 0, 0, 1, 0x7b, 0, 8}); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	close(answers)
	s.Close()
	if _, err := s.Send(nil); err == nil {
		t.Error("a closed socket sent")
	}
}
