package leaderboard

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReadFileCapped: whole files, into a buffer used again, capped one byte over the limit,
// and errors that say the step and the cause.
func TestReadFileCapped(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := bytes.Repeat([]byte("b"), 5000)
	small := []byte(`{"payloadType":"x"}`)
	buf := make([]byte, 0, 8192)
	for _, c := range []struct {
		name string
		data []byte
		max  int
		want int
	}{
		{"empty", nil, 100, 0},
		{"small", small, 100, len(small)},
		{"exactly the cap", big[:100], 100, 100},
		{"one over", big[:101], 100, 101},
		{"far over", big, 100, 101},
		{"large, into a smaller buffer", big, 10000, len(big)},
		{"small, into the larger buffer", small, 10000, len(small)},
		{"511 bytes (the unsized default, minus one)", big[:511], 10000, 511},
		{"512 bytes", big[:512], 10000, 512},
	} {
		got, err := readFileCapped(write(strings.ReplaceAll(c.name, " ", "_"), c.data), c.max, buf)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != c.want || !bytes.Equal(got, c.data[:c.want]) {
			t.Fatalf("%s: read %d bytes, want the first %d", c.name, len(got), c.want)
		}
		buf = got[:0]
	}
	if _, err := readFileCapped(filepath.Join(dir, "absent"), 100, nil); err == nil || !strings.HasPrefix(err.Error(), "cannot open: ") || strings.Contains(err.Error(), dir) {
		t.Fatalf("absent file: %v (want the step and the cause, not the path: the rejection names it)", err)
	}
	if runtime.GOOS != "windows" {
		if _, err := readFileCapped(dir, 100, nil); err == nil || !strings.Contains(err.Error(), "directory") {
			t.Fatalf("a directory: %v", err)
		}
		// A file that is not regular has no size to trust: read to the cap.
		if got, err := readFileCapped("/dev/zero", 1000, nil); err != nil || len(got) != 1001 {
			t.Fatalf("/dev/zero: %d bytes, %v", len(got), err)
		}
	}
}
