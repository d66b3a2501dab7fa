package trackpin

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sealrun/sealrun/policy"
)

// trackText edits values and keeps everything else byte for byte.
func TestTrackTextSet(t *testing.T) {
	in := "# head\n[exam]\nsha256 = \"aa\"   # placeholder\nquestions = 3 # the count\n\n[kit]\n# only a comment\n"
	tt := newTrackText(in)
	for _, s := range [][4]string{{"exam", "sha256", `"bb"`, "# from x"}, {"exam", "questions", "9", "# n"}, {"exam", "context_bytes", "64", "# new"}, {"kit", "sha256", `"cc"`, ""}} {
		if err := tt.set(s[0], s[1], s[2], s[3]); err != nil {
			t.Fatal(err)
		}
	}
	want := "# head\n[exam]\nsha256 = \"bb\"  # from x\nquestions = 9  # the count\ncontext_bytes = 64  # new\n\n[kit]\nsha256 = \"cc\"\n# only a comment\n"
	if got := tt.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if err := tt.set("images", "runner", `"x"`, ""); err == nil || !strings.Contains(err.Error(), "no [images] table") {
		t.Errorf("missing table: %v", err)
	}
}

// Pin refuses what the track's kind does not take as a usage error, and a result that still
// holds a placeholder, before it looks at any store.
func TestPinRefusals(t *testing.T) {
	// A track that does not parse: its problems come back as policy's error, which the CLI prints
	// as `track validate` does.
	var it *policy.InvalidTrackError
	if _, err := Pin(t.TempDir(), "t.toml", []byte("[track]\nname = \"t\"\n"), "out.toml", Pins{}); !errors.As(err, &it) {
		t.Fatalf("a broken track: %v; want a *policy.InvalidTrackError", err)
	}
	ari, err := os.ReadFile("../tracks/ari-v1.toml")
	if err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	if _, err := Pin(t.TempDir(), "ari-v1.toml", ari, "out.toml", Pins{Task: "x"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "is an exam track") {
		t.Errorf("--task on an exam track: %v", err)
	}
	if _, err := Pin(t.TempDir(), "ari-v1.toml", ari, "out.toml", Pins{}); err == nil || !strings.Contains(err.Error(), "still holds placeholders, so out.toml was not written: exam.sha256, exam.validation_sha256, kit.sha256") || !strings.HasSuffix(err.Error(), "; give trackpin.Pins.Exam, trackpin.Pins.Kit, trackpin.Pins.Runner and trackpin.Pins.Grader") {
		t.Errorf("nothing pinned: %v", err)
	}
	digits, err := os.ReadFile("../tracks/airs-digits.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Pin(t.TempDir(), "airs-digits.toml", digits, "out.toml", Pins{Kit: "x"}); !errors.As(err, &ue) || !strings.Contains(err.Error(), "is a task track") {
		t.Errorf("--kit on a task track: %v", err)
	}
}
