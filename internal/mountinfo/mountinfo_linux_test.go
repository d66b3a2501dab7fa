package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:           "/plain",
		`/with\040space`:   "/with space",
		`/tab\011and\134b`: "/tab\tand\\b",
		`/short\04`:        `/short\04`,
		`/not\999octal`:    `/not\999octal`,
		`/trailing\`:       `/trailing\`,
		`/nl\012`:          "/nl\n",
		`\040\040`:         "  ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// The table holds the root mount and /proc, each with an id and its type.
func TestTable(t *testing.T) {
	var root, proc bool
	for _, m := range Table() {
		if m.ID <= 0 || m.Type == "" {
			t.Errorf("entry %+v", m)
		}
		root = root || m.Point == "/"
		proc = proc || m.Point == "/proc" && m.Type == "proc"
	}
	if !root || !proc {
		t.Errorf("no / (%v) or /proc (%v) in the mount table", root, proc)
	}
}
