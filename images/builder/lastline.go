package builder

import (
	"strings"
	"sync"
)

// lastLine keeps the last line written to it that starts with prefix.
type lastLine struct {
	mu     sync.Mutex
	prefix string
	line   string
	buf    []byte
}

func (l *lastLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(l.buf[:i])); strings.HasPrefix(line, l.prefix) {
			l.line = line
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.buf = nil
	}
	return len(p), nil
}

func (l *lastLine) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.line
}
