package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: no input panics; every input either parses (with a stable id) or gives an
// *InvalidTrackError with at least one problem. The seed corpus runs in `make test`.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	for _, name := range []string{"ari-v1.toml", "demo.toml"} {
		if b, err := os.ReadFile(filepath.Join("..", "tracks", name)); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{"", "[", "[track]\nname=1.5", "a=1979-05-27", "[[x]]\n[[x]]", "\xff\xfe", "x=\"\\u0000\"", "[budget]\nwall=\"9999999h\"\nreserve=\"1ns\"\ncall_limit=\"-0s\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse("fuzz.toml", data)
		if err != nil {
			var it *InvalidTrackError
			if !errors.As(err, &it) || len(it.Problems) == 0 {
				t.Fatalf("error is not an *InvalidTrackError with problems: %v", err)
			}
			return
		}
		again, err := Parse("fuzz.toml", data)
		if err != nil || again.ID != tr.ID {
			t.Fatalf("second parse differs: %v %s %s", err, tr.ID, again.ID)
		}
	})
}
