package publish

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteRefuses: what cannot be published is refused before anything is written, with the
// kind of error the CLI turns into its exit status, and the message naming the fix.
func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	exists := filepath.Join(dir, "exists")
	os.Mkdir(exists, 0o755)
	for _, c := range []struct {
		o    Options
		kind Kind
		want string
	}{
		{Options{Suite: "exam", Keys: []string{"k.pub"}}, Usage, "give the publication directory"},
		{Options{Out: filepath.Join(dir, "p"), Suite: "exam"}, Usage, "give the public key"},
		{Options{Out: filepath.Join(dir, "p"), Suite: "swe", Keys: []string{"k.pub"}}, Usage, `suite "swe": use exam or airs`},
		{Options{Out: exists, Suite: "exam", Keys: []string{"k.pub"}}, Usage, "exists; a publication is written once"},
		{Options{Out: filepath.Join(dir, "p"), Suite: "exam", Keys: []string{filepath.Join(dir, "missing.pub")}}, IO, "missing.pub"},
	} {
		_, err := Write(c.o)
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want kind %d and %q", c.o, err, c.kind, c.want)
		}
		if _, serr := os.Stat(filepath.Join(dir, "p")); serr == nil {
			t.Fatalf("%+v: a publication was written", c.o)
		}
	}
}
