package tpm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// MaxResponseBytes bounds one TPM response (a TPM's largest is a few KiB).
const MaxResponseBytes = 64 << 10

// socketTPM speaks raw TPM 2.0 commands to a software TPM's socket (swtpm socket --server
// type=unixio): a connection a command, as swtpm serves one client at a time (another process's
// commands, sealrun tpm answer beside sealrund, go between), the command, then its whole response,
// whose size its header says. One command at a time.
type socketTPM struct {
	mu      sync.Mutex
	path    string
	timeout time.Duration
	closed  bool
}

// dialSocket checks the TPM's socket takes connections, trying again for up to timeout while it
// refuses them (a software TPM makes its socket before it listens on it, and takes one client at
// a time).
func dialSocket(path string, timeout time.Duration) (*socketTPM, error) {
	s := &socketTPM{path: path, timeout: timeout}
	c, err := s.dial()
	if err != nil {
		return nil, err
	}
	c.Close()
	return s, nil
}

func (s *socketTPM) dial() (net.Conn, error) {
	deadline := time.Now().Add(s.timeout)
	for {
		c, err := net.Dial("unix", s.path)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("TPM socket %s: %w", s.path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Send writes a command and reads its response.
func (s *socketTPM) Send(cmd []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("TPM socket closed")
	}
	conn, err := s.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := conn.Write(cmd); err != nil {
		return nil, fmt.Errorf("TPM socket %s: %w", s.path, err)
	}
	head := make([]byte, 10) // tag, size, response code
	if _, err := io.ReadFull(conn, head); err != nil {
		return nil, fmt.Errorf("TPM socket %s: the response: %w", s.path, err)
	}
	size := binary.BigEndian.Uint32(head[2:6])
	if size < 10 || size > MaxResponseBytes {
		return nil, fmt.Errorf("TPM socket %s: a response of %d bytes", s.path, size)
	}
	rsp := make([]byte, size)
	copy(rsp, head)
	if _, err := io.ReadFull(conn, rsp[10:]); err != nil {
		return nil, fmt.Errorf("TPM socket %s: the response: %w", s.path, err)
	}
	return rsp, nil
}

// Close ends the use of the socket.
func (s *socketTPM) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}
