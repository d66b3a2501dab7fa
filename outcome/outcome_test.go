package outcome

import "testing"

func TestParse(t *testing.T) {
	for _, o := range All {
		if got, err := Parse(string(o)); err != nil || got != o {
			t.Errorf("Parse(%q) = %q, %v", o, got, err)
		}
	}
	for _, s := range []string{"", "Graded", "graded ", "queued", "running", "none", "invalid\x00"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q): no error", s)
		}
	}
}
