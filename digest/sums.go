package digest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
)

// SumsFile is the name a SHA256SUMS file has in a kit and in a publication.
const SumsFile = "SHA256SUMS"

// Sum is one line of a SHA256SUMS file: a file's path (relative, '/'-separated) and its
// SHA-256, as `sha256sum` prints them: "<64 hex>  <path>".
type Sum struct {
	Path   string
	SHA256 Hex
}

// FormatSums writes sums, in their order, as SHA256SUMS lines.
func FormatSums(sums []Sum) []byte {
	n := 0
	for _, s := range sums {
		n += len(s.SHA256) + 2 + len(s.Path) + 1
	}
	b := make([]byte, 0, n)
	for _, s := range sums {
		b = append(b, s.SHA256...)
		b = append(b, "  "...)
		b = append(b, s.Path...)
		b = append(b, '\n')
	}
	return b
}

// HashSums is the SHA-256 of FormatSums(sums): a kit's hash, a task's tree hash (`sha256sum
// SHA256SUMS`, or `… | xargs -0 sha256sum | sha256sum`).
func HashSums(sums []Sum) Hex {
	h := sha256.New()
	var line []byte
	for _, s := range sums {
		line = append(append(append(append(line[:0], s.SHA256...), "  "...), s.Path...), '\n')
		h.Write(line)
	}
	return HexOf(h.Sum(nil))
}

// SumsRules are what a reader of SHA256SUMS asks of it beyond its lines' form.
type SumsRules struct {
	// Path says what is wrong with a path ("": nothing). Required: a reader names what its
	// paths may be.
	Path func(p string) string
	// Sorted: lines are sorted by path bytes (LC_ALL=C sort), each path once. Without it, a
	// path listed twice is still an error.
	Sorted bool
	// MaxLines bounds the lines (0: no bound).
	MaxLines int
	// MaxLineBytes bounds one line (0: 64 KiB).
	MaxLineBytes int
}

// ParseSums reads a SHA256SUMS file: "<64 lowercase hex>  <path>" lines, each ending in a
// newline. An error names the line and what is wrong with it.
func ParseSums(b []byte, r SumsRules) ([]Sum, error) {
	if r.Path == nil {
		return nil, errors.New("SHA256SUMS: no rule for its paths (a bug in its reader)")
	}
	maxLine := r.MaxLineBytes
	if maxLine == 0 {
		maxLine = 64 << 10
	}
	var out []Sum
	var seen map[string]bool
	if !r.Sorted {
		seen = map[string]bool{}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, min(maxLine, 4096)), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		sum, path, ok := cutSum(line)
		if !ok {
			return nil, fmt.Errorf("line %d is not `<64 lowercase hex>  <path>`: %.80q", n, line)
		}
		if why := r.Path(path); why != "" {
			return nil, fmt.Errorf("line %d: %.80q %s", n, path, why)
		}
		switch {
		case r.Sorted && len(out) > 0 && out[len(out)-1].Path >= path:
			return nil, fmt.Errorf("line %d (%s) is out of order or repeated: lines are sorted by path bytes (LC_ALL=C sort)", n, path)
		case !r.Sorted && seen[path]:
			return nil, fmt.Errorf("line %d: %s is listed twice", n, path)
		case !r.Sorted:
			seen[path] = true
		}
		out = append(out, Sum{Path: path, SHA256: Hex(sum)})
		if r.MaxLines > 0 && len(out) > r.MaxLines {
			return nil, fmt.Errorf("more than %d files listed", r.MaxLines)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", n+1, err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("the last line has no newline")
	}
	return out, nil
}

func cutSum(line string) (sum, path string, ok bool) {
	if len(line) < 64+2+1 || line[64:66] != "  " || !IsHex(line[:64]) {
		return "", "", false
	}
	return line[:64], line[66:], true
}
