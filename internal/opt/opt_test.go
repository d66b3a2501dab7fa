package opt

import (
	"errors"
	"fmt"
	"testing"
)

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"Key": "key", "TSAChain": "tsa-chain", "AllowUnchecked": "allow-unchecked",
		"MaxUnpackBytes": "max-unpack-bytes", "Out": "out", "RerunOf": "rerun-of", "GPUs": "gpus", "PersonKey": "person-key", "rerun_of": "rerun-of", "person.key": "person-key", "proctors": "proctors"} {
		if got := Kebab(in); got != want {
			t.Errorf("Kebab(%q) = %q; want %q", in, got, want)
		}
	}
}

// A library's text names its own options; a command line's names its flags, wherever the
// error sits in a chain of wrappings.
func TestRender(t *testing.T) {
	e := New("verify.Options", "Timestamp", "is checked with the authority's chain", "TSAChain")
	if got, want := e.Error(), "verify.Options.Timestamp: is checked with the authority's chain; give verify.Options.TSAChain"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
	flags := func(o string) string { return "--" + Kebab(o) }
	wrapped := fmt.Errorf("ledger export: %w", e)
	if got, want := Render(wrapped, flags), "ledger export: --timestamp: is checked with the authority's chain; give --tsa-chain"; got != want {
		t.Errorf("Render = %q; want %q", got, want)
	}
	cause := errors.New("no such file")
	w := Wrap("publish.Options", "Track", cause)
	if !errors.Is(w, cause) || Render(w, flags) != "--track: no such file" {
		t.Errorf("Wrap: %q, Is %v", Render(w, flags), errors.Is(w, cause))
	}
	whole := New("trackpin.Pins", "", "track t.toml still holds placeholders: exam.sha256, kit.sha256", "Exam", "Kit")
	if got, want := Render(whole, flags), "track t.toml still holds placeholders: exam.sha256, kit.sha256; give --exam and --kit"; got != want {
		t.Errorf("Render = %q; want %q", got, want)
	}
	plain := errors.New("disk full")
	if Render(plain, flags) != "disk full" {
		t.Error("an error with no option changed")
	}
}
